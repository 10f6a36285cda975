"""Reading an export's files as untrusted data: only regular files inside the export folder, a
bounded ``config.json``, and safetensors headers read (and checked against the model to build)
before any tensor is allocated; a member file's record of the ensemble file it was cut from is
read from its header too, its values checked for their form.
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from torch import Tensor

__all__ = [
    "CONFIG_NAME",
    "FORMAT",
    "MAX_CONFIG_BYTES",
    "MAX_CONFIG_DEPTH",
    "MEMBER_FILE",
    "RECORD_KEY",
    "WEIGHTS_NAME",
    "check_finite",
    "check_fits_header",
    "export_file",
    "file_sha256",
    "member_record",
    "read_json",
    "record_metadata",
    "safetensors_header",
]

#: An export's files: its architecture, its weights, and the pattern of its members' weights.
CONFIG_NAME, WEIGHTS_NAME = "config.json", "ensemble.safetensors"
#: (ASCII digits only: ``\d`` would take a user's ``member_٣.safetensors`` for one.)
MEMBER_FILE = re.compile(r"member_([0-9]+)\.safetensors")
#: The keys of a member file's record (its safetensors metadata) of the export it was cut from:
#: the SHA-256 of that export's ``ensemble.safetensors`` (64 hex digits) and the member's index.
#: The member file's record of what it was cut from, one safetensors metadata entry (one key keeps
#: the header's bytes the same at every export: safetensors writes several keys in any order):
#: ``"<member index> sha256:<the ensemble file's SHA-256>"``.
RECORD_KEY = "signorm_member"
_RECORD = re.compile(r"(0|[1-9][0-9]{0,8}) sha256:([0-9a-f]{64})")
#: ``config.json``'s ``format``.
FORMAT = "torch-uncertainty-signorm/ensemble"
#: Bounds on ``config.json``: a real one holds a few kB, nested a few levels deep.
MAX_CONFIG_BYTES, MAX_CONFIG_DEPTH = 1 << 20, 32
#: safetensors' names of the torch dtypes.
_DTYPE_NAMES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


def export_file(directory: Path, name: str) -> Path:
    """``directory / name`` if it is a regular file inside ``directory``.

    A symbolic link leading out of the folder (to another export's weights), a hard link (a
    file with more than one name: where the others are cannot be told, so it is treated as a
    link out of the folder), a directory, a device or a pipe (which would block the reader) is
    refused.

    Raises:
        FileNotFoundError: If there is no such file.
        ValueError: Naming the file and what it is instead.
    """
    path = directory / name
    if not path.exists():
        raise FileNotFoundError(
            f"'{path}' does not exist: {directory} is no σN-Ens export (or an incomplete one)."
        )
    resolved, folder = path.resolve(), directory.resolve()
    if not resolved.is_relative_to(folder):
        raise ValueError(
            f"'{path}' leads out of the export folder (to '{resolved}'); an "
            f"export is read from its own files only."
        )
    status = resolved.stat()
    if not stat.S_ISREG(status.st_mode):
        raise ValueError(
            f"'{path}' is not a regular file (a directory, a device or a pipe); "
            f"an export holds regular files written by export_ensemble."
        )
    if status.st_nlink > 1:
        raise ValueError(
            f"'{path}' is a hard link ({status.st_nlink} names share its data, "
            f"e.g. another export's file); an export is read from its own files "
            f"only: copy the file into the folder (cp, not ln)."
        )
    return resolved


def _depth(value: Any) -> int:
    """Nesting depth of JSON data, counted without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        children = (
            node.values() if isinstance(node, Mapping) else node if isinstance(node, list) else ()
        )
        stack.extend((child, depth + 1) for child in children)
    return deepest


def read_json(path: Path) -> dict:
    """The JSON object in ``path`` (at most :data:`MAX_CONFIG_BYTES`, UTF-8, nested at most
    :data:`MAX_CONFIG_DEPTH` levels).

    Raises:
        ValueError: Naming the file and what is wrong with it.
    """
    from ..safety.files import read_regular

    try:  # opened once, as a regular file: no pipe swapped in after export_file's check
        data = read_regular(path, "config", MAX_CONFIG_BYTES, "the config.json of an export")
    except ValueError as error:
        raise ValueError(f"'{path}': {error}") from None
    try:
        config = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise ValueError(
            f"'{path}' is not UTF-8 text ({error}); expected the JSON written by export_ensemble."
        ) from None
    except json.JSONDecodeError as error:
        raise ValueError(
            f"'{path}' is not valid JSON ({error}); expected the JSON written by export_ensemble."
        ) from None
    except RecursionError:
        raise ValueError(
            f"'{path}' is nested too deeply to be read; an export's config is "
            f"nested at most {MAX_CONFIG_DEPTH} levels."
        ) from None
    except ValueError as error:  # an integer of thousands of digits
        raise ValueError(
            f"'{path}' could not be read ({error}); expected the JSON written by export_ensemble."
        ) from None
    if not isinstance(config, dict):
        raise ValueError(
            f"'{path}' holds a JSON {type(config).__name__}; expected an object "
            f"with 'format', 'num_estimators', 'model' and 'members'."
        )
    if _depth(config) > MAX_CONFIG_DEPTH:
        raise ValueError(
            f"'{path}' is nested more than {MAX_CONFIG_DEPTH} levels deep; an "
            f"export's config is nested a few levels."
        )
    return config


def _read_header(path: Path, read: Callable[[Any], Any]) -> Any:
    """``read(file)`` on the safetensors file ``path`` opened for its header alone (safetensors
    bounds the header's size and checks that the header and the file size agree)."""
    try:
        with safe_open(path, framework="pt") as file:
            return read(file)
    except Exception as error:
        raise ValueError(
            f"'{path}' is not a valid safetensors file ({type(error).__name__}: {error})."
        ) from None


def safetensors_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{name: (dtype, shape)}`` of every tensor of the safetensors file ``path``, read from
    its header alone."""
    return _read_header(
        path,
        lambda file: {
            key: (file.get_slice(key).get_dtype(), tuple(file.get_slice(key).get_shape()))
            for key in file.keys()  # noqa: SIM118 (safe_open is no mapping)
        },
    )


def file_sha256(path: Path) -> str:
    """The SHA-256 of the regular file ``path`` (hex), read in chunks (constant memory)."""
    from ..safety.files import open_regular

    digest = hashlib.sha256()
    with open_regular(path, "weights", "the safetensors file of an export") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def record_metadata(ensemble_sha256: str, member: int) -> dict[str, str]:
    """The safetensors metadata recording that a member file is member ``member`` of the
    ensemble file whose SHA-256 is ``ensemble_sha256`` (read back by :func:`member_record`)."""
    return {RECORD_KEY: f"{member} sha256:{ensemble_sha256}"}


def member_record(path: Path) -> tuple[str, int] | None:
    """``(ensemble SHA-256, member index)`` that the member file ``path`` records in its
    safetensors metadata (:func:`record_metadata`), or ``None`` for a member file written
    before members recorded their ensemble (release 0.1.0).

    Raises:
        ValueError: Naming the file, if the record is not of its form (a member index, then
            ``sha256:`` and 64 lowercase hex digits).
    """
    metadata = _read_header(path, lambda file: file.metadata()) or {}
    if RECORD_KEY not in metadata:
        return None
    value = metadata[RECORD_KEY]
    match = _RECORD.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(
            f"'{path}' records {RECORD_KEY}={value!r:.80} in its safetensors metadata; a "
            f"member file written by export_ensemble records its index and its ensemble file's "
            f"SHA-256 ('2 sha256:' and 64 hex digits). Export the members again (--members)."
        )
    return match.group(2), int(match.group(1))


def _first(items: list[str]) -> str:
    return ", ".join(items[:5]) + (f" (+{len(items) - 5} more)" if len(items) > 5 else "")


def check_fits_header(state: Mapping[str, Tensor], header: Mapping[str, tuple], path: Path) -> None:
    """Refuse a file whose tensors are not those of ``state`` (a model built on the meta device):
    an unexpected name, another shape or another dtype (no tensor is cast)."""
    unexpected = sorted(header.keys() - state.keys())
    mismatched = sorted(
        f"{key} {header[key][1]} {header[key][0]} != "
        f"{tuple(state[key].shape)} {_DTYPE_NAMES.get(state[key].dtype, state[key].dtype)}"
        for key in header.keys() & state.keys()
        if header[key] != (_DTYPE_NAMES.get(state[key].dtype), tuple(state[key].shape))
    )
    if unexpected or mismatched:
        problems = [
            f"{label}: {_first(items)}"
            for label, items in (
                ("unexpected", unexpected),
                ("shape or dtype mismatch", mismatched),
            )
            if items
        ]
        raise ValueError(
            f"'{path}' does not hold the model config.json describes: "
            + "; ".join(problems)
            + ". Nothing was built."
        )


def check_finite(state: Mapping[str, Tensor], path: Path) -> None:
    """Refuse weights holding NaN or infinite values, or a negative running variance, naming
    the first such tensor."""
    for key, tensor in state.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ValueError(
                f"'{path}' holds non-finite values (NaN or inf) in {key}; an "
                f"exported model's weights are finite."
            )
        if key.endswith("running_var") and tensor.is_floating_point() and bool((tensor < 0).any()):
            raise ValueError(
                f"'{path}' holds negative values in {key} (a normalization "
                f"layer's running variance, >= 0 in any trained model)."
            )
