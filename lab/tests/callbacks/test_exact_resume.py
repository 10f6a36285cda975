"""Interrupt-and-resume equals the uninterrupted run: weights, optimiser, metrics, bit for bit."""

from __future__ import annotations

import os
import random
import signal

import numpy as np
import pytest
import torch
from lightning.pytorch import Callback, Trainer, seed_everything
from lightning.pytorch.utilities.exceptions import SIGTERMException
from torch import nn
from torch.utils.data import Dataset
from torch_uncertainty.models.classification import resnet

from fixtures.backbones import tiny_resnet
from fixtures.synthetic_datamodule import SyntheticDataModule
from signorm_lab.callbacks.exact_resume import (
    ExactResumeCheckpoint,
    _restore_rng_states,
)
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine

M, EPOCHS, BATCHES_PER_EPOCH = 2, 2, 5


def _optim(routine: nn.Module) -> dict:
    optimizer = torch.optim.SGD(routine.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


def _routine(dropout_rate: float = 0.0) -> SigmaNormClassificationRoutine:
    backbone = (
        resnet(3, 10, 18, style="cifar", width_multiplier=0.125, dropout_rate=dropout_rate)
        if dropout_rate
        else tiny_resnet(18)
    )
    model = signorm_ensemble(backbone, M, regularized_layers="resnet18")
    return SigmaNormClassificationRoutine(model, 10, nn.CrossEntropyLoss(), optim_recipe=_optim)


class _Interrupt(Callback):
    """In ``hook`` of ``epoch`` (and ``batch``): send this process SIGTERM, or ``act(module)``."""

    def __init__(self, hook: str, epoch: int = 0, batch: int | None = None, act=None) -> None:
        self.hook, self.epoch, self.batch, self.act = hook, epoch, batch, act

    def _fire(self, trainer, pl_module, hook, batch_idx=None) -> None:
        if (hook, trainer.current_epoch) == (self.hook, self.epoch) and batch_idx == self.batch:
            self.hook = None  # once
            if self.act is None:
                os.kill(os.getpid(), signal.SIGTERM)
            else:
                self.act(pl_module)

    def on_sanity_check_start(self, trainer, pl_module) -> None:
        self._fire(trainer, pl_module, "sanity")

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._fire(trainer, pl_module, "train_batch_start", batch_idx)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self._fire(trainer, pl_module, "train_batch_end", batch_idx)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, _=0) -> None:
        if not trainer.sanity_checking:
            self._fire(trainer, pl_module, "val_batch_end", batch_idx)

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        self._fire(trainer, pl_module, "train_epoch_end")


class _ValHistory(Callback):
    """Every validation of ``fit``: ``(epoch, step, {metric: value})``."""

    def __init__(self) -> None:
        self.history = []

    def on_validation_end(self, trainer, pl_module) -> None:
        if not trainer.sanity_checking:
            metrics = {
                k: "nan" if v.isnan() else v.item()  # NaN != NaN
                for k, v in trainer.callback_metrics.items()
                if k.startswith("val/")
            }
            self.history.append((trainer.current_epoch, trainer.global_step, metrics))


class _RandomlyAugmented(Dataset):
    """Noise from torch's global RNG, a flip from Python's ``random``, a gain from numpy's."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        image, target = self.dataset[index]
        image = (image + torch.randn_like(image)) * (1 + np.random.rand())
        return (image.flip(-1) if random.random() < 0.5 else image), target


class _AugmentedDataModule(SyntheticDataModule):
    """Randomly augmented training images, loaded by 2 persistent worker processes."""

    def __init__(self, **kwargs) -> None:
        super().__init__(num_workers=2, persistent_workers=True, **kwargs)

    def setup(self, stage: str | None = None) -> None:
        super().setup(stage)
        self.train = _RandomlyAugmented(self.train)


def _fit(root, *callbacks, ckpt_path=None, val_check_interval=1.0, logger=False, augmented=False):
    seed_everything(0)
    routine = _routine(dropout_rate=0.2 if augmented else 0.0)
    data = (_AugmentedDataModule if augmented else SyntheticDataModule)(
        batch_size=4, num_samples=4 * BATCHES_PER_EPOCH
    )
    history = _ValHistory()
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=EPOCHS,
        logger=logger,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=root,
        val_check_interval=val_check_interval,
        enable_checkpointing=False,
        callbacks=[ExactResumeCheckpoint(), history, *callbacks],
    )
    trainer.fit(routine, data, ckpt_path=ckpt_path)
    return routine, trainer, history.history


def _assert_same_state(actual: nn.Module, expected: nn.Module) -> None:
    actual_state, expected_state = actual.state_dict(), expected.state_dict()
    assert actual_state.keys() == expected_state.keys()
    different = [k for k in expected_state if not torch.equal(actual_state[k], expected_state[k])]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """The uninterrupted runs, by ``val_check_interval`` (shared by the interruption points)."""
    root = tmp_path_factory.mktemp("reference")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the tests (conftest.py): the sums' order then matches
    try:
        return {
            interval: _fit(root / str(interval), val_check_interval=interval)
            for interval in (1.0, 0.4)
        }
    finally:
        torch.set_num_threads(threads)


# (hook, epoch, batch, val_check_interval, global step of the checkpoint, validations left to
# run); 5 batches an epoch, validation at each epoch end (interval 1.0) or every 2 batches (0.4).
POINTS = {
    "mid-first-epoch": ("train_batch_end", 0, 2, 1.0, 3, 2),
    "mid-second-epoch": ("train_batch_end", 1, 1, 1.0, 7, 1),
    # The signal lands on the last batch: Lightning stops in the validation that follows it.
    "last-batch": ("train_batch_end", 0, BATCHES_PER_EPOCH - 1, 1.0, 5, 2),
    "mid-validation": ("val_batch_end", 1, 0, 1.0, 10, 1),
    "mid-epoch-validation": ("val_batch_end", 0, 0, 0.4, 2, 4),
    "between-epochs": ("train_epoch_end", 0, None, 1.0, 5, 1),
}


@pytest.mark.slow
@pytest.mark.parametrize("point", POINTS.values(), ids=POINTS.keys())
def test_sigterm_then_resume_equals_uninterrupted_run(tmp_path, references, point):
    hook, epoch, batch, interval, step, validations = point
    reference, reference_trainer, reference_history = references[interval]

    with pytest.raises(SIGTERMException):
        _fit(tmp_path, _Interrupt(hook, epoch, batch), val_check_interval=interval)
    checkpoint_path = tmp_path / "checkpoints" / "interrupted.ckpt"
    assert torch.load(checkpoint_path, weights_only=True)["global_step"] == step

    resumed, resumed_trainer, resumed_history = _fit(
        tmp_path, ckpt_path=checkpoint_path, val_check_interval=interval
    )

    assert resumed_trainer.global_step == reference_trainer.global_step == EPOCHS * 5
    assert resumed_trainer.current_epoch == reference_trainer.current_epoch == EPOCHS
    _assert_same_state(resumed, reference)
    optimizers = resumed_trainer.optimizers[0], reference_trainer.optimizers[0]
    momenta = [[s["momentum_buffer"] for s in opt.state.values()] for opt in optimizers]
    assert all(torch.equal(a, b) for a, b in zip(*momenta, strict=True))
    assert resumed_trainer.lr_scheduler_configs[0].scheduler.state_dict() == (
        reference_trainer.lr_scheduler_configs[0].scheduler.state_dict()
    )
    # Every validation after the checkpoint, the interrupted one included, ran exactly once
    # and gave the same metrics.
    assert resumed_history == reference_history[-validations:]
    # (After a resume into a mid-epoch validation, Lightning does not re-log the last step's
    # train metrics: only those logged are compared.)
    metrics = resumed_trainer.callback_metrics
    for key, value in metrics.items():
        torch.testing.assert_close(
            value, reference_trainer.callback_metrics[key], rtol=0, atol=0, equal_nan=True, msg=key
        )
    assert not checkpoint_path.exists()  # removed once the resumed run completed


@pytest.fixture(scope="module")
def augmented_reference(tmp_path_factory):
    """The uninterrupted run with random augmentation in 2 workers and dropout in the model."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _fit(tmp_path_factory.mktemp("augmented"), augmented=True)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
@pytest.mark.parametrize("batch", [2, BATCHES_PER_EPOCH - 1], ids=["mid-epoch", "last-batch"])
def test_resume_is_exact_with_random_augmentation_in_workers(tmp_path, augmented_reference, batch):
    """Each sample is augmented under its own seed: the same in any process, after a resume."""
    reference, reference_trainer, reference_history = augmented_reference
    with pytest.raises(SIGTERMException):
        _fit(tmp_path, _Interrupt("train_batch_end", 0, batch), augmented=True)
    checkpoint_path = tmp_path / "checkpoints" / "interrupted.ckpt"
    assert torch.load(checkpoint_path, weights_only=True)["global_step"] == batch + 1

    resumed, resumed_trainer, resumed_history = _fit(
        tmp_path, ckpt_path=checkpoint_path, augmented=True
    )

    assert resumed_trainer.global_step == reference_trainer.global_step == EPOCHS * 5
    _assert_same_state(resumed, reference)
    assert resumed_history == reference_history and len(resumed_history) == EPOCHS


def test_samples_are_augmented_under_their_own_seed():
    """The same ``(index, seed)`` gives the same sample whatever was drawn before, and the
    caller's global RNG states are left as they were."""
    from signorm_lab.callbacks.exact_resume import _SeededSamples

    data = _SeededSamples(_RandomlyAugmented([(torch.zeros(1, 2, 2), 0)] * 3))
    first = data.__getitems__([(0, 7), (1, 8)])
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    draws = torch.rand(2), random.random(), np.random.rand()
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    again = data[(1, 8)], data[(0, 7)]
    assert (torch.rand(2).tolist(), random.random(), np.random.rand()) == (
        draws[0].tolist(),
        *draws[1:],
    )
    assert torch.equal(again[1][0], first[0][0]) and torch.equal(again[0][0], first[1][0])
    assert not torch.equal(first[0][0], first[1][0])


def _nan_weights(module: nn.Module) -> None:
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.fill_(float("nan"))


def _shape_error(module: nn.Module) -> None:
    raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")


def _configuration_error(module: nn.Module) -> None:
    raise ValueError("SigmaBatchNorm2d needs more than 1 value per channel and member")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("interrupt", "error", "message"),
    [
        (_Interrupt("sanity"), SIGTERMException, "no optimisation step"),
        # An error before the first step is no interruption: nothing is said about checkpoints.
        (_Interrupt("train_batch_start", 0, 0, act=_shape_error), RuntimeError, None),
        (_Interrupt("train_batch_end", 0, 1, act=_nan_weights), FloatingPointError, "not finite"),
        (
            _Interrupt("train_batch_start", 0, 2, act=_configuration_error),
            ValueError,
            "a configuration or data error, which resuming would meet again",
        ),
    ],
    ids=["sigterm-in-sanity-check", "error-at-step-0", "nan-weights", "configuration-error"],
)
def test_no_checkpoint_when_there_is_nothing_to_resume(tmp_path, caplog, interrupt, error, message):
    with pytest.raises(error):
        _fit(tmp_path, interrupt)
    assert not list(tmp_path.rglob("*.ckpt"))
    if message is None:
        assert "interruption checkpoint" not in caplog.text
    else:
        assert message in caplog.text


@pytest.mark.slow
def test_interruption_checkpoints_belong_to_their_run(tmp_path):
    """Per logger version; a run never overwrites nor deletes another run's checkpoint, nor a
    copy of its own kept elsewhere: it removes only its own file, in its own folder."""
    from lightning.pytorch.loggers import CSVLogger

    def run(*callbacks, ckpt_path=None, version=None):
        return _fit(
            tmp_path, *callbacks, ckpt_path=ckpt_path, logger=CSVLogger(tmp_path, version=version)
        )

    for _ in range(2):
        with pytest.raises(SIGTERMException):
            run(_Interrupt("train_batch_end", 0, 1))
    first, second = (
        tmp_path / f"lightning_logs/version_{n}/checkpoints/interrupted.ckpt" for n in (0, 1)
    )
    first_bytes, second_bytes = first.read_bytes(), second.read_bytes()
    run()  # an unrelated run completes
    assert first.read_bytes() == first_bytes and second.is_file()
    backup = tmp_path / "backup" / "interrupted.ckpt"  # the user's copy, in no run's folder
    backup.parent.mkdir()
    backup.write_bytes(second_bytes)
    run(ckpt_path=backup, version=1)  # resumed from the copy: the copy is the user's
    assert backup.read_bytes() == second_bytes and second.read_bytes() == second_bytes
    run(ckpt_path=second, version=1)  # the run's own file, in its folder: stale, removed
    assert not second.exists() and first.read_bytes() == first_bytes
    assert backup.read_bytes() == second_bytes


def test_shared_directory_gets_a_new_name(tmp_path):
    """Without a logger, two runs share ``<root>/checkpoints``: the second one's is ``-v1``."""
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "interrupted.ckpt").write_bytes(b"another run's")
    trainer = Trainer(default_root_dir=tmp_path, logger=False, enable_checkpointing=False)
    assert ExactResumeCheckpoint().ckpt_path(trainer) == (
        tmp_path / "checkpoints" / "interrupted-v1.ckpt"
    )


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


def test_resuming_training_restores_the_global_rngs_before_anything_draws():
    """The callback's own resume path (not only the restoring function): the first draw after
    ``on_train_start`` of a resumed fit is the one the interrupted run would have made."""
    interrupted = ExactResumeCheckpoint()
    interrupted.seed = 7
    saved = interrupted.state_dict()
    expected = torch.rand(3)
    resumed = ExactResumeCheckpoint()
    resumed.load_state_dict(saved)
    torch.rand(5)  # what the resumed process drew before training starts
    trainer = Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    resumed.on_train_start(trainer, None)
    assert torch.equal(torch.rand(3), expected)


def test_checkpoint_path_defaults_and_explicit(tmp_path):
    from lightning.pytorch.loggers import CSVLogger

    trainer = Trainer(default_root_dir=tmp_path, logger=False, enable_checkpointing=False)
    assert ExactResumeCheckpoint(tmp_path, "x").ckpt_path(trainer) == tmp_path / "x.ckpt"
    assert ExactResumeCheckpoint().ckpt_path(trainer) == tmp_path / "checkpoints/interrupted.ckpt"
    trainer = Trainer(logger=CSVLogger(tmp_path, name="run", version=3), enable_checkpointing=False)
    assert ExactResumeCheckpoint().ckpt_path(trainer) == (
        tmp_path / "run/version_3/checkpoints/interrupted.ckpt"
    )


@pytest.mark.parametrize("filename", ["", "a/b", 3])
def test_bad_filename(filename):
    with pytest.raises(ValueError, match="filename must be a non-empty file name"):
        ExactResumeCheckpoint(filename=filename)
