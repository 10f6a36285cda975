"""The ``torch-uncertainty`` command: TorchUncertainty's Lightning CLI for any routine and datamodule.

TorchUncertainty ships one entry script per dataset (``experiments/classification/cifar10/main.py``
and siblings), each binding :class:`~torch_uncertainty.utils.cli.TULightningCLI` to one routine
class and one datamodule class. This module provides a single command instead: the routine (the
``routine:`` block) and the datamodule (the ``data:`` block) are both chosen in the recipe by
``class_path``, so every recipe in ``experiments/`` runs through the same entry point::

    torch-uncertainty fit --config experiments/wrn_c100_signorm.yaml
    torch-uncertainty test --config experiments/wrn_c100_signorm.yaml --ckpt_path path/to/best.ckpt

On top of :class:`TULightningCLI`, with class_path blocks:

* ``eval_ood``, ``eval_shift`` and ``num_tta`` are forwarded from the datamodule to the routine.
  ``TULightningCLI`` links ``data.eval_ood`` to ``routine.eval_ood``; with class_path blocks those
  keys are ``data.init_args.eval_ood`` and ``routine.init_args.eval_ood``, jsonargparse rejects the
  link with a ``ValueError``, and ``TULightningCLI`` suppresses that error, so nothing is linked.
* ``--eval_after_fit`` tests the best checkpoint once ``fit`` ends (TorchUncertainty does this in its
  entry scripts, outside the CLI); ``--eval_after_fit=false`` overrides a recipe's ``true``.
* The resolved configuration is saved next to the logs: TorchUncertainty 0.13's ``TULightningCLI``
  defaults ``save_config_callback`` to ``None``, so its scripts save nothing;
  :class:`~torch_uncertainty.utils.cli.TUSaveConfigCallback` is the default here.
* Routines calling ``save_hyperparameters()`` store their ``routine:`` block, so
  ``load_from_checkpoint`` and ``--ckpt_path`` work (Lightning reads a ``model:`` block).

Optimiser parameter groups: from the top-level ``optimizer:`` / ``lr_scheduler:`` blocks of the
recipes, Lightning builds the optimiser on ``routine.parameters()``, a single group. A routine
needing several (the σNorm scale logits at a larger learning rate, without weight decay) defines
``optimizer_param_groups(lr)``; see :meth:`TUSigmaNormCLI.optimizer_param_groups`.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from jsonargparse import Namespace
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import ArgsType, LightningArgumentParser, LightningCLI
from lightning.pytorch.utilities.rank_zero import rank_zero_warn
from torch_uncertainty.utils.cli import TULightningCLI, TUSaveConfigCallback

__all__ = ["FORWARDED_DATA_ARGS", "TUSigmaNormCLI", "cli_main", "forward_datamodule_args", "main"]

logger = logging.getLogger(__name__)

#: Datamodule arguments that decide which evaluation loaders exist, and that the routine must match.
FORWARDED_DATA_ARGS = ("eval_ood", "eval_shift", "num_tta")


def _import_object(path: str) -> Any:
    module_name, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module_name), name)


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
        parameter = inspect.signature(_import_object(class_path)).parameters.get(name)
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
    * saves the resolved configuration in the logger's directory
      (:class:`~torch_uncertainty.utils.cli.TUSaveConfigCallback` by default);
    * stores the ``routine:`` block as the routine's hyperparameters when the routine calls
      ``save_hyperparameters()``, so ``Routine.load_from_checkpoint`` and ``--ckpt_path`` work
      (Lightning looks for a ``model:`` block, which TorchUncertainty renamed ``routine:``);
    * builds the optimiser from the routine's ``optimizer_param_groups(lr)`` when it defines one.

    Lightning's progress bar and callbacks are left as they are.

    Args:
        model_class: Base class of the routine. Defaults to ``LightningModule``.
        datamodule_class: Base class of the datamodule. Defaults to ``LightningDataModule``.
        save_config_callback: Callback saving the resolved config. Defaults to
            :class:`~torch_uncertainty.utils.cli.TUSaveConfigCallback`.
        subclass_mode_model: Choose the routine by ``class_path``. Defaults to ``True``.
        subclass_mode_data: Choose the datamodule by ``class_path``. Defaults to ``True``.
        **kwargs: Passed to :class:`~torch_uncertainty.utils.cli.TULightningCLI`.
    """

    def __init__(
        self,
        model_class: type[LightningModule] | None = None,
        datamodule_class: type[LightningDataModule] | None = None,
        save_config_callback: type[TUSaveConfigCallback] | None = TUSaveConfigCallback,
        subclass_mode_model: bool = True,
        subclass_mode_data: bool = True,
        **kwargs: Any,
    ) -> None:
        self.forwarded_data_args: dict[str, Any] = {}
        super().__init__(
            model_class=model_class or LightningModule,
            datamodule_class=datamodule_class or LightningDataModule,
            save_config_callback=save_config_callback,
            subclass_mode_model=subclass_mode_model,
            subclass_mode_data=subclass_mode_data,
            **kwargs,
        )

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

    def before_instantiate_classes(self) -> None:
        """Forward the datamodule's evaluation arguments to the routine before building either."""
        super().before_instantiate_classes()
        self.forwarded_data_args = forward_datamodule_args(self._active_config())
        if self.forwarded_data_args:
            logger.info(
                "Forwarded from the datamodule to the routine: %s", self.forwarded_data_args
            )

    def after_fit(self) -> None:
        """With ``--eval_after_fit``, test the best checkpoint (the last weights if none was saved).

        Skipped under ``fast_dev_run``, which saves no checkpoint, as TorchUncertainty does.
        """
        if not self._get(self.config, "eval_after_fit") or self.trainer.fast_dev_run:
            return
        checkpoint = self.trainer.checkpoint_callback
        ckpt_path = "best" if checkpoint is not None and checkpoint.best_model_path else None
        if ckpt_path is None:
            rank_zero_warn(
                "eval_after_fit: no best checkpoint was saved; testing the last weights."
            )
        self.trainer.test(self.routine, datamodule=self.datamodule, ckpt_path=ckpt_path)

    def instantiate_trainer(self, **kwargs: Any) -> Any:
        """As Lightning's; ``trainer.sync_batchnorm: true`` also synchronises σBN statistics
        (:class:`~torch_uncertainty_signorm.distributed.SigmaNormSyncBatchNorm`)."""
        from .distributed import signorm_sync_batchnorm_plugins

        config = {**self._get(self.config_init, "trainer", default={}), **kwargs}
        if (plugins := signorm_sync_batchnorm_plugins(config)) is not None:
            kwargs["plugins"] = plugins
        return super().instantiate_trainer(**kwargs)

    # Lightning's load-from-checkpoint support reads the `model:` block; TorchUncertainty calls it
    # `routine:`. Both hooks are private Lightning API (stable across lightning 2.x).
    def _add_instantiators(self) -> None:
        from lightning.pytorch.cli import _get_module_type, _InstantiatorFn

        self.parser.add_instantiator(
            _InstantiatorFn(cli=self, key="routine"),
            _get_module_type(self._model_class),
            subclasses=self.subclass_mode_model,
        )
        self.parser.add_instantiator(
            _InstantiatorFn(cli=self, key="data"),
            _get_module_type(self._datamodule_class),
            subclasses=self.subclass_mode_data,
        )

    def _parse_ckpt_path(self) -> None:
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if not ckpt_path or not Path(ckpt_path).is_file():
            return  # "best", "last", remote paths: resolved by Lightning when it loads them
        try:
            hparams = torch.load(ckpt_path, weights_only=True, map_location="cpu")
        except Exception as error:  # truncated file, not a checkpoint, unsafe pickle content
            raise ValueError(
                f"ckpt_path='{ckpt_path}' could not be read ({type(error).__name__}: "
                f"{str(error).splitlines()[0]}); expected a Lightning checkpoint (.ckpt)."
            ) from error
        hparams = hparams.get("hyper_parameters", {})
        hparams = {k: v for k, v in hparams.items() if k != "_instantiator"}
        if "_class_path" not in hparams:
            return  # routines that do not save their hyperparameters (TorchUncertainty's)
        routine = {"class_path": hparams.pop("_class_path"), "dict_kwargs": hparams}
        self.config = self.parser.parse_object({subcommand: {"routine": routine}}, self.config)

    def optimizer_param_groups(self, lr: float | None) -> list[dict[str, Any]] | None:
        """The routine's optimiser parameter groups, or ``None`` when it defines none.

        A routine may define ``optimizer_param_groups(lr) -> list[dict]``: torch param-group
        dicts (``params`` plus per-group options such as ``lr`` or ``weight_decay``) for the base
        learning rate ``lr``, which is the ``lr`` of the recipe's ``optimizer:`` block (or the
        optimiser's default). The optimiser is then built from these groups, before the
        ``lr_scheduler:``, so the schedule scales every group.
        :class:`~torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine` uses it to
        give the σNorm scale logits their learning-rate multiplier and no weight decay.

        Args:
            lr: The base learning rate.
        """
        hook = getattr(self.routine, "optimizer_param_groups", None)
        if not callable(hook):
            return None
        return [dict(group) for group in hook(lr)]

    @staticmethod
    def configure_optimizers(lightning_module: LightningModule, optimizer, lr_scheduler=None):
        """As Lightning's; a scheduler declaring ``interval = "step"`` (such as
        :class:`~torch_uncertainty_signorm.lr_schedulers.WarmupCosineLR`) is stepped every
        optimisation step instead of every epoch."""
        if getattr(lr_scheduler, "interval", None) == "step":
            return {"optimizer": optimizer,
                    "lr_scheduler": {"scheduler": lr_scheduler, "interval": "step"}}
        return LightningCLI.configure_optimizers(lightning_module, optimizer, lr_scheduler)

    def _add_configure_optimizers_method_to_model(self, subcommand: str | None) -> None:
        optimizer = self._get(self.config_init, "optimizer")
        if not isinstance(optimizer, dict | Namespace) or "class_path" not in optimizer:
            super()._add_configure_optimizers_method_to_model(subcommand)
            return
        lr = (optimizer.get("init_args") or {}).get("lr")
        if lr is None:
            lr = _signature_default(optimizer["class_path"], "lr")
            lr = None if lr is inspect.Parameter.empty else lr
        groups = self.optimizer_param_groups(lr)
        if groups is None:
            super()._add_configure_optimizers_method_to_model(subcommand)
            return
        # Lightning builds the optimiser from `model.parameters()`: hand it the groups instead.
        self.routine.parameters = lambda *args, **kwargs: groups
        try:
            super()._add_configure_optimizers_method_to_model(subcommand)
        finally:
            del self.routine.parameters


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
    cli_main(args)
    print(f"torch-uncertainty finished in {time.perf_counter() - start:.1f} s (wall time)")


if __name__ == "__main__":
    main()
