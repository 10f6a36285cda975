"""Complete TorchUncertainty's ``results.csv`` row with what the lab's tools read beside it."""

from __future__ import annotations

import pickle
import re
import warnings
from pathlib import Path

from lightning.pytorch import Callback, LightningModule, Trainer
from torch_uncertainty.utils import get_logger_dir

from ..evaluation.results_csv import add_test_row, linked
from ..reproduction.runs import TRAINED_STEPS_COLUMN
from ..safety.atomic_files import temporary_name
from ..safety.files import check_file_name
from .run_record import checkpoint_step

__all__ = ["ResultsCSVCallback"]

#: The logged test values TorchUncertainty's row leaves out: σN-Ens's diversity measures,
#: member health counts, each member's accuracy and NLL, and whether the data were stand-ins
#: (:data:`~signorm_lab.datamodules.stand_in_data.STAND_IN_COLUMN`).
EXTRA_COLUMNS = re.compile(r"^test/(div|health)/.+|^test/member_\d+/.+|^test/stand_in_data$")


class ResultsCSVCallback(Callback):
    """Add each test's row to the run's ``results.csv`` whole, with the test values
    TorchUncertainty's row leaves out, and keep that row inside the run's folder.

    TorchUncertainty's routine (``save_to_csv``) appends one row of its own metrics to
    ``<log dir>/<csv_filename>`` when a test epoch ends: under the header of a file a first
    test completed with more columns, a second test into the same folder (``test --ckpt_path
    <run>/checkpoints/<file> --trainer.logger.init_args.version=<n>``, the comparison's
    resumed test) would append a row shorter than the header, which no reader takes. The
    routine therefore writes into a temporary file of this process beside it
    (``.<csv_filename>.<pid>-<hex>.partial``), and when the test ends this callback adds that
    row to ``results.csv`` (:func:`~signorm_lab.evaluation.results_csv.add_test_row`): the
    file is written anew, its header the union of the tests' columns, every row complete, and
    renamed over the old one. The row stays in the run's folder rather than going to a new
    version: the run's record, checkpoints and logs are there, and the last row is the run's
    result. A test cut off before its end leaves ``results.csv`` as it was.

    The row gets the logged ``test/div/*``, ``test/health/*``, ``test/member_{m}/*`` and
    ``test/stand_in_data`` values (σN-Ens's routine and the stand-in label log them),
    ``train/trained_steps`` (the optimizer steps behind the tested weights, the larger of the
    trainer's ``global_step`` and the tested checkpoint's; left out when the checkpoint holds no
    step torch reads with ``weights_only``) and ``test/row_crc32``, which tells a row a test
    wrote from one added or edited by hand.

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
        self._written: Path | None = None  # where the routine writes this test's row
        self._csv_filename: str | None = None  # the routine's, while it writes there
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
        self._path, self._written = path, temporary_name(path, "partial")
        self._csv_filename, pl_module.csv_filename = pl_module.csv_filename, self._written.name
        try:
            self._tested_steps = checkpoint_step(trainer.ckpt_path, 0)
        except pickle.UnpicklingError:  # a checkpoint torch reads only with weights_only=False
            self._tested_steps = None

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._switch_back_on()
        written = self._restore(pl_module)
        if self._path is None or written is None:
            return
        if not trainer.is_global_zero or not written.is_file():  # another rank's, or no row
            written.unlink(missing_ok=True)
            return
        values = {
            key.split("/dataloader_idx_")[0]: value
            for key, value in trainer.callback_metrics.items()
            if EXTRA_COLUMNS.match(key)
        }
        if self._tested_steps is not None:
            values[TRAINED_STEPS_COLUMN] = float(max(trainer.global_step, self._tested_steps))
        add_test_row(self._path, written, values)

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        self._switch_back_on()
        if (written := self._restore(pl_module)) is not None:
            written.unlink(missing_ok=True)

    def _restore(self, pl_module: LightningModule) -> Path | None:
        """Give the routine its ``csv_filename`` back; the file it wrote this test's row to."""
        written, self._written = self._written, None
        if self._csv_filename is not None:
            pl_module.csv_filename, self._csv_filename = self._csv_filename, None
        return written

    def _switch_back_on(self) -> None:
        if self._switched_off is not None:
            self._switched_off.save_to_csv = True
            self._switched_off = None
