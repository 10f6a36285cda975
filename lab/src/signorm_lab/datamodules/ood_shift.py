"""TorchUncertainty's CIFAR-10/100 and ImageNet datamodules with near/far OOD and severity sweeps.

The test loaders are, in order: the clean test set, one loader per OOD set (OpenOOD v1.5 near
then far groups), and one loader per ``(severity, corruption)`` of the matching ``-C`` set. Each
loader's role is published in ``eval_sets`` (one
:class:`~signorm_lab.evaluation.EvalSet` per loader), which
:class:`~signorm_lab.callbacks.OODShiftEvaluation` reads to log ``ood_near/*``,
``ood_far/*`` and ``shift/s{k}/*``. TorchUncertainty's own ``eval_ood`` / ``eval_shift`` (one OOD
set, one severity, read by position by the routine) stay off: the routine only scores loader 0.

Example (YAML)::

    data:
      class_path: signorm_lab.datamodules.CIFAR100OODShiftDataModule
      init_args: {root: ./data, batch_size: 128, eval_near_far_ood: true,
                  eval_shift_severities: true}
    trainer:
      callbacks: [{class_path: signorm_lab.callbacks.OODShiftEvaluation}]
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader, Dataset
from torch_uncertainty.datamodules import CIFAR10DataModule, CIFAR100DataModule
from torch_uncertainty.datamodules.classification import ImageNetDataModule
from torch_uncertainty.datasets.utils import TTADataset
from torchvision.transforms import v2

from .. import _compat
from ..evaluation.eval_sets import SEVERITIES, EvalSet, check_severities
from .corruptions import (
    BENCHMARK_CORRUPTIONS,
    CIFAR10CSeverity,
    CIFAR100CSeverity,
    ImageNetCSeverity,
    check_corruptions,
)
from .ood_datasets import OOD_LAYOUTS, OPENOOD_SPLITS, build_ood_dataset, check_ood_groups

__all__ = [
    "CIFAR10OODShiftDataModule",
    "CIFAR100OODShiftDataModule",
    "ImageNetOODShiftDataModule",
    "OODShiftMixin",
]

logger = logging.getLogger(__name__)


class OODShiftMixin:
    """Near/far OOD and per-severity corruption loaders for a TorchUncertainty datamodule.

    Mixed in before a ``TUDataModule`` subclass that defines ``root``, ``test_transform``,
    ``num_tta``, ``_data_loader`` and a ``test_dataloader()`` returning the clean loader first.
    Subclasses set :attr:`benchmark` (a key of
    :data:`~signorm_lab.datamodules.ood_datasets.OPENOOD_SPLITS`),
    :attr:`shift_dataset_class` and :attr:`resize_ood` (resize OOD images to ``input_shape``,
    as OpenOOD does for its 32x32 benchmarks).

    Args:
        root: Root directory of all datasets (each in its usual sub-folder).
        batch_size: Training batch size.
        eval_near_far_ood: Add one test loader per OOD set of ``ood_groups``.
        ood_groups: ``{"near": [...], "far": [...]}`` names of
            :data:`~signorm_lab.datamodules.ood_datasets.OOD_DATASETS`; the
            OpenOOD v1.5 split of this dataset when ``None``.
        eval_shift_severities: Add one test loader per corruption and severity.
        shift_severities: Severities to evaluate. Defaults to 1..5.
        corruptions: Corruptions averaged per severity. Defaults to the 15 benchmark ones.
        download: Fetch the missing OOD and corrupted sets (and the in-distribution set, as
            TorchUncertainty does) in ``prepare_data``. ``False`` downloads nothing; either way
            every set is checked first and the missing ones are reported together, see
            :meth:`prepare_data`.
        **kwargs: Every other argument of the TorchUncertainty datamodule, except
            ``eval_ood``/``eval_shift`` which must stay ``False``.

    Raises:
        ValueError: On unknown OOD group or set names, severities outside 1..5, unknown
            corruptions, or ``eval_ood``/``eval_shift`` set.
    """

    benchmark: str
    shift_dataset_class: type[Dataset]
    resize_ood: bool = False

    def __init__(
        self,
        root: str,
        batch_size: int,
        eval_near_far_ood: bool = False,
        ood_groups: dict[str, list[str]] | None = None,
        eval_shift_severities: bool = False,
        shift_severities: list[int] = list(SEVERITIES),  # noqa: B006 (never mutated)
        corruptions: list[str] = list(BENCHMARK_CORRUPTIONS),  # noqa: B006
        download: bool = True,
        **kwargs: Any,
    ) -> None:
        ours_by_flag = {"eval_ood": "eval_near_far_ood", "eval_shift": "eval_shift_severities"}
        for flag, ours in ours_by_flag.items():
            if kwargs.get(flag):
                raise ValueError(
                    f"{type(self).__name__} evaluates OOD and shift with `{ours}`; `{flag}=True` "
                    "would add TorchUncertainty's single-set loader and shift the loader "
                    f"positions. Set {ours}=True instead."
                )
        super().__init__(root=root, batch_size=batch_size, **kwargs)
        self.eval_near_far_ood = bool(eval_near_far_ood)
        self.ood_groups = check_ood_groups(
            OPENOOD_SPLITS[self.benchmark] if ood_groups is None else ood_groups
        )
        self.eval_shift_severities = bool(eval_shift_severities)
        self.shift_severities = check_severities(shift_severities, "shift_severities")
        self.corruptions = check_corruptions(corruptions)
        self.download = bool(download)
        self.eval_sets: list[EvalSet] = [EvalSet("id", self.benchmark)]
        self.eval_datasets: list[Dataset] = []

    def _planned_sets(self) -> list[EvalSet]:
        sets = []
        if self.eval_near_far_ood:
            for group, names in self.ood_groups.items():
                sets += [EvalSet("ood", name, group=group) for name in names]
        if self.eval_shift_severities:
            sets += [
                EvalSet("shift", corruption, severity=severity)
                for severity in self.shift_severities
                for corruption in self.corruptions
            ]
        return sets

    def _ood_transform(self) -> v2.Transform:
        # MNIST is grayscale, Textures/Places/TinyImageNet larger than CIFAR: RGB, then resized.
        steps = [v2.RGB()]
        if self.resize_ood:
            steps.append(v2.Resize(tuple(self.input_shape[-2:]), antialias=True))
        return v2.Compose([*steps, self.test_transform])

    def _build(self, spec: EvalSet, download: bool) -> Dataset:
        if spec.kind == "ood":
            return build_ood_dataset(spec.name, self.root, self._ood_transform(), download)
        return self.shift_dataset_class(
            self.root, spec.name, spec.severity, transform=self.test_transform, download=download
        )

    def _try_build(self, spec: EvalSet) -> Dataset | None:
        """The set from local files, or ``None`` when it is missing (nothing is downloaded)."""
        try:
            return self._build(spec, download=False)
        except (FileNotFoundError, RuntimeError):  # ours / torchvision's "Dataset not found"
            return None

    def _is_available(self, spec: EvalSet) -> bool:
        if spec.kind == "shift":
            return self.shift_dataset_class.is_available(self.root, spec.name, spec.severity)
        return self._try_build(spec) is not None

    def _id_available(self) -> bool:
        """Whether the in-distribution CIFAR set is on disk (ImageNet is never downloaded)."""
        if self.benchmark not in OOD_LAYOUTS:
            return True
        return self._try_build(EvalSet("ood", self.benchmark, group="near")) is not None

    def _describe_missing(self, missing: list[EvalSet], id_missing: bool = False) -> list[str]:
        """One line per missing set (per corruption for shifted ones): expected path and layout."""
        lines = []
        if id_missing:
            path, layout = OOD_LAYOUTS[self.benchmark]
            lines.append(f"{self.benchmark} (in-distribution): {Path(self.root) / path} ({layout})")
        for spec in missing:
            if spec.kind == "ood":
                path, layout = OOD_LAYOUTS[spec.name]
                lines.append(f"{spec.name} ({spec.group} OOD): {Path(self.root) / path} ({layout})")
        severities: dict[str, list[int]] = {}
        for spec in missing:
            if spec.kind == "shift":
                severities.setdefault(spec.name, []).append(spec.severity)
        shift = self.shift_dataset_class
        if severities:
            lines.append(
                f"{shift.base_folder} (shift): {Path(self.root) / shift.base_folder} "
                f"({shift.layout}), missing:"
            )
        for corruption, levels in severities.items():
            path = shift.expected_path(
                self.root, corruption, levels[0] if len(levels) == 1 else "<severity>"
            )
            lines.append(f"  {corruption} (severities {levels}): {path}")
        return lines

    def _missing_error(
        self, missing: list[EvalSet], cause: str | None = None, id_missing: bool = False
    ) -> FileNotFoundError:
        lines = "\n".join(f"  {line}" for line in self._describe_missing(missing, id_missing))
        if cause is not None:
            advice = (
                f"Downloading stopped at the first failure ({cause}); the machine may be "
                "offline. Put each set at its path, or run once with network access."
            )
        else:
            advice = (
                "Put each set at its path, or let prepare_data fetch them "
                "(data.init_args.download=true, with network access)."
            )
        return FileNotFoundError(
            f"Evaluation sets missing under root '{self.root}' (expected path, then on-disk "
            f"layout):\n{lines}\n{advice}"
        )

    def prepare_data(self) -> None:
        """Check every planned OOD and corrupted set, then download the missing ones.

        The check comes first and opens local files only. With ``download=False`` any missing
        set ends it: one :class:`FileNotFoundError` lists every missing set with its expected
        path and on-disk layout. With ``download=True`` the missing sets are fetched one by
        one (after TorchUncertainty's own downloads); the first failure (offline, say) stops
        the downloads and the same single error lists every set still missing, with the
        failure's cause, instead of a network traceback.

        Raises:
            FileNotFoundError: If sets are missing and could not be downloaded.
        """
        missing = [spec for spec in self._planned_sets() if not self._is_available(spec)]
        id_missing = not self._id_available()
        if not self.download:
            if missing or id_missing:
                raise self._missing_error(missing, id_missing=id_missing)
            return
        cause = None
        try:
            super().prepare_data()
        except (OSError, RuntimeError) as error:  # URLError is an OSError
            cause = f"{self.benchmark}: {type(error).__name__}: {_first_line(error)}"
        for spec in missing if cause is None else []:
            if self._is_available(spec):  # fetched with an earlier set's archive (CIFAR-C)
                continue
            logger.info("Downloading the evaluation set %s into %s", spec.name, self.root)
            try:
                self._build(spec, download=True)
            except (OSError, RuntimeError) as error:
                cause = f"{spec.name}: {type(error).__name__}: {_first_line(error)}"
                break
        if cause is not None:
            still_missing = [spec for spec in missing if not self._is_available(spec)]
            raise self._missing_error(still_missing, cause, not self._id_available()) from None

    def setup(self, stage: str | None = None) -> None:
        """TorchUncertainty's setup, then the OOD and corrupted test sets at ``test``."""
        super().setup(stage)
        if stage in ("test", None):
            self.setup_eval_sets()

    def setup_eval_sets(self) -> None:
        """Build the OOD and corrupted sets (from local files) and :attr:`eval_sets`.

        Raises:
            FileNotFoundError: Listing every missing set with its expected path and layout.
        """
        planned = self._planned_sets()
        datasets = [self._try_build(spec) for spec in planned]
        if missing := [spec for spec, data in zip(planned, datasets, strict=True) if data is None]:
            raise self._missing_error(missing)
        self.eval_datasets = datasets
        self.eval_sets = [EvalSet("id", self.benchmark), *planned]

    def eval_dataloaders(self) -> list[DataLoader]:
        """One loader per OOD / corrupted set, in :attr:`eval_sets` order (after the clean one)."""
        return [
            _compat.tu_data_loader(
                self,
                TTADataset(dataset, self.num_tta) if self.num_tta > 1 else dataset,
                training=False,
                shuffle=False,
            )
            for dataset in self.eval_datasets
        ]

    def test_dataloader(self) -> list[DataLoader]:
        """The clean test loader, then :meth:`eval_dataloaders`."""
        return [*super().test_dataloader(), *self.eval_dataloaders()]


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [""])[0]


class CIFAR10OODShiftDataModule(OODShiftMixin, CIFAR10DataModule):
    """CIFAR-10; near OOD: CIFAR-100, TinyImageNet; far: MNIST, SVHN, Textures, Places365;
    shift: CIFAR-10-C. Arguments as :class:`OODShiftMixin`."""

    benchmark = "CIFAR10"
    shift_dataset_class = CIFAR10CSeverity
    resize_ood = True


class CIFAR100OODShiftDataModule(OODShiftMixin, CIFAR100DataModule):
    """CIFAR-100; near OOD: CIFAR-10, TinyImageNet; far: MNIST, SVHN, Textures, Places365;
    shift: CIFAR-100-C. Arguments as :class:`OODShiftMixin`."""

    benchmark = "CIFAR100"
    shift_dataset_class = CIFAR100CSeverity
    resize_ood = True


class ImageNetOODShiftDataModule(OODShiftMixin, ImageNetDataModule):
    """ImageNet-1k; near OOD: SSB-hard, NINCO; far: iNaturalist, Textures, OpenImage-O;
    shift: ImageNet-C. Arguments as :class:`OODShiftMixin`."""

    benchmark = "ImageNet"
    shift_dataset_class = ImageNetCSeverity
