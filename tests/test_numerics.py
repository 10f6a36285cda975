"""Finite losses and gradients under mixed precision and extreme τ; the NaN-loss guard."""

from __future__ import annotations

import copy

import pytest
import torch
from lightning.pytorch import Trainer
from torch import nn

from fixtures.backbones import tiny_resnet
from fixtures.synthetic_datamodule import SyntheticDataModule
from torch_uncertainty_signorm import sharing_penalty, signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
from torch_uncertainty_signorm.routines.numerics import check_finite_losses

M = 3
TAUS = [1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3]


@pytest.mark.parametrize("tau", TAUS)
@pytest.mark.parametrize("logit_scale", [1.0, 40.0], ids=["moderate", "saturated"])
def test_penalty_and_gradient_finite_for_every_tau(tau, logit_scale):
    logits = (torch.randn(M, 4096) * logit_scale).requires_grad_()
    penalty = sharing_penalty(torch.sigmoid(logits), tau)
    penalty.backward()
    assert torch.isfinite(penalty) and penalty <= 0
    assert torch.isfinite(logits.grad).all()
    # The gradient w.r.t. the importances is (1 - M p) / τ: bounded by (M - 1) / τ.
    importances = torch.sigmoid(logits.detach()).requires_grad_()
    sharing_penalty(importances, tau).backward()
    assert importances.grad.abs().max() <= (M - 1) / tau * (1 + 1e-5)


def _ensemble(tau: float) -> nn.Module:
    torch.manual_seed(0)
    return signorm_ensemble(tiny_resnet(18), M, tau=tau, diversity_strength=1e-2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("tau", [1e-3, 1e3])
def test_mixed_precision_forward_backward_is_finite(dtype, tau):
    """CPU autocast in both half types (what ``bf16-mixed``/``16-mixed`` run)."""
    model = _ensemble(tau).train()
    inputs = torch.randn(2, 3, 16, 16) * 3
    targets = torch.randint(0, 10, (2,)).repeat(M)
    with torch.autocast("cpu", dtype=dtype):
        logits = model(inputs)
        task_loss = nn.functional.cross_entropy(logits, targets)
        diversity_loss = model.diversity_loss()
    assert logits.dtype == dtype  # the backbone really ran in half precision
    (task_loss + diversity_loss).backward()
    assert torch.isfinite(task_loss) and torch.isfinite(diversity_loss)
    bad = [n for n, p in model.named_parameters() if not torch.isfinite(p.grad).all()]
    assert not bad


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
def test_lightning_mixed_precision_trains_finite(precision):
    """Through the Trainer (on CPU Lightning runs ``16-mixed`` as ``bf16-mixed``)."""
    model = _ensemble(1e-3)
    routine = SigmaNormClassificationRoutine(
        model,
        10,
        nn.CrossEntropyLoss(),
        optim_recipe=lambda m: torch.optim.SGD(m.parameters(), lr=0.05),
    )
    trainer = Trainer(
        accelerator="cpu",
        precision=precision,
        max_steps=3,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        limit_val_batches=0,
    )
    trainer.fit(routine, SyntheticDataModule(batch_size=4, num_samples=12))
    assert trainer.global_step == 3
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert torch.isfinite(trainer.callback_metrics["train/total_loss"])


def _routine() -> SigmaNormClassificationRoutine:
    return SigmaNormClassificationRoutine(
        _ensemble(0.1),
        10,
        nn.CrossEntropyLoss(),
        optim_recipe=lambda m: torch.optim.SGD(m.parameters(), lr=0.05),
    )


class _NaNInputs(SyntheticDataModule):
    def setup(self, stage=None):
        super().setup(stage)
        self.train.tensors[0][0, 0, 0, 0] = float("nan")


@pytest.mark.parametrize(
    ("corrupt", "term"),
    [("inputs", "task_loss"), ("strength", "diversity_loss")],
)
def test_nan_loss_stops_training_naming_the_term(corrupt, term):
    routine = _routine()
    data = (_NaNInputs if corrupt == "inputs" else SyntheticDataModule)(batch_size=8)
    if corrupt == "strength":
        routine.model.penalty.diversity_strength = float("inf")  # as a corrupted config would
    before = copy.deepcopy(routine.model.state_dict())
    trainer = Trainer(
        accelerator="cpu",
        max_steps=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        limit_val_batches=0,
    )
    with pytest.raises(FloatingPointError, match=f"step 0, produced by the {term} ") as error:
        trainer.fit(routine, data)
    other = {"task_loss", "diversity_loss"} - {term}
    assert f"produced by the {other.pop()}" not in str(error.value)
    parameters = dict(routine.model.named_parameters())
    assert all(torch.equal(parameters[k], before[k]) for k in parameters)  # no step was taken


def test_check_names_every_non_finite_term():
    check_finite_losses(3, task_loss=torch.tensor(1.0), diversity_loss=torch.tensor(-2.0))
    with pytest.raises(
        FloatingPointError,
        match=r"task_loss and the diversity_loss \(task_loss = nan, "
        r"diversity_loss = inf\)",
    ):
        check_finite_losses(
            5, task_loss=torch.tensor(float("nan")), diversity_loss=torch.tensor(float("inf"))
        )
