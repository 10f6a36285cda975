"""The ``torch-uncertainty`` command: :class:`TUSigmaNormCLI`, :func:`cli_main` and :func:`main`.

Each job it does on top of TorchUncertainty's ``TULightningCLI`` is a module of
:mod:`signorm_lab.cli`; the class calls them from Lightning's hooks.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import torch
from jsonargparse import Namespace
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import (
    ArgsType,
    LightningArgumentParser,
    LightningCLI,
    LRSchedulerCallable,
    OptimizerCallable,
)
from lightning.pytorch.plugins import CheckpointIO
from lightning.pytorch.trainer.states import TrainerStatus
from lightning.pytorch.utilities.exceptions import SIGTERMException
from lightning.pytorch.utilities.rank_zero import rank_zero_warn
from torch_uncertainty.utils.cli import TULightningCLI, TUSaveConfigCallback

import torch_uncertainty_signorm

from .. import _compat
from ..safety.checkpoint_io import AtomicCheckpointIO
from ..safety.files import read_once
from ..safety.parser_reads import parser_reads_once
from .ckpt_path_args import check_checkpoint_fits, reconcile_checkpoint_args
from .console import debugging, one_line_parser_class, silence_library_noise
from .datamodule_setup import wrap_setup
from .forwarding import forward_datamodule_args
from .hardware import NoAcceleratorError, missing_accelerator
from .interruption import (
    SIGINT_EXIT_CODE,
    SIGTERM_EXIT_CODE,
    RunInterrupted,
    interruption_checkpoint,
    report_interruption,
)
from .optimizer import optim_recipe, routine_optim_recipe
from .recipe_bases import expand_recipe_bases
from .run_folders import (
    SaveRunConfig,
    continue_logged_run,
    remove_unused_log_dirs,
    report_stale_partials,
)
from .trainer import TUSigmaNormTrainer
from .tu_recipes import register_types, tu_format_args

__all__ = ["TUSigmaNormCLI", "cli_main", "main"]

logger = logging.getLogger(__name__)


def _monitored(checkpoint: Any) -> str:
    """`` (val/cls/Acc)``: what the best checkpoint is best at (TorchUncertainty's
    ``TUClsCheckpoint`` keeps one per metric, its best model being the accuracy one)."""
    inner = [
        callback
        for callback in getattr(checkpoint, "callbacks", {}).values()
        if getattr(callback, "best_model_path", None) == checkpoint.best_model_path
    ]
    monitor = getattr(checkpoint, "monitor", None) or next(
        (callback.monitor for callback in inner if getattr(callback, "monitor", None)), None
    )
    return f" ({monitor})" if monitor else ""


class TUSigmaNormCLI(TULightningCLI):
    r"""TorchUncertainty's Lightning CLI with the routine and the datamodule chosen by
    ``class_path``.

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
        trainer_class: The trainer. Defaults to
            :class:`~signorm_lab.cli.trainer.TUSigmaNormTrainer` (TorchUncertainty's,
            reading ``--trainer.limit_val_batches=1`` as one batch, as Lightning does).
        subclass_mode_model: Choose the routine by ``class_path``. Defaults to ``True``.
        subclass_mode_data: Choose the datamodule by ``class_path``. Defaults to ``True``.
        **kwargs: Passed to :class:`~torch_uncertainty.utils.cli.TULightningCLI`.
    """

    def __init__(
        self,
        model_class: type[LightningModule] | None = None,
        datamodule_class: type[LightningDataModule] | None = None,
        save_config_callback: type[TUSaveConfigCallback] | None = SaveRunConfig,
        trainer_class: type = TUSigmaNormTrainer,
        subclass_mode_model: bool = True,
        subclass_mode_data: bool = True,
        **kwargs: Any,
    ) -> None:
        self.forwarded_data_args: dict[str, Any] = {}
        self._started = time.time()
        self._resumes_interruption = False  # --ckpt_path is an interruption checkpoint
        self._checked_checkpoint: tuple[str, dict] | None = None  # --ckpt_path, read once
        self._tested_after_fit: Path | None = None  # the checkpoint --eval_after_fit tests
        self._named_subcommand = _named_subcommand(kwargs.get("args"))
        register_types()  # before the parser is built: TorchUncertainty's `style: cifar`
        try:
            super().__init__(
                model_class=model_class or LightningModule,
                datamodule_class=datamodule_class or LightningDataModule,
                save_config_callback=save_config_callback,
                trainer_class=trainer_class,
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
        """:func:`~signorm_lab.cli.run_folders.remove_unused_log_dirs` of this
        run's trainer."""
        remove_unused_log_dirs(getattr(self, "trainer", None), self._started)

    def subcommands(self) -> dict[str, set[str]]:
        """Lightning's subcommands, only the one the command line starts with when it names one:
        building each subcommand's parser reads every class's signature (seconds each), and a run
        uses one. With another first argument (``--config FILE fit``), all four."""
        every = LightningCLI.subcommands()
        named = self._named_subcommand
        return {named: every[named]} if named in every else every

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
        _check_output_names(self._active_config())
        self.forwarded_data_args = forward_datamodule_args(self._active_config())
        if self.forwarded_data_args:
            logger.info(
                "Forwarded from the datamodule to the routine: %s", self.forwarded_data_args
            )

    def before_validate(self) -> None:
        """Set the datamodule up as for ``fit`` when validating
        (:func:`~signorm_lab.cli.datamodule_setup.wrap_setup`).

        TorchUncertainty's datamodules (CIFAR, ImageNet, MNIST, ...) accept only the ``fit`` and
        ``test`` stages and raise on ``validate``; ``fit`` builds the validation split they serve.
        """
        wrap_setup(self.datamodule, validate_as_fit=True)

    def before_fit(self) -> None:
        """Refuse an empty training set once the datamodule is set up (TorchUncertainty's
        ``get_train_set``), rather than failing in the data loader's sampler
        (:func:`~signorm_lab.cli.datamodule_setup.wrap_setup`)."""
        wrap_setup(self.datamodule, refuse_empty_training_set=True)

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
        self.trainer.test(
            self.routine, datamodule=self.datamodule, ckpt_path=ckpt_path, weights_only=True
        )

    def instantiate_trainer(self, **kwargs: Any) -> Any:
        """As Lightning's; ``trainer.sync_batchnorm: true`` also synchronises σBN statistics
        (:class:`~torch_uncertainty_signorm.members.distributed.MemberSyncBatchNorm`), test
        results print through
        :class:`~signorm_lab.evaluation.printing.SigmaNormEvaluationLoop`, the test's
        ``results.csv`` row gets the diversity, health and member columns and the trained
        steps (:class:`~signorm_lab.callbacks.results_csv.ResultsCSVCallback`), and
        checkpoints are written whole or not at all
        (:class:`~signorm_lab.safety.checkpoint_io.AtomicCheckpointIO`, unless the
        configuration names a ``CheckpointIO`` plugin)."""
        from torch_uncertainty_signorm.members.distributed import member_sync_batchnorm_plugins

        from ..callbacks.results_csv import ResultsCSVCallback
        from ..evaluation.printing import use_results_tables

        config = {**self._config_value(self.config_init, "trainer", default={}), **kwargs}
        if (plugins := member_sync_batchnorm_plugins(config)) is not None:
            config["plugins"] = kwargs["plugins"] = plugins
        plugins = config.get("plugins") or []
        plugins = list(plugins) if isinstance(plugins, (list, tuple)) else [plugins]
        if not any(isinstance(plugin, CheckpointIO) for plugin in plugins):
            kwargs["plugins"] = [*plugins, AtomicCheckpointIO(self._checked_checkpoint)]
        callbacks = config.get("callbacks") or []
        callbacks = list(callbacks) if isinstance(callbacks, (list, tuple)) else [callbacks]
        if not any(isinstance(callback, ResultsCSVCallback) for callback in callbacks):
            kwargs["callbacks"] = [*callbacks, ResultsCSVCallback()]
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
        with read_once(), parser_reads_once():  # each recipe file parsed as it was read first
            if args is None or isinstance(args, list | tuple):
                # Bases first: a recipe naming bases reaches the format's reading as one YAML
                # string per file, each read as a recipe (its moved class paths updated).
                args = tu_format_args(expand_recipe_bases(sys.argv[1:] if args is None else args))
            self._args = args
            with warnings.catch_warnings():
                if from_command_line:  # the args are sys.argv's, not given besides them
                    warnings.filterwarnings("ignore", "LightningCLI's args parameter")
                super().parse_arguments(parser, args)

    def _parse_ckpt_path(self) -> None:
        """Check a checkpoint's saved routine arguments against the recipe, never importing them
        (:func:`~signorm_lab.cli.ckpt_path_args.reconcile_checkpoint_args`):
        Lightning's version imports the checkpoint's ``_class_path`` and lets its values
        override the command line."""
        self.config, self._resumes_interruption, self._checked_checkpoint = (
            reconcile_checkpoint_args(self.parser, self.config, self._args)
        )

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Top-level ``optimizer:`` / ``lr_scheduler:`` blocks, parsed as Lightning's
        ``OptimizerCallable`` / ``LRSchedulerCallable`` (dependency injection, see
        :meth:`configure_routine_optimizer`)."""
        super().add_arguments_to_parser(parser)
        parser.add_argument("--optimizer", type=OptimizerCallable | None, default=None)
        parser.add_argument("--lr_scheduler", type=LRSchedulerCallable | None, default=None)
        parser.add_argument(
            "--num_threads",
            type=int | None,
            default=None,
            help="torch's intra-op CPU threads for this run (torch.set_num_threads); unset: "
            "torch's default (the cores, or OMP_NUM_THREADS). Small inputs gain nothing from "
            "more threads and lose on shared cores (the digits quickstart sets 1).",
        )

    def configure_routine_optimizer(self) -> None:
        """Build the recipe's optimiser and scheduler and hand them to the routine.

        The optimiser is built on the routine's ``optimizer_param_groups(lr)`` when it defines
        one (torch param-group dicts for the base learning rate ``lr``, the ``optimizer:``
        block's, and its ``weight_decay`` when the method takes that argument), else on
        ``routine.parameters()``; the ``lr_scheduler:`` is built on it, so the schedule scales
        every group (:func:`~signorm_lab.cli.optimizer.routine_optim_recipe`).
        :class:`~torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine` puts the σNorm
        scale logits at their learning-rate multiplier without weight decay this way. The result
        goes to TorchUncertainty's ``optim_recipe`` (what its routines' ``configure_optimizers``
        returns), so no method of the routine is replaced. A routine given an ``optim_recipe``
        of its own as well is refused, naming both.
        """
        optimizer = self._config_value(self.config_init, "optimizer")
        if optimizer is None:
            return
        given = getattr(self.routine, "optim_recipe", None)
        if given is not None:  # the block would replace it silently
            given = given.get("optimizer") if isinstance(given, dict) else given
            raise ValueError(
                f"The optimiser is given twice: the routine's optim_recipe (a "
                f"{type(given).__name__}) and "
                f"the recipe's `optimizer:` block "
                f"({self._config_value(self.config, 'optimizer').get('class_path')}): keep one."
            )
        self.routine.optim_recipe = routine_optim_recipe(
            self.routine,
            optimizer,
            self._config_value(self.config_init, "lr_scheduler"),
            block=self._config_value(self.config, "optimizer"),
        )

    @staticmethod
    def configure_optimizers(lightning_module: LightningModule, optimizer, lr_scheduler=None):
        """As Lightning's; a scheduler declaring ``interval = "step"`` (such as
        :class:`~torch_uncertainty_signorm.optim_recipes.WarmupCosineLR`) is stepped every
        optimisation step instead of every epoch
        (:func:`~signorm_lab.cli.optimizer.optim_recipe`)."""
        return optim_recipe(lightning_module, optimizer, lr_scheduler)

    # ------------------------------------------ interrupted runs (see ExactResumeCheckpoint)
    def instantiate_classes(self) -> None:
        """As TorchUncertainty's; ``fit --ckpt_path <log dir>/version_<n>/checkpoints/<file>``
        of an interruption checkpoint first sets the logger's ``version`` to ``n``, so a resumed
        run logs into its own version; from any other checkpoint (a best one), ``fit`` logs into
        a new version and leaves the old one's files as they are.

        A recipe asking for an accelerator this machine lacks (``accelerator: gpu`` without a
        GPU) stops first, before anything is built, with :class:`NoAcceleratorError` naming the
        overrides that run it on the CPU (:func:`~signorm_lab.cli.hardware.
        missing_accelerator`); ``num_threads`` sets torch's intra-op threads."""
        if (problem := missing_accelerator(self._active_config().as_dict())) is not None:
            raise NoAcceleratorError(problem)
        if (threads := self._config_value(self.config, "num_threads")) is not None:
            if threads < 1:
                raise ValueError(f"num_threads must be >= 1 (or unset), got {threads}.")
            torch.set_num_threads(threads)
        if self.subcommand == "fit":
            self._continue_logged_run(self.config["fit"])
        super().instantiate_classes()
        check_checkpoint_fits(self.routine, self._checked_checkpoint)
        self._checked_checkpoint = None  # the trainer's checkpoint IO holds it until it loads
        self.configure_routine_optimizer()
        if self.datamodule is not None:  # offline: name the data set, root and files, not a URL
            from ..datamodules.downloads import explain_download_failures
            from .stand_in import use_stand_in_data

            explain_download_failures(self.datamodule)
            # A root written by signorm-standin-data: accepted, and the run labelled as such.
            use_stand_in_data(self.datamodule, getattr(self, "trainer", None))

    def _continue_logged_run(self, config: Namespace) -> None:
        """:func:`~signorm_lab.cli.run_folders.continue_logged_run`; the continued
        run's ``config.yaml`` is overwritten: it now records the ``ckpt_path``."""
        if continue_logged_run(config, self._resumes_interruption):
            self.save_config_kwargs = {**self.save_config_kwargs, "overwrite": True}

    def _run_subcommand(self, subcommand: str) -> None:
        """As Lightning's, with a stop by SIGTERM or Ctrl-C raising :class:`RunInterrupted`;
        first, the partial files a write cut off by SIGKILL left in the run's folder are removed
        and those in other runs' folders named
        (:func:`~signorm_lab.cli.run_folders.report_stale_partials`)."""
        with contextlib.suppress(OSError):
            report_stale_partials(self.trainer, self._started)
        try:
            super()._run_subcommand(subcommand)
        except SIGTERMException as stop:
            raise RunInterrupted(
                SIGTERM_EXIT_CODE, self._interruption_checkpoint(), self._tested_after_fit
            ) from stop
        except SystemExit as stop:  # Lightning exits with 1 after Ctrl-C
            if self.trainer.state.status != TrainerStatus.INTERRUPTED:
                raise
            raise RunInterrupted(
                SIGINT_EXIT_CODE, self._interruption_checkpoint(), self._tested_after_fit
            ) from stop

    def _interruption_checkpoint(self) -> Path | None:
        return interruption_checkpoint(self.trainer)


def _named_subcommand(args: ArgsType) -> str | None:
    """The first command-line argument (``sys.argv``'s when ``args`` is ``None``), or ``None``
    for structured ``args`` (a dict or a ``Namespace``) or none at all."""
    args = sys.argv[1:] if args is None else args
    return str(args[0]) if isinstance(args, list | tuple) and args else None


def _check_output_names(config: Namespace) -> None:
    """The routine's ``csv_filename`` is a plain file name: TorchUncertainty writes
    ``<run folder> / csv_filename``, which must stay inside the run folder."""
    from ..safety.files import check_file_name

    routine = config.get("routine")
    init_args = routine.get("init_args") if isinstance(routine, Namespace) else None
    if isinstance(init_args, Namespace) and init_args.get("csv_filename") is not None:
        check_file_name(init_args.csv_filename, "routine.init_args.csv_filename")


def cli_main(args: ArgsType = None, **kwargs: Any) -> TUSigmaNormCLI:
    """Build and run :class:`TUSigmaNormCLI`, returning it (for tests and notebooks).

    Args:
        args: Command-line style arguments; ``sys.argv[1:]`` when ``None``.
        **kwargs: Passed to :class:`TUSigmaNormCLI` (e.g. ``run=False``).
    """
    return TUSigmaNormCLI(args=args, **kwargs)


def main(args: ArgsType = None, started: float | None = None) -> None:
    """Entry point of the ``torch-uncertainty`` console script.

    Args:
        args: Command-line style arguments; ``sys.argv[1:]`` when ``None``.
        started: ``time.perf_counter()`` when the console script started
            (:data:`signorm_lab.cli.entry_point.STARTED`), so the printed wall time
            includes the imports; now when ``None``.
    """
    # As TorchUncertainty's entry scripts: TF32 matmuls on GPUs that support them. Not on CPU,
    # where recent torch would run float32 matmuls in bfloat16.
    if torch.cuda.is_available():
        torch.set_float32_matmul_precision("medium")
    silence_library_noise()  # the console says what concerns the run, each warning in one line
    start = time.perf_counter()
    started = start if started is None else started
    try:
        cli_main(args, parser_class=one_line_parser_class())  # errors: one line, not the usage
    except RunInterrupted as stop:
        report_interruption(stop, args)
        raise
    except NoAcceleratorError as error:
        print(f"torch-uncertainty: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    except (ValueError, TypeError) as error:
        if (cause := _buried_cause(error)) is not None:
            # jsonargparse wraps a constructor's error in its Union report, whose last line is
            # the whole configuration: say the constructor's message last, where users look.
            traceback.print_exc()
            print(
                f"torch-uncertainty: invalid configuration: {type(cause).__name__}: {cause}",
                file=sys.stderr,
            )
            raise SystemExit(1) from None
        if _raised_here(error) and not debugging():  # a refusal of this package's checks
            print(f"torch-uncertainty: {type(error).__name__}: {error}", file=sys.stderr)
            raise SystemExit(1) from None
        raise
    print(
        f"torch-uncertainty finished in {time.perf_counter() - started:.1f} s (wall time, "
        f"{start - started:.1f} s of it start-up: importing torch, Lightning and "
        "TorchUncertainty)"
    )


#: The folders of the lab's and the method's code, whose refusals are one line.
_OWN_CODE = (
    f"{Path(__file__).parents[1].name}{os.sep}",
    f"{Path(torch_uncertainty_signorm.__file__).parent.name}{os.sep}",
)


def _own(filename: str) -> bool:
    return any(folder in filename for folder in _OWN_CODE)


def _raised_here(error: BaseException) -> bool:
    """Whether ``error`` is a one-line refusal raised by the lab's or the method's own code."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and "\n" not in str(error) and _own(frames[-1].filename)


def _cause(error: BaseException) -> BaseException | None:
    """The exception ``error`` was raised from, or during; none where it was raised
    ``from None`` (the error says all, the one it replaced is an inner detail)."""
    if error.__cause__ is not None:
        return error.__cause__
    return None if error.__suppress_context__ else error.__context__


def _buried_cause(error: BaseException) -> BaseException | None:
    """The deepest ``ValueError``/``TypeError`` raised by the lab's or the method's code in
    ``error``'s chain of causes, when ``error`` is not it (a library's wrapper around it), else
    ``None``."""
    found, seen = None, set()
    current = _cause(error)
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = traceback.extract_tb(current.__traceback__)
        if isinstance(current, (ValueError, TypeError)) and frames and _own(frames[-1].filename):
            found = current
        current = _cause(current)
    return found if found is not None and str(found) != str(error) else None


if __name__ == "__main__":
    main()
