"""WarmupCosineLR follows its equation and scales every group (the command steps it per step: the
lab's lab/tests/test_lr_schedulers.py)."""

from __future__ import annotations

import math

import pytest
import torch

from torch_uncertainty_signorm.optim_recipes import WarmupCosineLR


def _optimizer(lr: float = 0.01) -> torch.optim.SGD:
    groups = [
        {"params": [torch.nn.Parameter(torch.zeros(1))]},
        {"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 100 * lr},
    ]
    return torch.optim.SGD(groups, lr=lr, momentum=0.9)


def _schedule(scheduler: WarmupCosineLR, optimizer, steps: int) -> list[list[float]]:
    lrs = []
    for _ in range(steps + 1):
        lrs.append([group["lr"] for group in optimizer.param_groups])
        optimizer.step()
        scheduler.step()
    return lrs


@pytest.mark.parametrize("warmup", [0, 5])
def test_linear_warmup_then_cosine_decay(warmup):
    total, lr, start = 20, 0.01, 1e-3
    optimizer = _optimizer(lr)
    lrs = _schedule(
        WarmupCosineLR(optimizer, total, warmup, warmup_start_factor=start), optimizer, total
    )
    for step, (base, scale) in enumerate(lrs):
        if step < warmup:
            expected = lr * (start + (1 - start) * step / warmup)
        else:
            expected = 0.5 * lr * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))
        assert base == pytest.approx(expected, abs=1e-12)
        assert scale == pytest.approx(100 * expected, abs=1e-10)  # every group keeps its ratio
    assert lrs[warmup][0] == pytest.approx(lr) and lrs[total][0] == pytest.approx(0, abs=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"total_steps": 10, "warmup_steps": 10}, "warmup_steps=10 must be smaller"),
        ({"total_steps": -1}, "total_steps must be an integer >= 0, got -1"),
        ({"total_steps": 10, "warmup_steps": 2.5}, "warmup_steps must be an integer"),
        (
            {"total_steps": 10, "warmup_start_factor": 0.0},
            r"warmup_start_factor must be in \(0, 1\]",
        ),
    ],
)
def test_bad_arguments_name_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WarmupCosineLR(_optimizer(), **kwargs)
