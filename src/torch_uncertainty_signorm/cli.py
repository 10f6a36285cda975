"""The ``torch-uncertainty`` command: TorchUncertainty's Lightning CLI for any routine and datamodule.

TorchUncertainty ships one entry script per dataset (``experiments/classification/cifar10/main.py``
and siblings), each binding :class:`~torch_uncertainty.utils.cli.TULightningCLI` to one routine
class and one datamodule class. This module provides a single command instead: the routine (the
``routine:`` block) and the datamodule (the ``data:`` block) are both chosen in the recipe by
``class_path``, so every recipe in ``experiments/`` runs through the same entry point::

    torch-uncertainty fit --config experiments/wrn_c100_signorm.yaml
    torch-uncertainty test --config experiments/wrn_c100_signorm.yaml \
        --ckpt_path "logs/.../checkpoints/epoch=…-val_acc=….ckpt"

TorchUncertainty's own recipes run unmodified (:func:`tu_format_args`): a ``routine:`` block
without ``class_path`` is its ``ClassificationRoutine``, and the datamodule of a ``data:`` block
without ``class_path`` is named once on the command line::

    torch-uncertainty fit --config cifar10/configs/resnet18/packed.yaml --data CIFAR10DataModule

On top of :class:`TULightningCLI`, with class_path blocks:

* ``eval_ood``, ``eval_shift`` and ``num_tta`` are forwarded from the datamodule to the routine.
  ``TULightningCLI`` links ``data.eval_ood`` to ``routine.eval_ood``; with class_path blocks those
  keys are ``data.init_args.eval_ood`` and ``routine.init_args.eval_ood``, jsonargparse rejects the
  link with a ``ValueError``, and ``TULightningCLI`` suppresses that error, so nothing is linked.
* ``--eval_after_fit`` tests the best checkpoint once ``fit`` ends (TorchUncertainty does this in its
  entry scripts, outside the CLI); ``--eval_after_fit=false`` overrides a recipe's ``true``.
* The resolved configuration is saved next to the logs: TorchUncertainty 0.13's ``TULightningCLI``
  defaults ``save_config_callback`` to ``None``, so its scripts save nothing; :class:`SaveRunConfig`
  (TorchUncertainty's ``TUSaveConfigCallback``, saving for ``test`` runs too) is the default here.
* Routines calling ``save_hyperparameters()`` store their ``routine:`` block, so
  ``load_from_checkpoint`` and ``--ckpt_path`` work (Lightning reads a ``model:`` block).
  ``--ckpt_path`` never imports a class the checkpoint names: the recipe names the classes, a
  checkpoint contradicting the recipe or the command line is an error (but for
  :data:`EVALUATION_ONLY_ARGS`, where the given value is used), and only values left at their
  defaults are taken from it.

Optimiser parameter groups: the top-level ``optimizer:`` / ``lr_scheduler:`` blocks are parsed
as Lightning's ``OptimizerCallable`` / ``LRSchedulerCallable`` and built on the routine's
``optimizer_param_groups(lr)`` when it defines one (the σNorm scale logits at a larger learning
rate, without weight decay), else on ``routine.parameters()``; the result is the routine's
TorchUncertainty ``optim_recipe``. See :meth:`TUSigmaNormCLI.configure_routine_optimizer`.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import re
import shlex
import shutil
import sys
import time
import traceback
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
import yaml
from jsonargparse import Namespace
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import (
    ArgsType, LightningArgumentParser, LightningCLI, LRSchedulerCallable, OptimizerCallable,
    SaveConfigCallback,
)
from lightning.pytorch.plugins import CheckpointIO
from lightning.pytorch.trainer.states import TrainerStatus
from lightning.pytorch.utilities.exceptions import SIGTERMException
from lightning.pytorch.utilities.rank_zero import rank_zero_warn
from torch_uncertainty.utils.cli import TULightningCLI, TUSaveConfigCallback

from . import _compat
from .allowlist import (
    argument_type,
    check_class_paths,
    check_class_strings,
    check_parsed,
    import_object,
)
from .atomic_files import AtomicCheckpointIO
from .callbacks.exact_resume import saved_on_interruption
from .checkpoints import check_lightning_checkpoint, is_url, read_checkpoint
from .recipe_bases import expand_recipe_bases
from .tu_format import (
    DEFAULT_ROUTINE, check_datamodule_named, normalise_recipe, register_shorthands,
    resolve_datamodule,
)

__all__ = [
    "EVALUATION_ONLY_ARGS", "FORWARDED_DATA_ARGS", "RunInterrupted", "TUSigmaNormCLI", "cli_main",
    "forward_datamodule_args", "main", "resume_command", "tu_format_args",
]

#: Exit codes of a run stopped by SIGTERM / Ctrl-C (128 + signal number, as shells report them).
SIGTERM_EXIT_CODE, SIGINT_EXIT_CODE = 143, 130

logger = logging.getLogger(__name__)
register_shorthands()  # TorchUncertainty's `style: cifar`

#: Lightning's subcommands.
SUBCOMMANDS = ("fit", "validate", "test", "predict")

#: Datamodule arguments that decide which evaluation loaders exist, and that the routine must match.
FORWARDED_DATA_ARGS = ("eval_ood", "eval_shift", "num_tta")
#: Routine arguments that only change how a trained model is evaluated: ``--ckpt_path`` takes
#: a value given for them over the checkpoint's (``test --routine.init_args.ood_criterion=energy``).
EVALUATION_ONLY_ARGS = frozenset({
    *FORWARDED_DATA_ARGS, "eval_grouping_loss", "ood_criterion", "post_processing",
    "scod_ood_cost", "num_bins_calibration_error", "log_plots", "save_to_csv", "csv_filename",
    "check_finite_loss",
})


def _init_args(block: Namespace | None) -> Namespace | None:
    """The arguments of a ``routine:``/``data:`` block, with or without ``class_path``."""
    if block is None:
        return None
    if isinstance(block, Namespace) and "class_path" in block:
        return block.get("init_args")
    return block


def _signature_default(class_path: str | None, name: str) -> Any:
    """The default of ``name`` in ``class_path``'s constructor, or ``inspect.Parameter.empty``."""
    if class_path is None:
        return inspect.Parameter.empty
    try:
        parameter = inspect.signature(import_object(class_path)).parameters.get(name)
    except (ImportError, AttributeError, TypeError, ValueError):
        return inspect.Parameter.empty
    return inspect.Parameter.empty if parameter is None else parameter.default


def forward_datamodule_args(
    config: Namespace, keys: Iterable[str] = FORWARDED_DATA_ARGS
) -> dict[str, Any]:
    """Copy the datamodule's ``keys`` into the routine's arguments, in place.

    The datamodule decides which test loaders exist (an OOD loader when ``eval_ood``, a shifted one
    when ``eval_shift``, ``num_tta`` views per image), and the routine must agree or its
    ``test_step`` misreads them, so the datamodule's value wins. A key is forwarded only when the
    datamodule defines it and the routine accepts it (jsonargparse lists every accepted argument,
    defaults included, in the parsed ``init_args``). Works with and without ``class_path`` blocks.

    Args:
        config: The parsed configuration of one subcommand (holding ``routine`` and ``data``).
        keys: The argument names to forward. Defaults to :data:`FORWARDED_DATA_ARGS`.

    Returns:
        The forwarded ``{name: value}``.
    """
    routine_block, data_block = config.get("routine"), config.get("data")
    routine_args, data_args = _init_args(routine_block), _init_args(data_block)
    if routine_args is None or data_args is None:
        return {}
    routine_class = routine_block.get("class_path") if "class_path" in routine_block else None

    forwarded = {}
    for key in keys:
        if key not in data_args or key not in routine_args:
            continue
        value, current = data_args[key], routine_args[key]
        default = _signature_default(routine_class, key)
        if current != value and default is not inspect.Parameter.empty and current != default:
            rank_zero_warn(
                f"routine {key}={current!r} replaced by the datamodule's {key}={value!r}: the "
                "datamodule decides which evaluation loaders exist. Set it under `data:` instead."
            )
        routine_args[key] = value
        forwarded[key] = value
    return forwarded


_MISSING = object()


def _differences(saved: Any, current: Any, key: str = "") -> Iterator[tuple[str, Any, Any]]:
    """``(dotted key, saved value, current value)`` for each leaf where a saved tree differs."""
    if isinstance(saved, dict) and isinstance(current, dict):
        for name, value in saved.items():
            child = f"{key}.{name}" if key else name
            yield from _differences(value, current.get(name, _MISSING), child)
    elif (list(saved) if isinstance(saved, tuple) else saved) != current:
        yield key, saved, current


def _training_set_size(datamodule: LightningDataModule) -> int | None:
    """The size of a TorchUncertainty datamodule's training set; ``None`` when unknown."""
    try:
        return len(datamodule.get_train_set())
    except (AttributeError, TypeError):  # no get_train_set, no training set, no length
        return None


def _value_at(tree: dict[str, Any], key: str) -> Any:
    """The value of the dotted ``key`` in ``tree``."""
    for part in key.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` -> ``{"a": {"b": 1}}``."""
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return tree


def _monitored(checkpoint: Any) -> str:
    """`` (val/cls/Acc)``: what the best checkpoint is best at (TorchUncertainty's
    ``TUClsCheckpoint`` keeps one per metric, its best model being the accuracy one)."""
    inner = [callback for callback in getattr(checkpoint, "callbacks", {}).values()
             if getattr(callback, "best_model_path", None) == checkpoint.best_model_path]
    monitor = getattr(checkpoint, "monitor", None) or next(
        (callback.monitor for callback in inner if getattr(callback, "monitor", None)), None)
    return f" ({monitor})" if monitor else ""


class SaveRunConfig(TUSaveConfigCallback):
    """TorchUncertainty's config-saving callback, saving for every subcommand that logs.

    TorchUncertainty's saves the resolved configuration only for ``fit``; a ``test`` (or
    ``validate``, ``predict``) with a logger writes a run folder of its own, and its
    ``config.yaml`` records the ``ckpt_path`` it evaluated (the tables read it to tell a
    re-evaluation from another training run). Without a logger, as TorchUncertainty's.
    """

    def setup(self, trainer, pl_module, stage: str) -> None:
        if stage == "fit" or trainer.logger is None:
            super().setup(trainer, pl_module, stage)
        else:
            SaveConfigCallback.setup(self, trainer, pl_module, stage)


class TUSigmaNormCLI(TULightningCLI):
    r"""TorchUncertainty's Lightning CLI with the routine and the datamodule chosen by ``class_path``.

    Subcommands ``fit``, ``validate``, ``test`` and ``predict`` as in Lightning; the recipe holds a
    ``routine:`` block (any :class:`~lightning.pytorch.LightningModule`, e.g.
    :class:`torch_uncertainty.routines.ClassificationRoutine`), a ``data:`` block (any
    :class:`~lightning.pytorch.LightningDataModule`), both as ``class_path``/``init_args``, and
    optional top-level ``optimizer:`` / ``lr_scheduler:`` blocks.

    On top of :class:`~torch_uncertainty.utils.cli.TULightningCLI` it

    * forwards ``eval_ood``, ``eval_shift`` and ``num_tta`` from the datamodule to the routine
      (:func:`forward_datamodule_args`, run in :meth:`before_instantiate_classes`);
    * tests the best checkpoint after ``fit`` when ``--eval_after_fit`` is set (:meth:`after_fit`);
    * saves the resolved configuration in the logger's directory, for ``test`` too
      (:class:`SaveRunConfig` by default);
    * stores the ``routine:`` block as the routine's hyperparameters when the routine calls
      ``save_hyperparameters()``, so ``Routine.load_from_checkpoint`` and ``--ckpt_path`` work
      (Lightning looks for a ``model:`` block, which TorchUncertainty renamed ``routine:``);
    * builds the optimiser from the routine's ``optimizer_param_groups(lr)`` when it defines one;
    * reads TorchUncertainty's own recipe format (:func:`tu_format_args`).

    Lightning's progress bar and callbacks are left as they are.

    Args:
        model_class: Base class of the routine. Defaults to ``LightningModule``.
        datamodule_class: Base class of the datamodule. Defaults to ``LightningDataModule``.
        save_config_callback: Callback saving the resolved config. Defaults to
            :class:`SaveRunConfig`.
        subclass_mode_model: Choose the routine by ``class_path``. Defaults to ``True``.
        subclass_mode_data: Choose the datamodule by ``class_path``. Defaults to ``True``.
        **kwargs: Passed to :class:`~torch_uncertainty.utils.cli.TULightningCLI`.
    """

    def __init__(
        self,
        model_class: type[LightningModule] | None = None,
        datamodule_class: type[LightningDataModule] | None = None,
        save_config_callback: type[TUSaveConfigCallback] | None = SaveRunConfig,
        subclass_mode_model: bool = True,
        subclass_mode_data: bool = True,
        **kwargs: Any,
    ) -> None:
        self.forwarded_data_args: dict[str, Any] = {}
        self._started = time.time()
        self._resumes_interruption = False  # --ckpt_path is an interruption checkpoint
        self._tested_after_fit: Path | None = None  # the checkpoint --eval_after_fit tests
        try:
            super().__init__(
                model_class=model_class or LightningModule,
                datamodule_class=datamodule_class or LightningDataModule,
                save_config_callback=save_config_callback,
                subclass_mode_model=subclass_mode_model,
                subclass_mode_data=subclass_mode_data,
                auto_configure_optimizers=False,  # see configure_routine_optimizer
                **kwargs,
            )
        except BaseException:
            with contextlib.suppress(OSError):  # the run's own error is the one to report
                self._remove_unused_log_dirs()
            raise

    def _remove_unused_log_dirs(self) -> None:
        """Remove the logger folders of a run that failed before training a step or writing a
        result, so that the next run takes its ``version_N`` (as the docs' paths assume).

        A folder is removed only when every file in it is the logger's or the saved
        ``config.yaml`` and was written by this run: a resumed run's folder, or one holding
        checkpoints, results or figures, stays.
        """
        trainer = getattr(self, "trainer", None)
        if trainer is None or not trainer.is_global_zero or trainer.global_step > 0:
            return
        for run_logger in trainer.loggers:
            folder = Path(run_logger.log_dir) if getattr(run_logger, "log_dir", None) else None
            if folder is None or not folder.is_dir():
                continue
            entries = list(folder.rglob("*"))
            if all(entry.is_file() and entry.stat().st_mtime >= self._started - 1
                   and (entry.name.startswith("events.out.tfevents.")
                        or entry.name in ("hparams.yaml", "config.yaml", "metrics.csv"))
                   for entry in entries):
                shutil.rmtree(folder, ignore_errors=True)
                print(f"torch-uncertainty: removed {folder}: the run failed before training or "
                      f"testing wrote anything to it.", file=sys.stderr)

    def add_default_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """``--eval_after_fit`` as a boolean: bare or ``=true`` turns it on, ``=false`` off.

        TorchUncertainty's is a ``store_true`` flag, which a recipe setting ``eval_after_fit: true``
        leaves no way to switch off from the command line.
        """
        parser.add_argument(
            "--eval_after_fit",
            type=bool,
            nargs="?",
            const=True,
            default=self.eval_after_fit_default,
            help="After fit, test the best checkpoint (the last weights if none was saved).",
        )
        LightningCLI.add_default_arguments_to_parser(self, parser)

    def _active_config(self) -> Namespace:
        return self.config[self.subcommand] if self.subcommand else self.config

    def _config_value(self, config: Namespace, key: str, default: Any = None) -> Any:
        """``config``'s value of ``key``, inside the running subcommand's block if any."""
        return config.get(str(self.subcommand), config).get(key, default)

    def before_instantiate_classes(self) -> None:
        """Forward the datamodule's evaluation arguments to the routine before building either."""
        super().before_instantiate_classes()
        self.forwarded_data_args = forward_datamodule_args(self._active_config())
        if self.forwarded_data_args:
            logger.info(
                "Forwarded from the datamodule to the routine: %s", self.forwarded_data_args
            )

    def before_validate(self) -> None:
        """Set the datamodule up as for ``fit`` when validating.

        TorchUncertainty's datamodules (CIFAR, ImageNet, MNIST, ...) accept only the ``fit`` and
        ``test`` stages and raise on ``validate``; ``fit`` builds the validation split they serve.
        """
        setup = self.datamodule.setup
        self.datamodule.setup = lambda stage=None: setup("fit" if stage == "validate" else stage)

    def before_fit(self) -> None:
        """Refuse an empty training set once the datamodule is set up (TorchUncertainty's
        ``get_train_set``), rather than failing in the data loader's sampler."""
        setup = self.datamodule.setup

        def setup_and_check(stage: str | None = None) -> None:
            setup(stage)
            if stage == "fit" and _training_set_size(self.datamodule) == 0:
                raise ValueError(
                    f"The training set of {type(self.datamodule).__name__} is empty (0 samples): "
                    f"there is nothing to fit. Check the recipe's data block (root, splits)."
                )

        self.datamodule.setup = setup_and_check

    def after_fit(self) -> None:
        """With ``--eval_after_fit``, test the best checkpoint (the last weights if none was saved).

        Skipped under ``fast_dev_run``, which saves no checkpoint, as TorchUncertainty does.
        """
        if not self._config_value(self.config, "eval_after_fit") or self.trainer.fast_dev_run:
            return
        checkpoint = self.trainer.checkpoint_callback
        ckpt_path = "best" if checkpoint is not None and checkpoint.best_model_path else None
        if ckpt_path is not None and self.trainer.is_global_zero:
            print(f"Best checkpoint{_monitored(checkpoint)}: {checkpoint.best_model_path}")
        if ckpt_path is None:
            rank_zero_warn(
                "eval_after_fit: no best checkpoint was saved; testing the last weights."
            )
        else:
            self._tested_after_fit = Path(checkpoint.best_model_path)
        self.trainer.test(self.routine, datamodule=self.datamodule, ckpt_path=ckpt_path,
                          weights_only=True)

    def instantiate_trainer(self, **kwargs: Any) -> Any:
        """As Lightning's; ``trainer.sync_batchnorm: true`` also synchronises σBN statistics
        (:class:`~torch_uncertainty_signorm.distributed.SigmaNormSyncBatchNorm`), test
        results print through
        :class:`~torch_uncertainty_signorm.evaluation.printing.SigmaNormEvaluationLoop`, and
        checkpoints are written whole or not at all
        (:class:`~torch_uncertainty_signorm.atomic_files.AtomicCheckpointIO`, unless the
        configuration names a ``CheckpointIO`` plugin)."""
        from .distributed import signorm_sync_batchnorm_plugins
        from .evaluation.printing import use_results_tables

        config = {**self._config_value(self.config_init, "trainer", default={}), **kwargs}
        if (plugins := signorm_sync_batchnorm_plugins(config)) is not None:
            config["plugins"] = kwargs["plugins"] = plugins
        plugins = config.get("plugins") or []
        plugins = list(plugins) if isinstance(plugins, (list, tuple)) else [plugins]
        if not any(isinstance(plugin, CheckpointIO) for plugin in plugins):
            kwargs["plugins"] = [*plugins, AtomicCheckpointIO()]
        trainer = super().instantiate_trainer(**kwargs)
        use_results_tables(trainer)  # whole metric names, diversity and FLOPs per input
        return trainer

    # Lightning's load-from-checkpoint support reads the `model:` block; TorchUncertainty calls it
    # `routine:`. An override of a private Lightning hook (see `_compat`).
    def _add_instantiators(self) -> None:
        self.parser.add_instantiator(
            _compat.lightning_instantiator(self, "routine"),
            _compat.model_base_class(self),
            subclasses=self.subclass_mode_model,
        )
        self.parser.add_instantiator(
            _compat.lightning_instantiator(self, "data"),
            _compat.datamodule_base_class(self),
            subclasses=self.subclass_mode_data,
        )

    def parse_arguments(self, parser: LightningArgumentParser, args: ArgsType) -> None:
        """As Lightning's, reading TorchUncertainty's recipe format too (:func:`tu_format_args`);
        keeps ``args`` to tell given values from defaults (``--ckpt_path``)."""
        from_command_line = args is None
        if args is None or isinstance(args, list | tuple):
            args = expand_recipe_bases(tu_format_args(sys.argv[1:] if args is None else args))
        self._args = args
        with warnings.catch_warnings():
            if from_command_line:  # the args are sys.argv's, not given besides them
                warnings.filterwarnings("ignore", "LightningCLI's args parameter")
            super().parse_arguments(parser, args)

    def _given_routine_keys(self, subcommand: str) -> set[str]:
        """Dotted ``routine.init_args`` keys set by the recipe or the command line."""
        args = self._args
        if isinstance(args, dict | Namespace):
            given = self.parser.parse_object(args, defaults=False)
        else:
            given = self.parser.parse_args(sys.argv[1:] if args is None else args, defaults=False)
        routine = given[subcommand].get("routine")
        init_args = routine.get("init_args") if isinstance(routine, Namespace) else None
        return set(init_args.keys()) if isinstance(init_args, Namespace) else set()

    def _parse_ckpt_path(self) -> None:
        """Check a checkpoint's saved routine arguments against the recipe, never importing them.

        Lightning's version imports the checkpoint's ``_class_path`` and lets its values override
        the command line. Here the recipe names every class: a checkpoint naming another routine
        or model class, or a value contradicting one the recipe or command line sets, is an
        error; values left at their defaults are taken from the checkpoint, as Lightning does,
        but never a string where a class is expected, checked before and after parsing
        (:func:`~torch_uncertainty_signorm.allowlist.check_class_strings`). The checkpoint is a
        local file, whole, with finite weights
        (:func:`~torch_uncertainty_signorm.checkpoints.check_lightning_checkpoint`), and every
        load (Lightning's too) uses ``weights_only=True``.
        """
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if subcommand and self.config[subcommand].get("weights_only") is False:
            raise ValueError(
                "--weights_only=false would let a checkpoint run code when it is loaded; the "
                "command loads checkpoints with weights_only=True only (leave it unset)."
            )
        if subcommand and "weights_only" in self.config[subcommand]:
            self.config[subcommand].weights_only = True  # every load by Lightning, too
        if not ckpt_path or (not is_url(ckpt_path) and not Path(ckpt_path).exists()):
            return  # "best", "last": this run's, found by Lightning; a missing file: it says so
        checkpoint = check_lightning_checkpoint(read_checkpoint(ckpt_path, "ckpt_path"),
                                                ckpt_path)
        self._resumes_interruption = saved_on_interruption(checkpoint)
        hparams = dict(checkpoint.get("hyper_parameters") or {})
        hparams.pop(_compat.INSTANTIATOR_KEY, None)
        routine = self.config[subcommand].get("routine")
        recipe_class = routine.get("class_path") if isinstance(routine, Namespace) else None
        saved_class = hparams.pop(_compat.CLASS_PATH_KEY, None)
        if saved_class is not None and saved_class not in self._routine_names(recipe_class):
            raise ValueError(
                f"ckpt_path='{ckpt_path}' was saved by the routine {saved_class!r}, but the "
                f"recipe's routine is {recipe_class!r}: use the recipe the checkpoint was "
                f"trained with (its classes are never imported from the checkpoint)."
            )
        if not hparams or recipe_class is None:
            return
        config = yaml.safe_load(
            self.parser.dump(self.config, skip_link_targets=False, skip_none=False)
        )[subcommand]["routine"]["init_args"]
        given = self._given_routine_keys(subcommand)
        taken = {}
        for key, saved, current in _differences(hparams, config):
            if key in FORWARDED_DATA_ARGS:
                continue  # the datamodule decides (forward_datamodule_args)
            where = f"routine.init_args.{key}"
            if current is _MISSING:
                raise ValueError(
                    f"ckpt_path='{ckpt_path}' sets {where}={saved!r}, which the recipe's routine "
                    f"{recipe_class!r} does not take: use the recipe it was trained with."
                )
            if key.endswith("class_path") or (isinstance(saved, dict) and "class_path" in saved):
                raise ValueError(
                    f"ckpt_path='{ckpt_path}' has {where}={saved!r} where the recipe has "
                    f"{current!r}: the command builds the classes the recipe names, never a "
                    f"checkpoint's; use the recipe the checkpoint was trained with."
                )
            if key in given or any(name.startswith(f"{key}.") for name in given):
                if key.partition(".")[0] in EVALUATION_ONLY_ARGS:
                    continue  # the given value: it does not change the trained model
                raise ValueError(
                    f"ckpt_path='{ckpt_path}' has {where}={saved!r}, but the recipe or the "
                    f"command line sets {current!r}: give the checkpoint's value or leave it "
                    f"unset (unset values are taken from the checkpoint)."
                )
            taken[key] = saved
        if not taken:
            return
        where = f"ckpt_path='{ckpt_path}': routine.init_args"
        check_class_paths(_nested(taken), where=where)
        for key, saved in taken.items():  # before parsing: jsonargparse imports what it reads
            check_class_strings(saved, argument_type(recipe_class, key, config), f"{where}.{key}")
        update = {"class_path": recipe_class, "init_args": _nested(taken)}
        self.config = self.parser.parse_object({subcommand: {"routine": update}}, self.config)
        parsed = yaml.safe_load(
            self.parser.dump(self.config, skip_link_targets=False, skip_none=False)
        )[subcommand]["routine"]["init_args"]
        for key, saved in taken.items():  # after parsing, before building
            check_parsed(saved, _value_at(parsed, key), f"{where}.{key}")

    @staticmethod
    def _routine_names(class_path: str | None) -> set[str]:
        """The names of the recipe's routine class (as written, and where it is defined)."""
        if class_path is None:
            return set()
        routine_class = import_object(class_path)  # the recipe's, imported by the parser already
        return {class_path, f"{routine_class.__module__}.{routine_class.__qualname__}"}

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Top-level ``optimizer:`` / ``lr_scheduler:`` blocks, parsed as Lightning's
        ``OptimizerCallable`` / ``LRSchedulerCallable`` (dependency injection, see
        :meth:`configure_routine_optimizer`)."""
        super().add_arguments_to_parser(parser)
        parser.add_argument("--optimizer", type=OptimizerCallable | None, default=None)
        parser.add_argument("--lr_scheduler", type=LRSchedulerCallable | None, default=None)

    def configure_routine_optimizer(self) -> None:
        """Build the recipe's optimiser and scheduler and hand them to the routine.

        The optimiser is built on the routine's ``optimizer_param_groups(lr)`` when it defines
        one (torch param-group dicts for the base learning rate ``lr``, the ``optimizer:``
        block's, and its ``weight_decay`` when the method takes that argument), else on
        ``routine.parameters()``; the ``lr_scheduler:`` is built on it, so the schedule scales
        every group.
        :class:`~torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine` puts the σNorm
        scale logits at their learning-rate multiplier without weight decay this way. The result
        goes to TorchUncertainty's ``optim_recipe`` (what its routines' ``configure_optimizers``
        returns), so no method of the routine is replaced.
        """
        optimizer = self._config_value(self.config_init, "optimizer")
        if optimizer is None:
            return
        if not hasattr(self.routine, "optim_recipe"):
            raise ValueError(
                f"The recipe has an `optimizer:` block, but the routine "
                f"{type(self.routine).__name__} takes no `optim_recipe` (TorchUncertainty's "
                f"routines do): remove the block, or configure the optimiser in the routine."
            )
        groups = getattr(self.routine, "optimizer_param_groups", None)
        parameters = list(self.routine.parameters())
        if callable(groups):
            defaults = optimizer(parameters).defaults
            extra = {}
            if "weight_decay" in inspect.signature(groups).parameters:
                extra["weight_decay"] = defaults.get("weight_decay")
            parameters = [dict(group) for group in groups(defaults["lr"], **extra)]
        built = optimizer(parameters)
        lr_scheduler = self._config_value(self.config_init, "lr_scheduler")
        self.routine.optim_recipe = self.configure_optimizers(
            self.routine, built, None if lr_scheduler is None else lr_scheduler(built)
        )

    @staticmethod
    def configure_optimizers(lightning_module: LightningModule, optimizer, lr_scheduler=None):
        """As Lightning's; a scheduler declaring ``interval = "step"`` (such as
        :class:`~torch_uncertainty_signorm.lr_schedulers.WarmupCosineLR`) is stepped every
        optimisation step instead of every epoch."""
        if getattr(lr_scheduler, "interval", None) == "step":
            return {"optimizer": optimizer,
                    "lr_scheduler": {"scheduler": lr_scheduler, "interval": "step"}}
        return LightningCLI.configure_optimizers(lightning_module, optimizer, lr_scheduler)

    # ------------------------------------------ interrupted runs (see ExactResumeCheckpoint)
    def instantiate_classes(self) -> None:
        """As TorchUncertainty's; ``fit --ckpt_path <log dir>/version_<n>/checkpoints/<file>``
        of an interruption checkpoint first sets the logger's ``version`` to ``n``, so a resumed
        run logs into its own version; from any other checkpoint (a best one), ``fit`` logs into
        a new version and leaves the old one's files as they are."""
        if self.subcommand == "fit":
            self._continue_logged_run(self.config["fit"])
        super().instantiate_classes()
        self.configure_routine_optimizer()
        if self.datamodule is not None:  # offline: name the data set, root and files, not a URL
            from .datamodules.downloads import explain_download_failures

            explain_download_failures(self.datamodule)

    def _continue_logged_run(self, config: Namespace) -> None:
        ckpt_path = config.get("ckpt_path")
        if not ckpt_path or not self._resumes_interruption or not Path(ckpt_path).is_file():
            return
        run_dir = Path(ckpt_path).resolve().parent.parent  # <save_dir>/<name>/version_<n>
        version = run_dir.name.removeprefix("version_")
        if not (run_dir.name.startswith("version_") and version.isdigit()):
            return
        loggers = config.get("trainer", Namespace()).get("logger")
        for logger_config in loggers if isinstance(loggers, list) else [loggers]:
            is_block = isinstance(logger_config, Namespace)
            init_args = logger_config.get("init_args") if is_block else None
            if init_args is None or "version" not in init_args or init_args.version is not None:
                continue  # not a class_path logger with a version, or the user chose the version
            if Path(init_args.get("save_dir") or ".", init_args.get("name") or "").resolve() == (
                run_dir.parent
            ):
                init_args.version = int(version)
                # Its config.yaml is this run's: overwritten, it now records the `ckpt_path`.
                self.save_config_kwargs = {**self.save_config_kwargs, "overwrite": True}

    def _run_subcommand(self, subcommand: str) -> None:
        """As Lightning's, with a stop by SIGTERM or Ctrl-C raising :class:`RunInterrupted`."""
        try:
            super()._run_subcommand(subcommand)
        except SIGTERMException as stop:
            raise RunInterrupted(SIGTERM_EXIT_CODE, self._interruption_checkpoint(),
                                 self._tested_after_fit) from stop
        except SystemExit as stop:  # Lightning exits with 1 after Ctrl-C
            if self.trainer.state.status != TrainerStatus.INTERRUPTED:
                raise
            raise RunInterrupted(SIGINT_EXIT_CODE, self._interruption_checkpoint(),
                                 self._tested_after_fit) from stop

    def _interruption_checkpoint(self) -> Path | None:
        from .callbacks.exact_resume import ExactResumeCheckpoint

        paths = [callback.saved_path for callback in self.trainer.callbacks
                 if isinstance(callback, ExactResumeCheckpoint)]
        return next((path for path in paths if path is not None), None)


def _option_value(args: list[str], index: int, option: str) -> int | None:
    """The index of ``option``'s value when ``args[index]`` is ``option`` or ``option=...``."""
    if args[index] == option and index + 1 < len(args):
        return index + 1
    return index if args[index].startswith(f"{option}=") else None


def _set_value(args: list[str], index: int, option: str, value: str) -> None:
    args[index] = f"{option}={value}" if args[index].startswith(f"{option}=") else value


def _value(args: list[str], index: int, option: str) -> str:
    return args[index].removeprefix(f"{option}=")


def tu_format_args(args: Iterable[str]) -> list[str]:
    """Command-line ``args`` reading TorchUncertainty's recipes as its ``main.py`` does.

    * ``--data CIFAR10DataModule`` (a class name or an import path) names the datamodule of
      ``data:`` blocks without ``class_path``;
    * a ``routine:`` block without ``class_path`` is
      :data:`~torch_uncertainty_signorm.tu_format.DEFAULT_ROUTINE`;
    * ``--config`` recipes are updated by
      :func:`~torch_uncertainty_signorm.tu_format.normalise_recipe` (a recipe it changes is
      passed on as a YAML string), and a datamodule no recipe nor ``--data`` names is an error
      (:func:`~torch_uncertainty_signorm.tu_format.check_datamodule_named`).

    Both classes are given as the first options of the subcommand, so a recipe's or a later
    option's ``class_path`` still overrides them.
    """
    args = list(args)
    datamodule = None
    for index in range(len(args)):
        at = _option_value(args, index, "--data")
        value = None if at is None else _value(args, at, "--data")
        if value and re.fullmatch(r"[A-Za-z_][\w.]*", value) and not Path(value).is_file():
            datamodule = resolve_datamodule(value)
            _set_value(args, at, "--data", datamodule)
    recipes = []
    for index in range(len(args)):
        at = _option_value(args, index, "--config")
        path = None if at is None else Path(_value(args, at, "--config"))
        recipe = yaml.safe_load(path.read_text()) if path and path.is_file() else None
        if not isinstance(recipe, dict):
            continue
        recipes.append(recipe)
        if (normalised := normalise_recipe(recipe)) != recipe:
            _set_value(args, at, "--config", yaml.safe_dump(normalised, sort_keys=False))
    check_datamodule_named(recipes, datamodule)
    start = next((i + 1 for i, arg in enumerate(args) if arg in SUBCOMMANDS), 0)
    defaults = [f"--routine={DEFAULT_ROUTINE}"] + ([f"--data={datamodule}"] if datamodule else [])
    return args[:start] + defaults + args[start:]


class RunInterrupted(SystemExit):
    """A run stopped by SIGTERM (exit code 143 = 128 + 15) or Ctrl-C (130 = 128 + 2).

    Schedulers read a non-zero code as "not finished"; ``checkpoint`` is the interruption
    checkpoint to resume from (``None`` when none was written); ``tested`` the best
    checkpoint of a finished ``fit`` whose ``--eval_after_fit`` test was stopped.
    """

    def __init__(self, code: int, checkpoint: Path | None, tested: Path | None = None) -> None:
        super().__init__(code)
        self.checkpoint = checkpoint
        self.tested = tested


def resume_command(args: list[str], checkpoint: Path, subcommand: str | None = None) -> str:
    """The ``torch-uncertainty`` command line ``args`` resumed from ``checkpoint`` (run as
    ``subcommand``, e.g. ``"test"``, when given)."""
    kept, skip = [], False
    for arg in args:
        if skip or arg.startswith("--ckpt_path="):
            skip = False
            continue
        skip = arg == "--ckpt_path"
        if not skip:
            kept.append(arg)
    if subcommand is not None and (at := next(
        (i for i, arg in enumerate(kept) if arg in SUBCOMMANDS), None
    )) is not None:
        kept[at] = subcommand
    return shlex.join(["torch-uncertainty", *kept, "--ckpt_path", str(checkpoint)])


def cli_main(args: ArgsType = None, **kwargs: Any) -> TUSigmaNormCLI:
    """Build and run :class:`TUSigmaNormCLI`, returning it (for tests and notebooks).

    Args:
        args: Command-line style arguments; ``sys.argv[1:]`` when ``None``.
        **kwargs: Passed to :class:`TUSigmaNormCLI` (e.g. ``run=False``).
    """
    return TUSigmaNormCLI(args=args, **kwargs)


def main(args: ArgsType = None) -> None:
    """Entry point of the ``torch-uncertainty`` console script."""
    # As TorchUncertainty's entry scripts: TF32 matmuls on GPUs that support them. Not on CPU,
    # where recent torch would run float32 matmuls in bfloat16.
    if torch.cuda.is_available():
        torch.set_float32_matmul_precision("medium")
    start = time.perf_counter()
    try:
        cli_main(args)
    except RunInterrupted as stop:
        if stop.checkpoint is not None:
            argv = sys.argv[1:] if args is None else args
            command = resume_command(argv, stop.checkpoint) if isinstance(argv, list) else None
            print(f"torch-uncertainty interrupted: checkpoint {stop.checkpoint}"
                  + (f"\nResume with: {command}" if command else ""), file=sys.stderr)
        elif stop.tested is not None:  # fit had finished: its best checkpoint is to be tested
            argv = sys.argv[1:] if args is None else args
            command = (resume_command(argv, stop.tested, "test") if isinstance(argv, list) else
                       f"torch-uncertainty test --config <recipe> --ckpt_path {stop.tested}")
            print(f"torch-uncertainty interrupted while testing after fit: training had finished "
                  f"(the same command again would train again). Test its best checkpoint with: "
                  f"{command}", file=sys.stderr)
        else:
            print("torch-uncertainty interrupted: no checkpoint written (nothing to resume: no "
                  "optimisation step was taken, or the state was not finite); run the same "
                  "command again.", file=sys.stderr)
        raise
    except (ValueError, TypeError) as error:
        if (cause := _buried_cause(error)) is not None:
            # jsonargparse wraps a constructor's error in its Union report, whose last line is
            # the whole configuration: say the constructor's message last, where users look.
            traceback.print_exc()
            print(f"torch-uncertainty: invalid configuration: {type(cause).__name__}: {cause}",
                  file=sys.stderr)
            raise SystemExit(1) from None
        raise
    print(f"torch-uncertainty finished in {time.perf_counter() - start:.1f} s (wall time)")


def _buried_cause(error: BaseException) -> BaseException | None:
    """The deepest ``ValueError``/``TypeError`` raised by this package's own code in ``error``'s
    chain of causes, when ``error`` is not it (a library's wrapper around it), else ``None``."""
    found, seen = None, set()
    current: BaseException | None = error.__cause__ or error.__context__
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = traceback.extract_tb(current.__traceback__)
        if (isinstance(current, (ValueError, TypeError)) and frames
                and f"{Path(__file__).parent.name}{os.sep}" in frames[-1].filename):
            found = current
        current = current.__cause__ or current.__context__
    return found if found is not None and str(found) != str(error) else None


if __name__ == "__main__":
    main()
