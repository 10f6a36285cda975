"""The command steps WarmupCosineLR every optimisation step and other schedulers every epoch (the
schedule itself: the method's tests/test_lr_schedulers.py)."""

from __future__ import annotations

import torch
from torch.optim.lr_scheduler import MultiStepLR

from signorm_lab.cli import TUSigmaNormCLI
from torch_uncertainty_signorm.optim_recipes import WarmupCosineLR


def _optimizer(lr: float = 0.01) -> torch.optim.SGD:
    groups = [
        {"params": [torch.nn.Parameter(torch.zeros(1))]},
        {"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 100 * lr},
    ]
    return torch.optim.SGD(groups, lr=lr, momentum=0.9)


def test_the_command_steps_it_every_optimisation_step_and_others_every_epoch():
    optimizer = _optimizer()
    per_step = TUSigmaNormCLI.configure_optimizers(None, optimizer, WarmupCosineLR(optimizer, 10))
    assert per_step["lr_scheduler"]["interval"] == "step"
    optimizer = _optimizer()
    per_epoch = TUSigmaNormCLI.configure_optimizers(None, optimizer, MultiStepLR(optimizer, [5]))
    assert per_epoch[0] == [optimizer] and isinstance(per_epoch[1][0], MultiStepLR)
