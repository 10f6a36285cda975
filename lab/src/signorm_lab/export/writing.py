"""Writing an export: safetensors weights and a JSON architecture, each file whole or not at all."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import save_model
from torch import nn

from torch_uncertainty_signorm.members.wrapper import MemberModel
from torch_uncertainty_signorm.signorm.ensemble import SigmaNormEnsemble

from ..safety.atomic_files import replaced_folder
from ..safety.export_spec import ENSEMBLE_CLASS_PATHS, check_ensemble_spec
from ..safety.files import file_kind, follow_umask
from .format import CONFIG_NAME, FORMAT, MEMBER_FILE, WEIGHTS_NAME, file_sha256, record_metadata
from .spec import as_data, portable

__all__ = ["export_ensemble", "member_model"]


def member_model(ensemble: SigmaNormEnsemble, member: int) -> MemberModel:
    """Member ``member`` of ``ensemble`` as a plain model (see
    :mod:`signorm_lab.export`): ``ensemble.member_model(member)``."""
    return ensemble.member_model(member)


def export_ensemble(
    model: SigmaNormEnsemble,
    spec: Mapping,
    directory: str | Path,
    members: bool = False,
    extra_class_paths: Iterable[str] = (),
    overwrite: bool = False,
) -> Path:
    """Write ``model`` to ``directory``: safetensors weights and a JSON architecture.

    The export is written whole or not at all: into a new folder beside ``directory``, which
    then takes its place in one swap (:func:`~signorm_lab.safety.atomic_files.
    replaced_folder`), so that an interrupted write never leaves a folder mixing two exports.

    Args:
        model: The trained ensemble.
        spec: The ``class_path``/``init_args`` block that built it (a recipe's
            ``routine.init_args.model``); stored architecture-only (no ``checkpoint``,
            ``pretrained_path`` or download, see :mod:`signorm_lab.export`; a FineTune
            ``finetune_ensemble`` block as ``signorm_ensemble`` with ``pretrained=True``),
            with the names of the regularized layers instead of the pattern that selected them.
        directory: Output directory (created).
        members: Also write every member as a plain model (:func:`member_model`), each file
            recording in its safetensors metadata the SHA-256 of the ``ensemble.safetensors``
            written beside it and its member index, which
            :func:`~signorm_lab.export.load_member` checks.
        extra_class_paths: Exact class paths trusted on top of
            :data:`~signorm_lab.export.EXPORTABLE_CLASS_PATHS` (loading will
            need them too).
        overwrite: Replace the export of a directory that is not empty (its other files are
            kept; members of the previous export not written again are gone); otherwise such
            a directory is an error (nothing is written).

    Returns:
        The directory.

    Raises:
        OSError: The export could not be written (a full disk, a folder not writable), on one
            line naming ``directory``; nothing was written there.
    """
    if not isinstance(model, SigmaNormEnsemble):
        raise TypeError(f"export_ensemble exports a SigmaNormEnsemble, got {type(model).__name__}.")
    check_ensemble_spec(spec, extra_class_paths)
    spec = portable(_with_settings(as_data(spec), model))
    spec["init_args"]["regularized_layers"] = list(model.regularized_layer_names)
    directory = output_directory(directory, overwrite)
    plain = [member_model(model, m) for m in range(model.num_estimators)] if members else []
    config = {
        "format": FORMAT,
        "version": 2,
        "num_estimators": model.num_estimators,
        "model": spec,
        "members": [f"member_{m}.safetensors" for m in range(len(plain))],
    }
    try:
        with replaced_folder(directory) as staging:  # the whole export replaced in one swap
            output_directory(directory, overwrite)  # still nothing special in it
            _keep_other_files(directory, staging)
            _save(model, staging / WEIGHTS_NAME)
            digest = file_sha256(staging / WEIGHTS_NAME)  # the members record their source
            for m, (name, module) in enumerate(zip(config["members"], plain, strict=True)):
                _save(module, staging / name, record_metadata(digest, m))
            (staging / CONFIG_NAME).write_text(json.dumps(config, indent=2))
    except FileExistsError:
        raise  # output_directory's: something was put there meanwhile
    except (OSError, SafetensorError) as error:
        raise _write_error(directory, error) from error
    return directory


#: What to do when writing failed, by the error's number (the disk full, or not writable).
_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def _write_error(directory: Path, error: BaseException) -> OSError:
    """A write of the export that failed, as one line naming the folder the user gave (not the
    temporary one beside it), what failed and what to do; its ``errno`` kept."""
    if isinstance(error, OSError):
        number, reason = error.errno, error.strerror or str(error)
    else:  # safetensors' own error wraps the OS error: "IoError(Os { code: 28, ... })"
        found = re.search(r"code: (\d+)", str(error))
        number = int(found.group(1)) if found else None
        reason = os.strerror(number) if number else " ".join(str(error).split())
    if number in _FULL:
        advice = "free space on its disk (or raise the file size limit), or give another folder"
    elif number in _NOT_WRITABLE:
        advice = (
            f"give a folder you may write to (the export is written beside it, in "
            f"'{directory.parent}', then takes its place)"
        )
    else:
        advice = "give another folder"
    failed = OSError(
        f"'{directory}': the export could not be written ({reason}); nothing was written "
        f"there and an earlier export in it is left as it was: {advice}."
    )
    failed.errno = number
    return failed


def _save(module: nn.Module, path: Path, metadata: dict[str, str] | None = None) -> None:
    save_model(module, str(path), metadata=metadata)
    follow_umask(path)  # safetensors writes 0600; config.json follows umask


def _with_settings(spec: dict, model: SigmaNormEnsemble) -> dict:
    """A σN-Ens block with the settings of ``model.config`` (:meth:`SigmaNormConfig.to_dict
    <torch_uncertainty_signorm.SigmaNormConfig.to_dict>`) as its keyword arguments, beside the
    backbone and ``num_estimators``; another class's block (``extra_class_paths``) as it is."""
    if spec["class_path"] not in ENSEMBLE_CLASS_PATHS:
        return spec
    settings = {**model.config.to_dict(), "tau": model.tau}  # the τ the run ended with
    kept = {
        key: value
        for key, value in spec["init_args"].items()
        if key not in settings and key != "config"
    }
    return {**spec, "init_args": {**kept, **settings}}


def output_directory(directory: str | Path, overwrite: bool) -> Path:
    """``directory``, refused when it cannot take an export whole: the working directory or a
    parent (``.``, ``..``: an export replaces its folder), a symbolic link, something else than
    a folder, a folder holding a file the export could not carry over (a named pipe, a
    device), or, unless ``overwrite``, a folder holding anything.

    Raises:
        ValueError: Naming ``directory``, what it is, and what is valid.
        FileExistsError: If it holds files and ``overwrite`` is false.
    """
    directory = Path(directory)
    valid = (
        "give the path of a new folder (e.g. 'export/'), or of an earlier export with --overwrite"
    )
    if directory.name in ("", ".", ".."):
        raise ValueError(
            f"'{directory}' is the working directory or a parent of it; an export "
            f"replaces its folder whole: {valid}."
        )
    if directory.is_symlink():
        raise ValueError(
            f"'{directory}' is a symbolic link; an export replaces its folder "
            f"whole, never a link's target: {valid}."
        )
    try:
        mode = directory.stat().st_mode
    except FileNotFoundError:
        return directory
    if not stat.S_ISDIR(mode):
        what = "a regular file" if stat.S_ISREG(mode) else file_kind(mode)
        raise ValueError(f"'{directory}' is {what}, not a folder; {valid}.")
    present = sorted(path.name for path in directory.iterdir())
    if not overwrite and present:
        raise FileExistsError(
            f"'{directory}' is not empty ({', '.join(present[:5])}"
            f"{', ...' if len(present) > 5 else ''}): nothing was written. Choose a new "
            f"directory, or pass overwrite=True (--overwrite) to replace its export."
        )
    for folder, _, names in os.walk(directory):  # kept files are carried into the new export
        for name in names:
            kept = Path(folder, name)
            mode = kept.lstat().st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                raise ValueError(
                    f"'{directory}' holds '{kept}', {file_kind(mode)}, which an "
                    f"export cannot carry over into the folder replacing it; "
                    f"remove it, or give the path of a new folder."
                )
    return directory


def _keep_other_files(directory: Path, staging: Path) -> None:
    """Carry the entries of ``directory`` that are not an export's files (a user's notes) into
    the folder replacing it: regular files by hard link (a copy across filesystems), links as
    links, folders copied."""
    if not directory.is_dir():
        return
    for entry in directory.iterdir():
        name = entry.name
        if name in (CONFIG_NAME, WEIGHTS_NAME) or MEMBER_FILE.fullmatch(name):
            continue
        if entry.is_symlink():
            os.symlink(os.readlink(entry), staging / name)
        elif entry.is_dir():
            shutil.copytree(entry, staging / name, symlinks=True)
        elif entry.is_file():
            try:
                os.link(entry, staging / name)
            except OSError:
                shutil.copy2(entry, staging / name)
