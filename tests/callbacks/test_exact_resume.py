"""Interrupt-and-resume equals the uninterrupted run: weights, optimiser, metrics, bit for bit."""

from __future__ import annotations

import os
import signal

import pytest
import torch
from fixtures.backbones import tiny_resnet
from fixtures.synthetic_datamodule import SyntheticDataModule
from lightning.pytorch import Callback, Trainer, seed_everything
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch import nn

from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.callbacks.exact_resume import (
    ExactResumeCheckpoint,
    _restore_rng_states,
)
from torch_uncertainty_signorm.optim import signorm_param_groups
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine

M, EPOCHS, BATCHES_PER_EPOCH = 2, 2, 5


def _optim(routine: nn.Module) -> dict:
    optimizer = torch.optim.SGD(signorm_param_groups(routine, lr=0.05), momentum=0.9,
                                weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def _routine() -> SigmaNormClassificationRoutine:
    model = signorm_ensemble(tiny_resnet(18), M, regularized_layers="resnet18")
    return SigmaNormClassificationRoutine(model, 10, nn.CrossEntropyLoss(), optim_recipe=_optim)


class _SigtermAtStep(Callback):
    """Sends this process SIGTERM while training batch ``step`` (0-based global step)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


def _fit(root, *callbacks, ckpt_path=None):
    seed_everything(0)
    routine = _routine()
    data = SyntheticDataModule(batch_size=4, num_samples=4 * BATCHES_PER_EPOCH)
    trainer = Trainer(
        accelerator="cpu", max_epochs=EPOCHS, logger=False, enable_progress_bar=False,
        enable_model_summary=False, default_root_dir=root, num_sanity_val_steps=0,
        callbacks=[ExactResumeCheckpoint(), *callbacks],
    )
    trainer.fit(routine, data, ckpt_path=ckpt_path)
    return routine, trainer


def _assert_same_state(actual: nn.Module, expected: nn.Module) -> None:
    actual_state, expected_state = actual.state_dict(), expected.state_dict()
    assert actual_state.keys() == expected_state.keys()
    different = [k for k in expected_state if not torch.equal(actual_state[k], expected_state[k])]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"


@pytest.mark.slow
@pytest.mark.parametrize("interrupt_at", [2, 7], ids=["mid-first-epoch", "mid-second-epoch"])
def test_sigterm_then_resume_equals_uninterrupted_run(tmp_path, interrupt_at):
    reference, reference_trainer = _fit(tmp_path / "reference")

    with pytest.raises(SIGTERMException):
        _fit(tmp_path / "run", _SigtermAtStep(interrupt_at))
    checkpoint_path = tmp_path / "run" / "checkpoints" / "interrupted.ckpt"
    checkpoint = torch.load(checkpoint_path, weights_only=True)
    assert checkpoint["global_step"] == interrupt_at + 1  # the batch in flight was completed

    resumed, resumed_trainer = _fit(tmp_path / "run", ckpt_path=checkpoint_path)

    assert resumed_trainer.global_step == reference_trainer.global_step == EPOCHS * 5
    _assert_same_state(resumed, reference)
    optimizers = resumed_trainer.optimizers[0], reference_trainer.optimizers[0]
    momenta = [[s["momentum_buffer"] for s in opt.state.values()] for opt in optimizers]
    assert all(torch.equal(a, b) for a, b in zip(*momenta, strict=True))
    assert resumed_trainer.lr_scheduler_configs[0].scheduler.state_dict() == (
        reference_trainer.lr_scheduler_configs[0].scheduler.state_dict()
    )
    metrics = reference_trainer.callback_metrics
    assert resumed_trainer.callback_metrics.keys() == metrics.keys()
    assert any(k.startswith("val/") for k in metrics)
    assert any(k.startswith("train") for k in metrics)
    for key, value in metrics.items():
        torch.testing.assert_close(resumed_trainer.callback_metrics[key], value, rtol=0, atol=0,
                                   equal_nan=True, msg=key)
    assert not checkpoint_path.exists()  # removed once the resumed run completed


def test_rng_states_survive_a_weights_only_round_trip(tmp_path):
    """The saved RNG states load with weights_only=True and replay the same random numbers."""
    import random

    import numpy as np

    torch.save(ExactResumeCheckpoint().state_dict(), tmp_path / "state.pt")
    draws = (torch.rand(3), np.random.rand(3), random.random())
    callback = ExactResumeCheckpoint()
    callback.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    _restore_rng_states(callback._rng_to_restore)
    assert torch.equal(torch.rand(3), draws[0])
    assert np.array_equal(np.random.rand(3), draws[1])
    assert random.random() == draws[2]


def test_checkpoint_path_defaults_and_explicit(tmp_path):
    assert ExactResumeCheckpoint(tmp_path, "x").ckpt_path(None) == tmp_path / "x.ckpt"
    trainer = Trainer(default_root_dir=tmp_path, logger=False, enable_checkpointing=False)
    assert ExactResumeCheckpoint().ckpt_path(trainer) == tmp_path / "checkpoints/interrupted.ckpt"


@pytest.mark.parametrize("filename", ["", "a/b", 3])
def test_bad_filename(filename):
    with pytest.raises(ValueError, match="filename must be a non-empty file name"):
        ExactResumeCheckpoint(filename=filename)
