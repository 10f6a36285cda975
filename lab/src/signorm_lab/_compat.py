"""Every private internal of another library that the lab relies on, in one place.

Lightning, TorchUncertainty, torch, transformers and CPython's ``re`` keep some of what the lab
needs behind private names, which any release may change without notice. Each such name is
reached here, and only here, through a small named function or constant that says what it
reaches and why no public route exists; ``lab/tests/test_compat.py`` checks, for each, that the
internal still exists and behaves as relied upon, so that an upgrade that changes one fails
there, by name, rather than somewhere in a training run.

Checked on lightning 2.6.6, jsonargparse 4.53.0, torch 2.14.1, torch-uncertainty 0.13.0 and
transformers 5.24.0 (the newest releases), and at the floors, lightning 2.6.6 with
jsonargparse 4.51.0.

Public routes taken instead of a private name (nothing of theirs is here):

* the global RNG states that :class:`~signorm_lab.callbacks.ExactResumeCheckpoint`
  saves are read and set with ``torch``, ``numpy`` and ``random``'s own functions (the layout of
  Lightning's ``_collect_rng_states``, so older checkpoints load);
* ``LightningCLI._get`` is a one-line lookup of ``config[subcommand][key]``, written out in
  :class:`~signorm_lab.cli.TUSigmaNormCLI`;
* Lightning's ``_OUT_DICT`` is a type alias, written ``dict[str, Any]``;
* ``torch.nn.modules.conv._ConvNd`` and ``torch.nn.modules.batchnorm._BatchNorm`` are replaced
  by the tuples of torch's public convolution and BatchNorm classes (:data:`CONVOLUTIONS`,
  :data:`BATCH_NORMS`; the tests check that they cover every subclass torch ships).

Methods overriding a private hook of another library cannot move here (the library calls
them by name); they reach any other private name through this module:

* :class:`~signorm_lab.cli.TUSigmaNormCLI`: ``_add_instantiators``,
  ``_parse_ckpt_path``, ``_run_subcommand`` (Lightning's ``LightningCLI``);
* ``recipe_parsing._ParseOnlyCLI``: ``_set_seed``, ``_run_subcommand`` (``LightningCLI``);
* :class:`~signorm_lab.evaluation.printing.SigmaNormEvaluationLoop`:
  ``_print_results`` (TorchUncertainty's ``TUEvaluationLoop``);
* :class:`~signorm_lab.datamodules.DigitsDataModule`, ``SST2DataModule`` and
  ``TweetsDataModule``: ``_get_train_data``, ``_get_train_targets``, and for the two text
  modules ``_data_loader`` (TorchUncertainty's ``TUDataModule``).

Lightning, TorchUncertainty and transformers are imported only when a function needs them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from torch_uncertainty_signorm.utils._compat import CLASS_PATH_KEY, INSTANTIATOR_KEY

__all__ = [
    "CLASS_PATH_KEY",
    "HF_CONFIG_SOURCE_KEY",
    "INSTANTIATOR_KEY",
    "VALIDATION_PROGRESS_KEY",
    "combined_loader",
    "datamodule_base_class",
    "drop_loader_iterator",
    "fit_data_fetcher",
    "lightning_instantiator",
    "model_base_class",
    "regex_parser",
    "restart_validation",
    "tu_data_loader",
    "wide_resnet_class",
]

# ----------------------------------------------------------------------------- Python


def regex_parser() -> tuple[Any, Any]:
    """CPython's regex parser and its opcodes (``re._parser``, ``re._constants``; ``sre_parse``
    and ``sre_constants`` before 3.11): the parsed form of a pattern read from a file, whose
    repeats :mod:`~signorm_lab.safety.patterns` bounds. The ``re`` module offers none publicly."""
    try:  # Python >= 3.11
        from re import _constants, _parser
    except ImportError:  # pragma: no cover
        import sre_constants as _constants
        import sre_parse as _parser
    return _parser, _constants


# ----------------------------------------------------------------------------- torch


def drop_loader_iterator(loader: torch.utils.data.DataLoader) -> None:
    """Forget ``loader``'s kept iterator (``DataLoader._iterator``, persistent workers), so
    that the next epoch starts workers on its current dataset; DataLoader has no public reset."""
    loader._iterator = None


# ----------------------------------------------------------------------------- Lightning

#: The validation loop's progress in a checkpoint's ``loops.fit_loop`` state.
VALIDATION_PROGRESS_KEY = "epoch_loop.val_loop.batch_progress"


def lightning_instantiator(cli: Any, key: str) -> Callable[..., Any]:
    """Lightning CLI's instantiator (``cli._InstantiatorFn``) for the config block ``key``:
    what stores a block as hyper-parameters; Lightning hard-codes the ``model`` block."""
    from lightning.pytorch.cli import _InstantiatorFn

    return _InstantiatorFn(cli=cli, key=key)


def model_base_class(cli: Any) -> type:
    """The routine's base class given to ``LightningCLI`` (``_model_class``, a class or a
    callable returning one, resolved by ``cli._get_module_type``); not exposed publicly."""
    from lightning.pytorch.cli import _get_module_type

    return _get_module_type(cli._model_class)


def datamodule_base_class(cli: Any) -> type:
    """The datamodule's base class given to ``LightningCLI`` (``_datamodule_class``, resolved
    by ``cli._get_module_type``); not exposed publicly."""
    from lightning.pytorch.cli import _get_module_type

    return _get_module_type(cli._datamodule_class)


def combined_loader(loop: Any) -> Any:
    """The ``CombinedLoader`` a fit or validation loop iterates (``loop._combined_loader``), or
    ``None`` before setup: the trainer's public loaders are copies without its iterator."""
    return loop._combined_loader


def fit_data_fetcher(fit_loop: Any) -> Any:
    """The fit loop's data fetcher (``fit_loop._data_fetcher``), whose ``iter()`` recreates the
    epoch's iterator; Lightning has no public way to restart it inside ``on_train_start``."""
    return fit_loop._data_fetcher


def restart_validation(fit_loop_state: dict[str, Any]) -> None:
    """Rewind an interrupted validation in a checkpoint's fit-loop state (Lightning's
    ``_BatchProgress`` layout) so that resuming runs it again from batch 0.

    The validation loop's progress is set to "its first batch was started", the state that
    Lightning resumes as a validation to run again (``RESTARTED_MID_EVALUATION``); no batch of
    it counts as completed, so its metrics then cover the whole validation set. Lightning has
    no public call to restart a validation on resume.
    """
    progress = fit_loop_state[VALIDATION_PROGRESS_KEY]
    done = progress["current"]["completed"]
    progress["total"] = {key: value - done for key, value in progress["total"].items()}
    progress["total"]["ready"] += 1
    progress["total"]["started"] += 1
    progress["current"] = {"ready": 1, "started": 1, "processed": 0, "completed": 0}
    progress["is_last_batch"] = False


# ----------------------------------------------------------------------------- TorchUncertainty


def wide_resnet_class() -> type[nn.Module]:
    """TorchUncertainty's ``_WideResNet``: its public builder, ``wideresnet28x10``, fixes the
    widen factor to 10."""
    from torch_uncertainty.models.classification.wideresnet.std import _WideResNet

    return _WideResNet


def tu_data_loader(
    datamodule: Any, dataset: Any, training: bool, shuffle: bool = False
) -> torch.utils.data.DataLoader:
    """``TUDataModule._data_loader``: a loader with the datamodule's batch size, workers and
    collate function, the one its own loaders use; it has no public counterpart."""
    return datamodule._data_loader(dataset, training=training, shuffle=shuffle)


# ----------------------------------------------------------------------------- transformers

#: Key of a Hugging Face configuration's ``to_dict`` holding where it was read from (the
#: private attribute behind ``PretrainedConfig.name_or_path``), not part of the architecture.
HF_CONFIG_SOURCE_KEY = "_name_or_path"
