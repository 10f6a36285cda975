"""Load a single model's checkpoint into its backbone before σNorm conversion (FineTune)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor, nn

__all__ = ["load_backbone_checkpoint", "read_backbone_checkpoint"]

#: The attribute under which TorchUncertainty's routines hold their network.
_ROUTINE_PREFIX = "model."


def _read_state_dict(path: Path) -> Mapping[str, Tensor]:
    """Tensors of a Lightning ``.ckpt``, a torch state dict or a ``.safetensors`` file."""
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file

            state = load_file(path)
        else:
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:
        raise ValueError(
            f"checkpoint='{path}' could not be read ({type(error).__name__}: {error}); expected "
            f"a Lightning/TorchUncertainty .ckpt, a torch state dict or a .safetensors file."
        ) from error
    if isinstance(state, Mapping) and isinstance(state.get("state_dict"), Mapping):
        state = state["state_dict"]
    if not isinstance(state, Mapping) or not all(isinstance(v, Tensor) for v in state.values()):
        raise ValueError(f"checkpoint='{path}' holds no state dict of tensors.")
    return state


def read_backbone_checkpoint(model: nn.Module, checkpoint: str | Path) -> dict[str, Tensor]:
    """The state dict of ``checkpoint``, checked to fit ``model`` strictly; ``model`` is untouched.

    A routine's checkpoint (keys ``model.<name>``) loads into the bare network. Files load
    with ``weights_only=True``: no code in a checkpoint runs.

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: If it is unreadable, or its keys or shapes do not fit ``model``.
    """
    path = Path(checkpoint)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint='{path}' does not exist or is not a file.")
    state = dict(_read_state_dict(path))
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
            for label, items in (("missing", missing), ("unexpected", unexpected),
                                 ("shape mismatch", reshaped))
            if items
        ]
        raise ValueError(
            f"checkpoint='{path}' does not fit {type(model).__name__}: " + "; ".join(problems)
            + ". It must come from the same architecture (a single model of the recipe)."
        )
    return state


def load_backbone_checkpoint(model: nn.Module, checkpoint: str | Path) -> None:
    """Load ``checkpoint`` into ``model`` strictly, leaving ``model`` untouched on any mismatch.

    Raises:
        FileNotFoundError, ValueError: As :func:`read_backbone_checkpoint`.
    """
    model.load_state_dict(read_backbone_checkpoint(model, checkpoint))
