"""Read checkpoints safely: a local file, no pickle code, whole and finite; and load a single
model's checkpoint into its backbone before σNorm conversion (FineTune)."""

from __future__ import annotations

import contextlib
import math
import re
import stat
import zipfile
from collections.abc import Iterator, Mapping
from numbers import Integral
from pathlib import Path
from typing import Any, BinaryIO

import torch
from torch import Tensor, nn

__all__ = [
    "backbone_state",
    "check_dtype_kinds",
    "check_lightning_checkpoint",
    "is_url",
    "load_backbone_checkpoint",
    "load_torch_file",
    "local_file",
    "opened_checkpoint",
    "read_backbone_checkpoint",
    "read_checkpoint",
    "read_state_file",
]

#: The attribute under which TorchUncertainty's routines hold their network.
_ROUTINE_PREFIX = "model."
#: ``scheme://``: a URL, which torch and Lightning would fetch (and cache) without our checks.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
#: A scheme without slashes, which fsspec also reads (``file:/path``, ``data:...;base64,...``,
#: Lightning's ``registry:name``); two letters at least, so a Windows drive (``C:``) is a path.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")


def is_url(path: str | Path) -> bool:
    """Whether ``path`` is a URL rather than a file on this machine: ``scheme://...``, or
    ``scheme:...`` where no such local file exists."""
    text = str(path)
    if text != text.strip() and text.strip() and not Path(text).exists():
        text = text.strip()  # fsspec strips it too: " http://..." is a URL
    return bool(_URL.match(text) or (_SCHEME.match(text) and not Path(text).exists()))


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [""])[0]


def local_file(path: str | Path, argument: str = "checkpoint") -> Path:
    """``path`` if it names an existing, non-empty regular file on this machine.

    Raises:
        ValueError: For a URL (``http://``, ``file://``, ``data:``...: download it and pass the
        file), a
            directory, device or pipe, or an empty file (a write cut off).
        FileNotFoundError: If nothing is there.
    """
    if is_url(path):
        raise ValueError(
            f"{argument}='{path}' is a URL: checkpoints are read from local files only, with "
            f"every check this package makes (a URL would be fetched and cached unchecked). "
            f"Download the file, make sure you trust its source, and pass its path."
        )
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{argument}='{path}' does not exist.")
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a device or a pipe)"
        raise ValueError(f"{argument}='{path}' is {kind}; expected a checkpoint file.")
    if path.stat().st_size == 0:
        raise ValueError(
            f"{argument}='{path}' is empty (0 bytes): its write was cut off. Use another "
            f"checkpoint of the run (e.g. last.ckpt), or run again."
        )
    return path


#: A compressed record of a checkpoint may inflate at most this much beyond its size on disk
#: (``torch.save`` stores records uncompressed; a record that inflates more is a zip bomb).
MAX_INFLATION, MAX_INFLATED_EXTRA = 16, 1 << 20


def _check_records(file: Any, where: str) -> None:
    """Refuse a zip checkpoint (``torch.save``'s format) whose compressed records would inflate
    beyond :data:`MAX_INFLATION` times their size on disk: torch would allocate and inflate each
    whole, whatever its declared size."""
    if not zipfile.is_zipfile(file):
        file.seek(0)
        return  # torch's legacy format: read as it is, with weights_only
    try:
        with zipfile.ZipFile(file) as archive:
            for info in archive.infolist():
                bound = info.compress_size * MAX_INFLATION + MAX_INFLATED_EXTRA
                if info.compress_type != zipfile.ZIP_STORED and info.file_size > bound:
                    raise ValueError(
                        f"{where}: record {info.filename!r} inflates from {info.compress_size} "
                        f"to {info.file_size} bytes (more than {MAX_INFLATION}x): torch.save "
                        f"stores records uncompressed, so this is no checkpoint it wrote."
                    )
    except zipfile.BadZipFile:
        pass  # torch says what is wrong with it
    file.seek(0)


def _load_open_file(file: BinaryIO, where: str, map_location: Any, weights_only: bool) -> Any:
    """``torch.load`` of the opened regular ``file``, its compressed records bounded."""
    _check_records(file, where)
    return torch.load(file, map_location=map_location, weights_only=weights_only)


def load_torch_file(
    path: str | Path,
    argument: str = "checkpoint",
    map_location: Any = "cpu",
    weights_only: bool = True,
) -> Any:
    """``torch.load`` of the local file ``path`` opened once as a regular file (a pipe or a
    device swapped in after an earlier check is refused at open, never read), its compressed
    records bounded (:data:`MAX_INFLATION`)."""
    from .files import open_regular

    with open_regular(path, argument, "a checkpoint file") as file:
        return _load_open_file(file, f"{argument}='{path}'", map_location, weights_only)


#: What :func:`read_checkpoint` expects, in its errors.
LIGHTNING_CHECKPOINT = "a Lightning checkpoint (.ckpt)"


@contextlib.contextmanager
def opened_checkpoint(
    path: str | Path, argument: str = "checkpoint", expected: str = LIGHTNING_CHECKPOINT
) -> Iterator[tuple[Any, BinaryIO]]:
    """The content of the local checkpoint file ``path`` (as :func:`read_checkpoint`) and the
    file it was read from, rewound: a second reader (Lightning's ``load_from_checkpoint``) reads
    the very file that was checked, not one put in its place since.

    Raises:
        ValueError, FileNotFoundError: As :func:`read_checkpoint`.
    """
    from .files import open_regular

    path = local_file(path, argument)
    with open_regular(path, argument, "a checkpoint file") as file:
        try:
            content = _load_open_file(file, f"{argument}='{path}'", "cpu", True)
        except ValueError as error:
            if str(error).startswith(f"{argument}='"):
                raise  # ours: names the file already
            raise ValueError(
                f"{argument}='{path}' could not be read ({type(error).__name__}: "
                f"{_first_line(error)}); expected {expected}."
            ) from error
        except Exception as error:  # truncated file, not a checkpoint, unsafe pickle content
            raise ValueError(
                f"{argument}='{path}' could not be read ({type(error).__name__}: "
                f"{_first_line(error)}); expected {expected}."
            ) from error
        file.seek(0)
        yield content, file


def read_checkpoint(
    path: str | Path, argument: str = "checkpoint", expected: str = LIGHTNING_CHECKPOINT
) -> Any:
    """The content of the local checkpoint file ``path``, read with ``weights_only=True``.

    Raises:
        ValueError, FileNotFoundError: As :func:`local_file`, or if torch cannot read it
            (truncated, not a checkpoint, pickled code), naming ``argument`` and the file.
    """
    with opened_checkpoint(path, argument, expected) as (content, _):
        return content


def check_lightning_checkpoint(
    checkpoint: Any, path: str | Path, argument: str = "ckpt_path"
) -> dict:
    """``checkpoint`` if it is a Lightning checkpoint worth loading: a dict whose
    ``state_dict`` holds finite tensors, whose ``hyper_parameters`` is a mapping, whose
    ``global_step`` and ``epoch`` are integers >= 0 and whose ``optimizer_states`` (if any) are
    finite.

    Raises:
        ValueError: Naming the file, the entry and what is valid.
    """
    where = f"{argument}='{path}'"
    if not isinstance(checkpoint, dict) or not isinstance(
        checkpoint.get("state_dict", {}), Mapping
    ):
        raise ValueError(
            f"{where} holds a {type(checkpoint).__name__}; expected a Lightning "
            f"checkpoint (.ckpt, a dict with a 'state_dict' mapping)."
        )
    hparams = checkpoint.get("hyper_parameters")
    if hparams is not None and not isinstance(hparams, Mapping):
        raise ValueError(
            f"{where} has hyper_parameters of type {type(hparams).__name__} "
            f"({hparams!r:.100}); expected a mapping of argument names to values."
        )
    for counter in ("global_step", "epoch"):
        value = checkpoint.get(counter, 0)
        if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
            raise ValueError(f"{where} has {counter}={value!r}; expected an integer >= 0.")
    for key, tensor in checkpoint.get("state_dict", {}).items():
        if (
            isinstance(tensor, Tensor)
            and tensor.is_floating_point()
            and not bool(torch.isfinite(tensor).all())
        ):
            raise ValueError(
                f"{where} holds non-finite values (NaN or inf) in state_dict['{key}']: the run "
                f"had diverged when it was saved. Use an earlier checkpoint of the run."
            )
        if (
            isinstance(tensor, Tensor)
            and str(key).endswith("running_var")
            and tensor.is_floating_point()
            and bool((tensor < 0).any())
        ):
            raise ValueError(
                f"{where} holds negative values in state_dict['{key}'] (a normalization "
                f"layer's running variance, >= 0 in any trained model): refused."
            )
    _check_optimizer_states(checkpoint.get("optimizer_states"), where)
    return checkpoint


def _check_optimizer_states(states: Any, where: str) -> None:
    """Refuse optimiser states (what ``fit --ckpt_path`` resumes) that are no list of state
    dicts, or that hold a non-finite tensor (a momentum buffer) or setting (a learning rate):
    resuming would train on NaN."""
    if states is None:
        return
    if not isinstance(states, list) or not all(isinstance(state, Mapping) for state in states):
        raise ValueError(
            f"{where} has optimizer_states of type {type(states).__name__} "
            f"({states!r:.100}); expected a list of optimizer state dicts."
        )
    for index, state in enumerate(states):
        entries = state.get("state") or {}
        for parameter, values in entries.items() if isinstance(entries, Mapping) else ():
            for name, value in values.items() if isinstance(values, Mapping) else ():
                if (
                    isinstance(value, Tensor)
                    and value.is_floating_point()
                    and not bool(torch.isfinite(value).all())
                ):
                    raise ValueError(
                        f"{where} holds non-finite values (NaN or inf) in "
                        f"optimizer_states[{index}]['state'][{parameter!r}]"
                        f"[{name!r}]: refused (resuming would train on them)."
                    )
        groups = state.get("param_groups") or []
        for group_index, group in enumerate(groups if isinstance(groups, list) else ()):
            for name, value in group.items() if isinstance(group, Mapping) else ():
                numbers = value if isinstance(value, (list, tuple)) else [value]
                if any(
                    isinstance(number, float) and not math.isfinite(number) for number in numbers
                ):
                    raise ValueError(
                        f"{where} has optimizer_states[{index}]['param_groups']"
                        f"[{group_index}][{name!r}]={value!r:.100}; expected a "
                        f"finite number (resuming would train with it)."
                    )


def read_state_file(path: Path) -> Any:
    """The content of a Lightning ``.ckpt``, a torch state dict or a ``.safetensors`` file (read
    once, ``weights_only=True``), for :func:`backbone_state`."""
    if path.suffix != ".safetensors":
        return read_checkpoint(
            path,
            expected="a Lightning/TorchUncertainty .ckpt, a torch state "
            "dict or a .safetensors file",
        )
    path = local_file(path)
    from safetensors.torch import load_file

    try:
        return load_file(path)
    except Exception as error:
        raise ValueError(
            f"checkpoint='{path}' could not be read ({type(error).__name__}: "
            f"{_first_line(error)}); expected a .safetensors file."
        ) from error


def backbone_state(model: nn.Module, content: Any, path: str | Path) -> dict[str, Tensor]:
    """The state dict in ``content`` (a checkpoint file read by :func:`read_state_file` or
    :func:`read_checkpoint`), checked to fit ``model`` strictly; ``model`` is untouched.

    A routine's checkpoint (keys ``model.<name>``) loads into the bare network.

    Raises:
        ValueError: If it holds no state dict of tensors, or its keys or shapes do not fit
            ``model``, naming the file ``path``.
    """
    state = content
    if isinstance(state, Mapping) and isinstance(state.get("state_dict"), Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping) or not all(isinstance(v, Tensor) for v in state.values()):
        raise ValueError(f"checkpoint='{path}' holds no state dict of tensors.")
    state = dict(state)
    expected = model.state_dict()
    if not any(key in expected for key in state) and all(
        key.startswith(_ROUTINE_PREFIX) for key in state
    ):
        state = {key.removeprefix(_ROUTINE_PREFIX): value for key, value in state.items()}
    missing = sorted(expected.keys() - state.keys())
    unexpected = sorted(state.keys() - expected.keys())
    reshaped = sorted(
        f"{key} {tuple(state[key].shape)} != {tuple(expected[key].shape)}"
        for key in expected.keys() & state.keys()
        if state[key].shape != expected[key].shape
    )
    if missing or unexpected or reshaped:

        def first(items: list[str]) -> str:
            return ", ".join(items[:5]) + (f" (+{len(items) - 5} more)" if len(items) > 5 else "")

        problems = [
            f"{label}: {first(items)}"
            for label, items in (
                ("missing", missing),
                ("unexpected", unexpected),
                ("shape mismatch", reshaped),
            )
            if items
        ]
        raise ValueError(
            f"checkpoint='{path}' does not fit {type(model).__name__}: "
            + "; ".join(problems)
            + ". It must come from the same architecture (a single model of the recipe)."
        )
    _check_values(state, expected, path)
    return state


def _kind(tensor: Tensor) -> str:
    return (
        "bool"
        if tensor.dtype == torch.bool
        else "floating"
        if tensor.is_floating_point()
        else "complex"
        if tensor.is_complex()
        else "integer"
    )


def check_dtype_kinds(state: Mapping[str, Any], expected: Mapping[str, Tensor], where: str) -> None:
    """Refuse the first tensor of ``state`` whose kind of dtype (floating, integer, bool,
    complex) is not that of the model's tensor of the same name (its parameters and buffers,
    ``expected``): loading would convert it silently (an int64 checkpoint tested as floats).
    Precisions of one kind pass (a ``bf16-true`` run's weights load into float32).

    Raises:
        ValueError: Naming ``where``, the first such entry, its dtype and the model's.
    """
    for key, tensor in state.items():
        if not isinstance(tensor, Tensor) or key not in expected:
            continue
        if _kind(tensor) != _kind(expected[key]):
            raise ValueError(
                f"{where} holds state_dict['{key}'] as {tensor.dtype}, where the model holds "
                f"{expected[key].dtype}: refused (a {_kind(expected[key])} tensor is valid; "
                f"the file was altered, or belongs to another model)."
            )


def _check_values(
    state: Mapping[str, Tensor], expected: Mapping[str, Tensor], path: str | Path
) -> None:
    """Refuse weights no trained model holds: another kind of dtype than the model's (integer or
    bool weights), NaN or infinity, a negative running variance."""
    check_dtype_kinds(state, expected, f"checkpoint='{path}'")
    for key, tensor in state.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise ValueError(
                f"checkpoint='{path}' holds non-finite values (NaN or inf) in "
                f"state_dict['{key}']: the run had diverged, or the file was altered; refused."
            )
        if key.endswith("running_var") and tensor.is_floating_point() and bool((tensor < 0).any()):
            raise ValueError(
                f"checkpoint='{path}' holds negative values in state_dict['{key}'] (a "
                f"normalization layer's running variance, >= 0 in any trained model): refused."
            )


def read_backbone_checkpoint(model: nn.Module, checkpoint: str | Path) -> dict[str, Tensor]:
    """The state dict of ``checkpoint``, checked to fit ``model`` strictly (:func:`backbone_state`);
    ``model`` is untouched. Files load with ``weights_only=True``: no code in a checkpoint runs.

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: If it is unreadable, or its keys or shapes do not fit ``model``.
    """
    if not is_url(checkpoint) and not Path(checkpoint).exists():
        raise FileNotFoundError(f"checkpoint='{checkpoint}' does not exist or is not a file.")
    path = local_file(checkpoint)  # a URL, a directory, a device or a pipe: one line naming it
    return backbone_state(model, read_state_file(path), path)


def load_backbone_checkpoint(model: nn.Module, checkpoint: str | Path) -> None:
    """Load ``checkpoint`` into ``model`` strictly, leaving ``model`` untouched on any mismatch.

    Raises:
        FileNotFoundError, ValueError: As :func:`read_backbone_checkpoint`.
    """
    model.load_state_dict(read_backbone_checkpoint(model, checkpoint))
