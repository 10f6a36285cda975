"""The OpenOOD v1.5 near- and far-OOD test sets, by name, with their download paths.

Each name maps to a factory ``(root, transform, download) -> Dataset``. The classes are
TorchUncertainty's where it ships one (OpenImage-O, TinyImageNet), torchvision's otherwise
(CIFAR, MNIST, SVHN, DTD, Places365, iNaturalist), and :class:`OpenOODImageFolder` for the two
sets only OpenOOD distributes (SSB-hard, NINCO). Labels of OOD sets are never used.

Differences from OpenOOD's image lists, kept to follow TorchUncertainty's datasets: TinyImageNet
is the full ``val`` split (OpenOOD drops the images of classes overlapping CIFAR), iNaturalist is
torchvision's ``2021_valid`` (TorchUncertainty's choice; OpenOOD uses a 10,000-image subset), and
Places365 is the full small ``val`` split.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

from torch.utils.data import ConcatDataset, Dataset
from torch_uncertainty.datasets.classification import OpenImageO, TinyImageNet
from torchvision.datasets import (
    CIFAR10,
    CIFAR100,
    DTD,
    MNIST,
    SVHN,
    ImageFolder,
    INaturalist,
    Places365,
)
from torchvision.datasets.utils import (
    check_integrity,
    download_and_extract_archive,
    download_file_from_google_drive,
    extract_archive,
)

__all__ = [
    "OOD_DATASETS",
    "OOD_LAYOUTS",
    "OPENOOD_SPLITS",
    "OpenOODImageFolder",
    "TinyImageNetVal",
    "build_ood_dataset",
    "check_ood_groups",
]

OODFactory = Callable[[Path, Callable | None, bool], Dataset]


class OpenOODImageFolder(ImageFolder):
    """An OOD set distributed by OpenOOD as a zip of ``<folder>/<class>/<image>`` files.

    Used for SSB-hard (semantic-shift benchmark, hard split, from ImageNet-21k) and NINCO, the
    ImageNet near-OOD sets of OpenOOD v1.5, which neither TorchUncertainty nor torchvision ship.
    The archives are those of OpenOOD's download script (Google Drive).

    Args:
        root: Directory holding ``<folder>/`` (e.g. ``data/ssb_hard/``).
        folder: ``"ssb_hard"`` or ``"ninco"``.
        transform: Transform applied to each PIL image.
        download: Fetch and extract the archive when ``<root>/<folder>`` is missing.

    Raises:
        ValueError: If ``folder`` is not an OpenOOD set known here.
        FileNotFoundError: If the folder is missing and ``download`` is ``False``.
    """

    #: OpenOOD's Google Drive file ids (``scripts/download/download.py`` of OpenOOD v1.5).
    google_drive_ids: ClassVar[dict[str, str]] = {
        "ssb_hard": "1PzkA-WGG8Z18h0ooL_pDdz9cO-DCIouE",
        "ninco": "1Z82cmvIB0eghTehxOGP5VTdLt7OD3nk6",
    }

    def __init__(
        self,
        root: str | Path,
        folder: str,
        transform: Callable | None = None,
        download: bool = False,
    ) -> None:
        if folder not in self.google_drive_ids:
            raise ValueError(
                f"Unknown OpenOOD folder {folder!r}; valid: {sorted(self.google_drive_ids)}."
            )
        root = Path(root)
        if download and not (root / folder).is_dir():
            download_file_from_google_drive(self.google_drive_ids[folder], root, f"{folder}.zip")
            extract_archive(root / f"{folder}.zip", root)
        if not (root / folder).is_dir():
            raise FileNotFoundError(
                f"{folder} not found in {root}: expected {root / folder}/<class>/<image>. "
                "Pass download=True to fetch it."
            )
        super().__init__(root / folder, transform=transform)


class TinyImageNetVal(TinyImageNet):
    """TorchUncertainty's TinyImageNet ``val`` split (10,000 images), with a download.

    Args:
        root: Directory holding ``tiny-imagenet-200/``.
        transform: Transform applied to each PIL image.
        download: Fetch and extract the CS231n archive when the folder is missing.

    Raises:
        FileNotFoundError: If the folder is missing and ``download`` is ``False``.
    """

    url = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"
    md5 = "90528d7ca1a48142e341f4ef8d21d0de"

    def __init__(
        self, root: str | Path, transform: Callable | None = None, download: bool = False
    ) -> None:
        folder = Path(root) / "tiny-imagenet-200"
        if download and not folder.is_dir():
            if not check_integrity(Path(root) / "tiny-imagenet-200.zip", self.md5):
                download_and_extract_archive(self.url, root, md5=self.md5)
            else:
                extract_archive(Path(root) / "tiny-imagenet-200.zip", root)
        if not (folder / "val" / "val_annotations.txt").is_file():
            raise FileNotFoundError(
                f"TinyImageNet not found in {folder} (no val/val_annotations.txt). "
                "Pass download=True to fetch it."
            )
        super().__init__(root, split="val", transform=transform)


def _textures(root: Path, transform: Callable | None, download: bool) -> Dataset:
    # OpenOOD's Textures is all 5,640 DTD images: the three splits of partition 1.
    splits = ("train", "val", "test")
    return ConcatDataset(DTD(root, split=s, transform=transform, download=download) for s in splits)


#: Factories ``(root, transform, download) -> Dataset`` by the name used in metric keys.
OOD_DATASETS: dict[str, OODFactory] = {
    "CIFAR10": lambda root, t, d: CIFAR10(root, train=False, transform=t, download=d),
    "CIFAR100": lambda root, t, d: CIFAR100(root, train=False, transform=t, download=d),
    "TinyImageNet": lambda root, t, d: TinyImageNetVal(root, transform=t, download=d),
    "MNIST": lambda root, t, d: MNIST(root, train=False, transform=t, download=d),
    "SVHN": lambda root, t, d: SVHN(root, split="test", transform=t, download=d),
    "Textures": _textures,
    "Places365": lambda root, t, d: Places365(
        root, split="val", small=True, transform=t, download=d
    ),
    "SSB-hard": lambda root, t, d: OpenOODImageFolder(root, "ssb_hard", transform=t, download=d),
    "NINCO": lambda root, t, d: OpenOODImageFolder(root, "ninco", transform=t, download=d),
    "iNaturalist": lambda root, t, d: INaturalist(
        root, version="2021_valid", transform=t, download=d
    ),
    "OpenImage-O": lambda root, t, d: OpenImageO(root, transform=t, download=d),
}

#: Where each set lies under ``root`` (the path checked first) and its on-disk layout, as the
#: factories above read it; quoted in the error listing missing sets.
OOD_LAYOUTS: dict[str, tuple[str, str]] = {
    "CIFAR10": ("cifar-10-batches-py", "torchvision's python archive: test_batch, batches.meta"),
    "CIFAR100": ("cifar-100-python", "torchvision's python archive: test, meta, train"),
    "TinyImageNet": ("tiny-imagenet-200/val", "val_annotations.txt and images/<image>.JPEG"),
    "MNIST": ("MNIST/raw", "t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte"),
    "SVHN": ("test_32x32.mat", "the SVHN cropped-digits test file"),
    "Textures": ("dtd/dtd", "images/<class>/<image>.jpg and labels/{train,val,test}1.txt"),
    "Places365": (
        "val_256",
        (
            "val_256/<image>.jpg, with places365_val.txt and categories_places365.txt "
            "beside it in the root"
        ),
    ),
    "SSB-hard": ("ssb_hard", "<class>/<image> (OpenOOD's ssb_hard.zip)"),
    "NINCO": ("ninco", "<class>/<image> (OpenOOD's ninco.zip)"),
    "iNaturalist": ("2021_valid", "<category>/<image>.jpg (torchvision's 2021_valid.tgz)"),
    "OpenImage-O": ("openimage-o", "<folder>/<image>.jpg (TorchUncertainty's OpenImage-O.zip)"),
}

_FAR_SMALL = ("MNIST", "SVHN", "Textures", "Places365")

#: OpenOOD v1.5 near/far splits for each in-distribution dataset.
OPENOOD_SPLITS: dict[str, dict[str, tuple[str, ...]]] = {
    "CIFAR10": {"near": ("CIFAR100", "TinyImageNet"), "far": _FAR_SMALL},
    "CIFAR100": {"near": ("CIFAR10", "TinyImageNet"), "far": _FAR_SMALL},
    "ImageNet": {"near": ("SSB-hard", "NINCO"), "far": ("iNaturalist", "Textures", "OpenImage-O")},
}


def check_ood_groups(
    groups: Mapping[str, tuple[str, ...] | list[str]],
) -> dict[str, tuple[str, ...]]:
    """Validate ``{"near": [...], "far": [...]}`` against :data:`OOD_DATASETS`.

    Returns:
        The groups as tuples, empty groups dropped.

    Raises:
        ValueError: On a group other than near/far, an unknown set name, or no set at all.
    """
    unknown_groups = sorted(set(groups) - {"near", "far"})
    if unknown_groups:
        raise ValueError(f"Unknown OOD groups {unknown_groups}; valid groups: ['near', 'far'].")
    checked = {group: tuple(names) for group, names in groups.items() if names}
    for names in checked.values():
        unknown = [name for name in names if name not in OOD_DATASETS]
        if unknown:
            raise ValueError(
                f"Unknown OOD datasets {unknown}; valid names: {sorted(OOD_DATASETS)}."
            )
    if not checked:
        raise ValueError(f"No OOD set given in {dict(groups)}.")
    return checked


def build_ood_dataset(
    name: str, root: str | Path, transform: Callable | None = None, download: bool = False
) -> Dataset:
    """Build the OOD test set ``name`` (a key of :data:`OOD_DATASETS`) under ``root``.

    Raises:
        ValueError: If ``name`` is unknown.
    """
    if name not in OOD_DATASETS:
        raise ValueError(f"Unknown OOD dataset {name!r}; valid names: {sorted(OOD_DATASETS)}.")
    return OOD_DATASETS[name](Path(root), transform, download)
