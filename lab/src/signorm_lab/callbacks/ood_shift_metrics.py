"""Log near/far OOD detection and per-severity shift metrics during ``trainer.test``."""

from __future__ import annotations

from typing import Any

from lightning.pytorch import LightningModule, Trainer
from torch import Tensor
from torch_uncertainty.ood_criteria import MaxSoftmaxCriterion, OODCriterionInputType
from torch_uncertainty.utils import get_logger_dir

from signorm_lab.evaluation import (
    EvalSet,
    NearFarOODMetrics,
    SeverityShiftMetrics,
    append_to_last_row,
)
from torch_uncertainty_signorm.callbacks.logits_tap import TestLogitsCallback
from torch_uncertainty_signorm.evaluation.prediction import member_probabilities
from torch_uncertainty_signorm.utils.checks import check_integer

from ..evaluation.printing import use_results_tables

__all__ = ["OODShiftEvaluation"]


class OODShiftEvaluation(TestLogitsCallback):
    r"""Score every OOD and corrupted test loader of the datamodule, whatever the routine.

    TorchUncertainty's routine reads one OOD loader and one shifted loader by position. With a
    datamodule publishing ``eval_sets`` (one
    :class:`~signorm_lab.evaluation.EvalSet` per test loader, e.g.
    :class:`~signorm_lab.datamodules.CIFAR100OODShiftDataModule`), this callback
    reads the routine's logits on every test batch (a forward hook on ``routine.model``, so the
    model runs once), forms the ensemble prediction as the routine does
    (:math:`\bar p = \frac{1}{M} \sum_m \mathrm{softmax}(z_m)` over the member-major
    ``(M·B, C)`` logits) and logs at the end of the test epoch:

    - ``ood_near/{AUROC,AUPR,FPR95}``, ``ood_far/...`` (group means) and
      ``ood_{near,far}/<set>/...``, scored with the routine's ``ood_criterion`` (MSP by
      default, :class:`~torch_uncertainty.ood_criteria.MaxSoftmaxCriterion` when the routine
      has none) — see :class:`~signorm_lab.evaluation.NearFarOODMetrics`;
    - ``shift/s{k}/{Acc,NLL,ECE}`` and ``shift/mean/...`` — see
      :class:`~signorm_lab.evaluation.SeverityShiftMetrics`.

    The values are also appended to the routine's ``results.csv`` row when it writes one. Works
    with TorchUncertainty's ``ClassificationRoutine`` and
    :class:`~torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine` alike; the
    routine's own ``eval_ood`` / ``eval_shift`` must be off (they would misread the loaders).

    Args:
        num_bins: Bins of the calibration error; the routine's ``num_bins_calibration_error``
            (15 in TorchUncertainty) when ``None``.

    Raises:
        ValueError: If ``num_bins`` is not a positive integer.

    Example (YAML)::

        trainer:
          callbacks:
            - class_path: signorm_lab.callbacks.OODShiftEvaluation
    """

    def __init__(self, num_bins: int | None = None) -> None:
        super().__init__()
        self.num_bins = None if num_bins is None else check_integer("num_bins", num_bins)
        self.ood: NearFarOODMetrics | None = None
        self.shift: SeverityShiftMetrics | None = None
        self.results: dict[str, Tensor] = {}
        self._sets: list[EvalSet] = []

    def setup(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        """Under TorchUncertainty's trainer, print these results in their own tables.

        ``TUTrainer``'s test loop files every ``shift...`` key under one severity and fails
        without a ``shift/severity`` key; the replacement loop differs only in its printing.
        """
        if stage == "test":
            use_results_tables(trainer)

    def on_test_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._sets = self._check_setup(trainer, pl_module)
        ood_sets = [(s.group, s.name) for s in self._sets if s.kind == "ood"]
        shifted = [s for s in self._sets if s.kind == "shift"]
        self.ood = NearFarOODMetrics(ood_sets).to(pl_module.device) if ood_sets else None
        self.shift = None
        if shifted:
            num_classes = 2 if getattr(pl_module, "binary_cls", False) else pl_module.num_classes
            self.shift = SeverityShiftMetrics(
                num_classes,
                corruptions=list(dict.fromkeys(s.name for s in shifted)),
                severities=list(dict.fromkeys(s.severity for s in shifted)),
                num_bins=self.num_bins or getattr(pl_module, "num_bins_calibration_error", 15),
            ).to(pl_module.device)
        self.results = {}
        super().on_test_start(trainer, pl_module)

    def _check_setup(self, trainer: Trainer, pl_module: LightningModule) -> list[EvalSet]:
        sets = getattr(trainer.datamodule, "eval_sets", None)
        if sets is None:
            raise TypeError(
                f"OODShiftEvaluation needs a datamodule with `eval_sets` (e.g. "
                f"CIFAR100OODShiftDataModule), got {type(trainer.datamodule).__name__}."
            )
        if len(sets) != len(trainer.test_dataloaders):
            raise ValueError(
                f"The datamodule lists {len(sets)} eval_sets for "
                f"{len(trainer.test_dataloaders)} test loaders; they must match one to one."
            )
        if getattr(pl_module, "eval_ood", False) or getattr(pl_module, "eval_shift", False):
            raise ValueError(
                "Set the routine's eval_ood and eval_shift to False with OODShiftEvaluation: the "
                "routine would read OOD/shifted sets from loaders 1 and 2, which are others here."
            )
        criterion = getattr(pl_module, "ood_criterion", None)
        if criterion is not None and criterion.input_type == OODCriterionInputType.POST_PROCESSING:
            raise ValueError(
                "OODShiftEvaluation scores OOD from the model's outputs; the routine's "
                f"{type(criterion).__name__} needs post-processing outputs."
            )
        return list(sets)

    def on_test_logits(self, pl_module: LightningModule, batch: Any, dataloader_idx: int) -> None:
        spec = self._sets[dataloader_idx]
        if spec.kind == "id" and self.ood is None:
            return
        targets = batch[1][:: getattr(pl_module, "num_tta", 1)]
        logits, probs_per_member = self._ensemble_outputs(pl_module, targets.size(0))
        probs = probs_per_member.mean(dim=1)
        if spec.kind == "shift":
            self.shift.update(spec.severity, spec.name, probs, targets)
            return
        scores = self._ood_scores(pl_module, logits, probs_per_member, probs)
        if spec.kind == "id":
            self.ood.update_id(scores)
        else:
            self.ood.update_ood(spec.group, spec.name, scores)

    def _ensemble_outputs(
        self, pl_module: LightningModule, batch_size: int
    ) -> tuple[Tensor, Tensor]:
        """Logits ``(B, M, C)`` and categorical member probabilities ``(B, M, C')``."""
        logits, num_estimators = self.tap.take(batch_size)
        binary = getattr(pl_module, "binary_cls", False)
        probs = member_probabilities(logits, num_estimators, binary)
        logits = logits.float().unflatten(0, (num_estimators, batch_size))
        return logits.transpose(0, 1), probs.transpose(0, 1)

    @staticmethod
    def _ood_scores(
        pl_module: LightningModule, logits: Tensor, probs_per_member: Tensor, probs: Tensor
    ) -> Tensor:
        """The routine's OOD criterion on the input it expects (higher means more OOD)."""
        criterion = getattr(pl_module, "ood_criterion", None) or MaxSoftmaxCriterion()
        if criterion.input_type == OODCriterionInputType.LOGIT:
            return criterion(logits)
        if criterion.input_type == OODCriterionInputType.ESTIMATOR_PROB:
            return criterion(probs_per_member)
        return criterion(probs)

    def on_test_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        results: dict[str, Tensor] = {}
        for metrics in (self.ood, self.shift):
            if metrics is not None:
                results |= metrics.compute()
                metrics.reset()
        self.results = results
        if results:
            pl_module.log_dict(results, sync_dist=True)

    def on_test_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """Remove the hook; add the values to the row the routine wrote in ``results.csv``."""
        super().on_test_end(trainer, pl_module)
        if not self.results or not getattr(pl_module, "save_to_csv", False):
            return
        if pl_module.logger is None or not trainer.is_global_zero:
            return
        log_dir = get_logger_dir(pl_module.logger)
        csv_path = None if log_dir is None else log_dir / pl_module.csv_filename
        if csv_path is not None:
            append_to_last_row(csv_path, self.results, run_dir=log_dir)
