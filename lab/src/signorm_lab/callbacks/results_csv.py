"""Complete TorchUncertainty's ``results.csv`` row with what the lab's tools read beside it."""

from __future__ import annotations

import pickle
import re
import warnings
from pathlib import Path

from lightning.pytorch import Callback, LightningModule, Trainer
from torch_uncertainty.utils import get_logger_dir

from ..evaluation.results_csv import append_to_last_row, linked, results_rows
from ..reproduction.runs import TRAINED_STEPS_COLUMN
from ..safety.files import check_file_name
from .run_record import checkpoint_step

__all__ = ["ResultsCSVCallback"]

#: The logged test values TorchUncertainty's row leaves out: σN-Ens's diversity measures,
#: member health counts and each member's accuracy and NLL.
EXTRA_COLUMNS = re.compile(r"^test/(div|health)/.+|^test/member_\d+/.+")


class ResultsCSVCallback(Callback):
    """Add the test values TorchUncertainty's ``results.csv`` row leaves out, and keep that row
    inside the run's folder.

    TorchUncertainty's routine (``save_to_csv``) appends one row of its own metrics to
    ``<log dir>/<csv_filename>`` when a test epoch ends. When the test ends, this callback
    writes into that row the logged ``test/div/*``, ``test/health/*`` and ``test/member_{m}/*``
    values (σN-Ens's routine logs them) and ``train/trained_steps``: the optimizer steps behind
    the tested weights, the larger of the trainer's ``global_step`` and the tested checkpoint's
    (a process testing a checkpoint has taken none itself); left out when the checkpoint holds
    no step torch reads with ``weights_only``. A row that is not the one this test
    added (another process wrote to the file meanwhile) is left as it is, with a warning.

    A ``results.csv`` that is a symbolic or hard link would take the row into the file it leads
    to, outside the run: the routine's ``save_to_csv`` is then off for the test, with a warning
    naming the file (the results are still logged and printed), and on again after it. A
    ``csv_filename`` that is no plain file name is refused before the test.

    The ``torch-uncertainty`` command adds this callback to every run.

    Example:
        >>> trainer = Trainer(callbacks=[ResultsCSVCallback()])
    """

    def __init__(self) -> None:
        self._path: Path | None = None  # the results.csv the test adds a row to
        self._rows_before = 0
        self._tested_steps: int | None = 0  # the tested checkpoint's steps, None if unknown
        self._switched_off: LightningModule | None = None

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._path = None
        if not getattr(pl_module, "save_to_csv", False) or pl_module.logger is None:
            return
        name = check_file_name(pl_module.csv_filename, "csv_filename")
        log_dir = get_logger_dir(pl_module.logger)
        if log_dir is None:
            return
        path = log_dir / name
        if (what := linked(path)) is not None:
            warnings.warn(
                f"'{path}' is {what}: the test results were not written to it (the row "
                f"would land outside this run); they are printed and logged.",
                stacklevel=2,
            )
            pl_module.save_to_csv = False
            self._switched_off = pl_module
            return
        self._path = path
        self._rows_before = results_rows(path)
        try:
            self._tested_steps = checkpoint_step(trainer.ckpt_path, 0)
        except pickle.UnpicklingError:  # a checkpoint torch reads only with weights_only=False
            self._tested_steps = None

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._switch_back_on()
        if self._path is None or not trainer.is_global_zero:
            return
        values = {
            key.split("/dataloader_idx_")[0]: value
            for key, value in trainer.callback_metrics.items()
            if EXTRA_COLUMNS.match(key)
        }
        if self._tested_steps is not None:
            values[TRAINED_STEPS_COLUMN] = float(max(trainer.global_step, self._tested_steps))
        append_to_last_row(
            self._path, values, run_dir=self._path.parent, rows=self._rows_before + 1
        )

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        self._switch_back_on()

    def _switch_back_on(self) -> None:
        if self._switched_off is not None:
            self._switched_off.save_to_csv = True
            self._switched_off = None
