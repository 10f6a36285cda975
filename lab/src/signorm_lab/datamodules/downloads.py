"""A download that fails (offline, say) names the data set, the root and the files it needs.

TorchUncertainty's image datamodules (``CIFAR10DataModule``, ``CIFAR100DataModule``, ...)
download their torchvision data sets in ``prepare_data``; offline, that ends in urllib's
``URLError`` traceback, which names neither the data set nor where its files should be.
:func:`explain_download_failures` makes a datamodule's ``prepare_data`` raise one
:class:`FileNotFoundError` instead, listing each data set it prepares (the in-distribution set,
the OOD set with ``eval_ood``, the shifted set with ``eval_shift``), the files expected under its
``root``, which of them are missing, and where they are downloaded from.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any
from urllib.error import URLError

from lightning.pytorch import LightningDataModule

from .ood_datasets import OOD_LAYOUTS

__all__ = ["NETWORK_ERRORS", "expected_files", "explain_download_failures"]

#: What a download raises without network: urllib's, socket's and the OS's connection errors.
NETWORK_ERRORS = (URLError, ConnectionError, TimeoutError, socket.gaierror)


def expected_files(dataset_class: type) -> tuple[list[str], str | None]:
    """The files (relative to ``root``) a torchvision-style data set reads, and its URL.

    Read from the class's own attributes (torchvision's ``base_folder``, ``train_list``,
    ``test_list``, ``meta``, ``url``; SVHN's test ``split_list``), else from the layouts of the
    OOD sets this package knows; ``([], None)`` when neither says.
    """
    folder = getattr(dataset_class, "base_folder", None)
    listed = [*getattr(dataset_class, "train_list", []), *getattr(dataset_class, "test_list", [])]
    if folder and listed:
        names = [entry[0] for entry in listed]
        if isinstance(meta := getattr(dataset_class, "meta", None), dict) and "filename" in meta:
            names.append(meta["filename"])
        return [f"{folder}/{name}" for name in names], getattr(dataset_class, "url", None)
    if isinstance(splits := getattr(dataset_class, "split_list", None), dict) and "test" in splits:
        url, filename, *_ = splits["test"]
        return [filename], url
    if dataset_class.__name__ in OOD_LAYOUTS:
        path, layout = OOD_LAYOUTS[dataset_class.__name__]
        return [f"{path} ({layout})"], None
    return [], None


def _prepared_sets(datamodule: Any) -> list[tuple[str, type]]:
    """``(role, data set class)`` of each set the datamodule's ``prepare_data`` downloads."""
    sets = []
    for attribute, role, flag in (
        ("dataset", "in-distribution", None),
        ("ood_dataset", "OOD", "eval_ood"),
        ("shift_dataset", "shift", "eval_shift"),
    ):
        dataset_class = getattr(datamodule, attribute, None)
        if isinstance(dataset_class, type) and (flag is None or getattr(datamodule, flag, False)):
            sets.append((role, dataset_class))
    return sets


def _describe(root: Path, files: list[str]) -> str:
    """``root/folder/{a, b}`` for files sharing a folder, else the paths."""
    folders = {Path(f).parent for f in files}
    if len(files) > 1 and len(folders) == 1:
        return f"{root / folders.pop()}/{{{', '.join(Path(f).name for f in files)}}}"
    return ", ".join(str(root / f) for f in files)


def _explanation(datamodule: Any, error: BaseException) -> FileNotFoundError:
    root = Path(getattr(datamodule, "root", "."))
    lines = []
    for role, dataset_class in _prepared_sets(datamodule):
        files, url = expected_files(dataset_class)
        if not files:
            lines.append(
                f"  {dataset_class.__name__} ({role}): under {root} (see "
                f"{dataset_class.__module__}.{dataset_class.__name__})"
            )
            continue
        missing = [f for f in files if not (root / f.split(" (")[0]).exists()]
        state = (
            "missing"
            if len(missing) == len(files) == 1
            else "all missing"
            if len(missing) == len(files)
            else f"missing {', '.join(missing)}"
            if missing
            else "present"
        )
        lines.append(
            f"  {dataset_class.__name__} ({role}): {_describe(root, files)}: {state}"
            + (f"; downloaded from {url}" if url else "")
        )
    reason = str(error).splitlines()[0] if str(error) else ""
    return FileNotFoundError(
        f"{type(datamodule).__name__} could not download its data into root='{root}' "
        f"({type(error).__name__}: {reason}); the machine may be offline. Put the files under "
        f"the root (data.init_args.root), or run once with network access:\n" + "\n".join(lines)
    )


def explain_download_failures(datamodule: LightningDataModule) -> LightningDataModule:
    """Make ``datamodule.prepare_data`` turn a network failure into a :class:`FileNotFoundError`
    naming each data set it prepares, the ``root``, the expected files (those missing marked)
    and their URL. Other errors pass through unchanged. Returns the datamodule, changed in place.
    """
    prepare = datamodule.prepare_data

    def prepare_data(*args: Any, **kwargs: Any) -> None:
        try:
            prepare(*args, **kwargs)
        except NETWORK_ERRORS as error:
            raise _explanation(datamodule, error) from None

    datamodule.prepare_data = prepare_data
    return datamodule
