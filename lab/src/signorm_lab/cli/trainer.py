"""The command's trainer: TorchUncertainty's ``TUTrainer`` with Lightning's types for the batch
limits, so that ``--trainer.limit_val_batches=1`` runs one batch.

Lightning reads ``limit_{train,val,test,predict}_batches``, ``overfit_batches`` and
``val_check_interval`` as a number of batches when they are an ``int`` and as a fraction of the
epoch when they are a ``float``. ``TUTrainer`` annotates them ``float``, so the command's parser
(which follows the annotations) turned ``1`` into ``1.0``: 100% of the batches, the opposite of
what was asked. :class:`TUSigmaNormTrainer` annotates them ``int | float``, as Lightning's
``Trainer`` does; every other argument is ``TUTrainer``'s.

Its ``log_dir``, where the run's callbacks write (``config.yaml``, ``run_record.json``, ...), is
a folder of this run for an ``MLFlowLogger`` too, where Lightning's is the store every run shares.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.loggers import MLFlowLogger
from torch_uncertainty.utils import TUTrainer, get_logger_dir

__all__ = ["TUSigmaNormTrainer"]


class TUSigmaNormTrainer(TUTrainer):
    """``TUTrainer`` whose batch limits keep an ``int`` a number of batches.

    Args:
        limit_train_batches: Batches (``int``) or fraction (``float``) of each training epoch.
        limit_val_batches: Batches or fraction of each validation.
        limit_test_batches: Batches or fraction of each test.
        limit_predict_batches: Batches or fraction of each prediction.
        overfit_batches: Batches or fraction to overfit on (0: off).
        val_check_interval: Validate after this many training batches (``int``) or this fraction
            of the training epoch (``float``).
        **kwargs: The other arguments of ``TUTrainer`` (those of Lightning's ``Trainer``).
    """

    def __init__(
        self,
        *,
        limit_train_batches: int | float | None = None,
        limit_val_batches: int | float | None = None,
        limit_test_batches: int | float | None = None,
        limit_predict_batches: int | float | None = None,
        overfit_batches: int | float = 0,
        val_check_interval: int | float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            limit_train_batches=limit_train_batches,
            limit_val_batches=limit_val_batches,
            limit_test_batches=limit_test_batches,
            limit_predict_batches=limit_predict_batches,
            overfit_batches=overfit_batches,
            val_check_interval=val_check_interval,
            **kwargs,
        )

    @property
    def log_dir(self) -> str | None:
        """Lightning's, except for a first logger ``MLFlowLogger`` on a local store: its run's
        artifact folder (TorchUncertainty's ``get_logger_dir``, beside ``results.csv``), not the
        store's root."""
        logger = self.loggers[0] if self.loggers else None
        if not isinstance(logger, MLFlowLogger) or logger.save_dir is None:
            return super().log_dir
        folder = get_logger_dir(logger) if self.is_global_zero else None  # rank 0 has the run
        return self.strategy.broadcast(None if folder is None else str(folder))
