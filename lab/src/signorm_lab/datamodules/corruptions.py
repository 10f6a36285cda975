"""CIFAR-10-C, CIFAR-100-C and ImageNet-C at a chosen corruption and severity.

TorchUncertainty 0.13 has the datasets but two datamodule paths drop the severity:
``CIFAR10DataModule.setup`` builds ``CIFAR10C`` without ``shift_severity`` (every run evaluates
severity 1), and ``ImageNetDataModule.setup`` calls ``ImageNetC(root, ..., shift_severity=...)``,
a ``TypeError`` (``ImageNetC`` takes keywords only, and none is a severity; its ``ImageFolder``
would also read the corruption folders as classes). The classes here select one
``(corruption, severity)`` set each and are what
:mod:`~signorm_lab.datamodules.ood_shift` builds its shifted loaders from.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from torch_uncertainty.datasets.classification import CIFAR10C, CIFAR100C, ImageNetC
from torchvision.datasets import ImageFolder
from torchvision.datasets.utils import check_integrity, download_and_extract_archive

from torch_uncertainty_signorm.utils.checks import check_choices

from ..evaluation.eval_sets import SEVERITIES, check_severities

__all__ = [
    "BENCHMARK_CORRUPTIONS",
    "CIFAR10CSeverity",
    "CIFAR100CSeverity",
    "ImageNetCSeverity",
    "check_corruptions",
]

#: The 15 corruptions of the benchmark (Hendrycks & Dietterich, 2019); the four "extra" ones
#: (speckle_noise, gaussian_blur, spatter, saturate) are held out as validation corruptions.
BENCHMARK_CORRUPTIONS = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
)
_ALL_CORRUPTIONS = tuple(CIFAR10C.cifarc_subsets)


def check_corruptions(corruptions) -> tuple[str, ...]:
    """Validate a list of corruption names (of the 19 CIFAR-C/ImageNet-C corruptions).

    Raises:
        ValueError: Naming the unknown corruptions and the valid names.
    """
    return check_choices("corruptions", corruptions, _ALL_CORRUPTIONS)


class _CorruptionSeverity:
    """Torchvision-style arguments of one ``(corruption, severity)`` set, checked once here.

    Mixed in before a torchvision dataset; :meth:`_dataset_args` finds (or fetches) the files
    and returns that dataset's arguments besides the transforms.
    """

    def __init__(
        self,
        root: str | Path,
        corruption: str,
        shift_severity: int,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        download: bool = False,
    ) -> None:
        check_corruptions([corruption])
        check_severities([shift_severity], "shift_severity")
        self.corruption, self.shift_severity = corruption, shift_severity
        dataset_args = self._dataset_args(root, download)
        super().__init__(**dataset_args, transform=transform, target_transform=target_transform)

    def _dataset_args(self, root: str | Path, download: bool) -> dict[str, Any]:
        """The dataset's arguments besides the transforms, once its files are there."""
        raise NotImplementedError


class _CIFARCSeverity(_CorruptionSeverity):
    """One ``(corruption, severity)`` set of a CIFAR-C dataset, read lazily from the ``.npy``.

    The files are ``<corruption>.npy`` of shape ``(5 n, 32, 32, 3)`` (uint8) and ``labels.npy``
    of shape ``(5 n,)``, severities stacked in order (``n = 10000`` in the released files).
    Rows ``(s - 1) n`` to ``s n`` are severity ``s``; ``n`` is read from ``labels.npy`` rather
    than assumed, and the arrays are memory-mapped, so the 75 sets of a sweep share the files.
    Integrity is checked by the archive's md5 at download; loading checks the files exist.
    """

    def _dataset_args(self, root: str | Path, download: bool) -> dict[str, Any]:
        """``CIFAR10C``'s arguments; without ``download``, the files must be there."""
        folder = Path(root) / self.base_folder
        if not download and not self._files_exist(folder, self.corruption):
            raise FileNotFoundError(
                f"{self.base_folder} not found in {Path(root)}: need {self.corruption}.npy and "
                f"labels.npy in {folder}. Pass download=True to fetch it."
            )
        return {
            "root": root,
            "subset": self.corruption,
            "shift_severity": self.shift_severity,
            "download": download,
        }

    @classmethod
    def is_available(cls, root: str | Path, corruption: str, shift_severity: int) -> bool:
        """Whether the files of ``corruption`` are under ``root`` (every severity is)."""
        return cls._files_exist(Path(root) / cls.base_folder, corruption)

    @classmethod
    def expected_path(cls, root: str | Path, corruption: str, shift_severity: int) -> Path:
        """The file holding ``corruption`` (all severities) under ``root``."""
        return Path(root) / cls.base_folder / f"{corruption}.npy"

    #: On-disk layout of :attr:`base_folder`, quoted when files are missing.
    layout = (
        "<corruption>.npy (uint8, 5 n x 32 x 32 x 3, severities 1-5 stacked) and labels.npy (5 n,)"
    )

    @staticmethod
    def _files_exist(folder: Path, corruption: str) -> bool:
        return (folder / f"{corruption}.npy").is_file() and (folder / "labels.npy").is_file()

    def _check_integrity(self) -> bool:
        return self._files_exist(self.root / self.base_folder, self.corruption)

    def make_dataset(
        self, root: Path, subset: str, shift_severity: int
    ) -> tuple[np.ndarray, np.ndarray]:
        labels, samples = _read_npy(root / "labels.npy"), _read_npy(root / f"{subset}.npy")
        if (
            samples.dtype != np.uint8
            or samples.ndim != 4
            or not np.issubdtype(labels.dtype, np.integer)
        ):
            raise ValueError(
                f"{root}: {subset}.npy holds {samples.dtype} of shape {samples.shape} and "
                f"labels.npy {labels.dtype}; expected uint8 images (5 n, 32, 32, 3) and integer "
                f"labels, as in the released archive."
            )
        if len(labels) % len(SEVERITIES) or len(samples) != len(labels):
            raise ValueError(
                f"{root}: {subset}.npy has {len(samples)} rows and labels.npy {len(labels)}; "
                f"expected the same number, a multiple of {len(SEVERITIES)} (one block per "
                "severity)."
            )
        per_severity = len(labels) // len(SEVERITIES)
        rows = slice((shift_severity - 1) * per_severity, shift_severity * per_severity)
        return samples[rows], np.asarray(labels[rows])

    def __getitem__(self, index: int):
        sample, target = np.array(self.samples[index]), int(self.labels[index])
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target


def _read_npy(path: Path) -> np.ndarray:
    """The array of ``path``, memory-mapped; a truncated or corrupt file is an error naming it."""
    try:
        return np.load(path, mmap_mode="r")
    except (ValueError, OSError, EOFError) as error:
        raise ValueError(
            f"'{path}' could not be read ({error}): the file is truncated or corrupt. Download "
            f"the archive again (download=True, after removing the folder)."
        ) from None


class CIFAR10CSeverity(_CIFARCSeverity, CIFAR10C):
    """CIFAR-10-C, one corruption at one severity (TorchUncertainty's archive and URL).

    Args:
        root: Directory holding ``CIFAR-10-C/``.
        corruption: One of the 19 corruption names (see :data:`BENCHMARK_CORRUPTIONS`).
        shift_severity: Severity in 1..5.
        transform: Transform applied to each ``(32, 32, 3)`` uint8 array.
        target_transform: Transform applied to each label.
        download: Fetch and extract the archive when the files are missing.

    Raises:
        ValueError: On an unknown corruption or a severity outside 1..5.
        FileNotFoundError: If the files are missing and ``download`` is ``False``.
    """


class CIFAR100CSeverity(_CIFARCSeverity, CIFAR100C):
    """CIFAR-100-C, one corruption at one severity; arguments as :class:`CIFAR10CSeverity`."""


class ImageNetCSeverity(_CorruptionSeverity, ImageFolder):
    """ImageNet-C, one corruption at one severity: ``<root>/imagenet-c/<corruption>/<s>/<wnid>/``.

    Downloads TorchUncertainty's :class:`~torch_uncertainty.datasets.classification.ImageNetC`
    archives (the five Zenodo tars, extracted into ``<root>/imagenet-c``). Class indices are the
    sorted wnids, ImageNet's order (the released folders hold all 1,000 classes).

    Args:
        root: Directory holding ``imagenet-c/``.
        corruption: One of the 19 corruption names (see :data:`BENCHMARK_CORRUPTIONS`).
        shift_severity: Severity in 1..5.
        transform: Transform applied to each PIL image.
        target_transform: Transform applied to each label.
        download: Fetch and extract the archives when the folder is missing.

    Raises:
        ValueError: On an unknown corruption or a severity outside 1..5.
        FileNotFoundError: If the folder is missing and ``download`` is ``False``.
    """

    base_folder = ImageNetC.root_appendix

    def _dataset_args(self, root: str | Path, download: bool) -> dict[str, Any]:
        """``ImageFolder``'s root, the severity's folder, fetched first with ``download``."""
        folder = self.expected_path(root, self.corruption, self.shift_severity)
        if download and not folder.is_dir():
            self.download(root)
        if not folder.is_dir():
            raise FileNotFoundError(
                f"ImageNet-C not found: no folder {folder} (<root>/imagenet-c/<corruption>/"
                "<severity>/<wnid>/<image>). Pass download=True to fetch it."
            )
        return {"root": folder}

    @classmethod
    def is_available(cls, root: str | Path, corruption: str, shift_severity: int) -> bool:
        """Whether the folder of ``(corruption, shift_severity)`` is under ``root``."""
        return (Path(root) / cls.base_folder / corruption / str(shift_severity)).is_dir()

    @classmethod
    def expected_path(cls, root: str | Path, corruption: str, shift_severity: int) -> Path:
        """The folder of ``(corruption, shift_severity)`` under ``root``."""
        return Path(root) / cls.base_folder / corruption / str(shift_severity)

    #: On-disk layout of :attr:`base_folder`, quoted when folders are missing.
    layout = "<corruption>/<severity>/<wnid>/<image>.JPEG (the Zenodo ImageNet-C tars)"

    @staticmethod
    def download(root: str | Path) -> None:
        """Fetch and extract TorchUncertainty's ImageNet-C archives into ``<root>/imagenet-c``."""
        extract_root = Path(root) / ImageNetC.root_appendix
        archives = zip(ImageNetC.url, ImageNetC.filename, ImageNetC.tgz_md5, strict=True)
        for url, filename, md5 in archives:
            if not check_integrity(extract_root / filename, md5):
                download_and_extract_archive(
                    url, extract_root, extract_root=extract_root, filename=filename, md5=md5
                )
