"""Each private internal of another library that the lab's ``_compat`` reaches still exists and
behaves as the lab relies on, and the private hooks the lab overrides are still called; a release
that changes one fails here, by name (the method's own: tests/test_compat.py).

Checked on lightning 2.6.6, jsonargparse 4.53.0, torch 2.14.1, torch-uncertainty 0.13.0 and
transformers 5.24.0.
"""

from __future__ import annotations

import inspect
import json
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.demos.boring_classes import BoringDataModule, BoringModel
from lightning.pytorch.utilities import CombinedLoader
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from signorm_lab import _compat
from signorm_lab.callbacks import exact_resume
from torch_uncertainty_signorm.utils._compat import given_hyperparameters

# ----------------------------------------------------------------------------- Python


def test_the_regex_parser_gives_repeats_with_their_bodies():
    """``re._parser.parse`` gives ``(opcode, value)`` items, a repeat's value being ``(low, high,
    body)`` with ``MAXREPEAT`` for no upper bound: what the pattern bound walks."""
    parser, constants = _compat.regex_parser()
    ((op, (low, high, body)),) = list(parser.parse("(ab)+"))
    assert op is constants.MAX_REPEAT and (low, high) == (1, constants.MAXREPEAT)
    assert body[0][0] is constants.SUBPATTERN


# ----------------------------------------------------------------------------- torch


def test_drop_loader_iterator_restarts_persistent_workers():
    loader = DataLoader(
        TensorDataset(torch.arange(4.0)), batch_size=2, num_workers=1, persistent_workers=True
    )
    assert loader._iterator is None
    list(loader)
    kept = loader._iterator
    assert kept is not None
    list(loader)
    assert loader._iterator is kept  # kept between epochs
    _compat.drop_loader_iterator(loader)
    assert loader._iterator is None
    kept._shutdown_workers()


# ----------------------------------------------------------------------------- Lightning


class _Recording(LightningModule):
    """Records what Lightning's CLI hands it while it is built."""

    def __init__(self, width: int = 1) -> None:
        super().__init__()
        self.given = given_hyperparameters()
        self.layer = nn.Linear(width, 1)


def test_lightning_instantiator_saves_a_block_with_the_class_path_key():
    block = {"class_path": "tests.Recording", "init_args": {"width": 2}}
    cli = SimpleNamespace(_dump_config=lambda: None, config_dump={"routine": block})
    instantiate = _compat.lightning_instantiator(cli, "routine")
    built = instantiate(_Recording, width=2, applied_instantiation_links={})
    assert isinstance(built, _Recording)
    assert built.given[_compat.CLASS_PATH_KEY] == "tests.Recording"
    assert built.given["width"] == 2
    assert isinstance(built.given[_compat.INSTANTIATOR_KEY], str)


def test_module_base_classes_of_a_cli(monkeypatch):
    monkeypatch.setattr("sys.argv", ["test"])
    cli = LightningCLI(
        BoringModel,
        BoringDataModule,
        run=False,
        args=[],
        seed_everything_default=0,
        save_config_callback=None,
        trainer_defaults={"logger": False},
    )
    assert _compat.model_base_class(cli) is BoringModel
    assert _compat.datamodule_base_class(cli) is BoringDataModule


class _Probe(BoringModel):
    """Keeps what the fit loop holds at the start of training."""

    def on_train_start(self) -> None:
        fit_loop = self.trainer.fit_loop
        self.train_loader = _compat.combined_loader(fit_loop)
        self.val_loader = _compat.combined_loader(fit_loop.epoch_loop.val_loop)
        self.fetcher = _compat.fit_data_fetcher(fit_loop)


def test_fit_loop_internals_and_the_validation_progress_layout(tmp_path):
    model = _Probe()
    trainer = Trainer(
        default_root_dir=tmp_path,
        max_epochs=1,
        limit_train_batches=2,
        limit_val_batches=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    assert _compat.combined_loader(trainer.fit_loop) is None  # before setup
    trainer.fit(model)
    for loader in (model.train_loader, model.val_loader):
        assert isinstance(loader, CombinedLoader)
        assert all(isinstance(each, DataLoader) for each in loader.flattened)
    assert callable(model.fetcher.__iter__)
    assert model.fetcher.combined_loader is model.train_loader

    state = trainer.fit_loop.state_dict()
    progress = state[_compat.VALIDATION_PROGRESS_KEY]
    counts = {"ready", "started", "processed", "completed"}
    assert set(progress) == {"total", "current", "is_last_batch"}
    assert set(progress["total"]) == set(progress["current"]) == counts
    _compat.restart_validation(state)
    assert progress["current"] == {"ready": 1, "started": 1, "processed": 0, "completed": 0}
    trainer.fit_loop.load_state_dict(state)
    restored = trainer.fit_loop.epoch_loop.val_loop.batch_progress
    assert restored.current.started == 1 and restored.current.completed == 0


def test_rng_states_keep_lightnings_layout():
    """The public route taken for Lightning's ``_collect_rng_states``/``_set_rng_states``: the
    same keys and values, so interruption checkpoints written before still restore."""
    from lightning.fabric.utilities.seed import _collect_rng_states

    ours, theirs = exact_resume._global_rng_states(), _collect_rng_states()
    assert list(ours) == list(theirs)
    assert torch.equal(ours["torch"], theirs["torch"])
    assert ours["python"] == theirs["python"]
    assert all(np.array_equal(a, b) for a, b in zip(ours["numpy"], theirs["numpy"], strict=True))
    expected = random.random(), np.random.rand(), torch.rand(())
    exact_resume._set_global_rng_states(ours)
    assert (random.random(), np.random.rand(), torch.rand(())) == expected


# ----------------------------------------------------------------------------- TorchUncertainty


def test_wide_resnet_class_builds_any_widen_factor():
    from torch_uncertainty.models.classification import wideresnet28x10

    wide_resnet = _compat.wide_resnet_class()
    parameters = inspect.signature(wide_resnet).parameters
    for name in (
        "depth",
        "widen_factor",
        "in_channels",
        "num_classes",
        "conv_bias",
        "dropout_rate",
        "groups",
        "style",
        "normalization_layer",
        "activation_fn",
    ):
        assert name in parameters, name
    model = wide_resnet(
        depth=28, widen_factor=1, in_channels=3, num_classes=10, conv_bias=False, dropout_rate=0.0
    )
    assert model(torch.zeros(1, 3, 32, 32)).shape == (1, 10)
    assert isinstance(wideresnet28x10(3, 10, conv_bias=False, dropout_rate=0.0), wide_resnet)


def test_tu_data_loader_uses_the_datamodules_batch_sizes(tmp_path):
    from torch_uncertainty.datamodules import TUDataModule

    class Data(TUDataModule):
        def setup(self, stage: str | None = None) -> None:
            pass

    datamodule = Data(
        root=tmp_path,
        batch_size=4,
        eval_batch_size=3,
        val_split=None,
        num_workers=0,
        pin_memory=False,
        persistent_workers=False,
    )
    dataset = TensorDataset(torch.arange(8.0))
    training = _compat.tu_data_loader(datamodule, dataset, training=True, shuffle=True)
    evaluation = _compat.tu_data_loader(datamodule, dataset, training=False)
    assert (training.batch_size, evaluation.batch_size) == (4, 3)
    assert isinstance(training.sampler, torch.utils.data.RandomSampler)
    assert isinstance(evaluation.sampler, torch.utils.data.SequentialSampler)


# ----------------------------------------------------------------------------- hooks overridden


@pytest.mark.parametrize(
    ("owner", "hook", "arguments"),
    [
        (LightningCLI, "_add_instantiators", ["self"]),
        (LightningCLI, "_parse_ckpt_path", ["self"]),
        (LightningCLI, "_run_subcommand", ["self", "subcommand"]),
        (LightningCLI, "_set_seed", ["self"]),
        (
            "torch_uncertainty.utils.evaluation_loop.TUEvaluationLoop",
            "_print_results",
            ["results", "stage"],
        ),
        (
            "torch_uncertainty.datamodules.TUDataModule",
            "_data_loader",
            ["self", "dataset", "training", "shuffle"],
        ),
        ("torch_uncertainty.datamodules.TUDataModule", "_get_train_data", ["self"]),
        ("torch_uncertainty.datamodules.TUDataModule", "_get_train_targets", ["self"]),
    ],
)
def test_overridden_private_hooks_still_exist(owner, hook, arguments):
    """The private methods the package overrides are still there, with the same arguments
    (else an override would silently stop being called)."""
    if isinstance(owner, str):
        from signorm_lab.safety.allowlist import import_object

        owner = import_object(owner)
    method = inspect.getattr_static(owner, hook)
    function = method.__func__ if isinstance(method, staticmethod) else method
    assert list(inspect.signature(function).parameters) == arguments


def test_lightning_calls_the_overridden_hooks():
    from lightning.pytorch.loops.evaluation_loop import _EvaluationLoop

    source = inspect.getsource(LightningCLI.__init__)
    for hook in ("_add_instantiators()", "_parse_ckpt_path()", "_set_seed()", "_run_subcommand("):
        assert f"self.{hook}" in source, hook
    assert "self._print_results(" in inspect.getsource(_EvaluationLoop)


# ----------------------------------------------------------------------------- transformers


def test_hf_config_source_key():
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(num_hidden_layers=1)
    config.name_or_path = "somewhere/bert"
    data = json.loads(config.to_json_string(use_diff=False))
    assert data[_compat.HF_CONFIG_SOURCE_KEY] == "somewhere/bert"
