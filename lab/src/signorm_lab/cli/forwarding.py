"""Datamodule arguments the routine must match, copied from the ``data:`` block to the
``routine:`` block before either is built (:func:`forward_datamodule_args`)."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

from jsonargparse import Namespace
from lightning.pytorch.utilities.rank_zero import rank_zero_warn

from ..safety.allowlist import import_object

__all__ = ["FORWARDED_DATA_ARGS", "forward_datamodule_args"]

#: Datamodule arguments that decide which evaluation loaders exist, and that the routine must match.
FORWARDED_DATA_ARGS = ("eval_ood", "eval_shift", "num_tta")


def _init_args(block: Namespace | None) -> Namespace | None:
    """The arguments of a ``routine:``/``data:`` block, with or without ``class_path``."""
    if block is None:
        return None
    if isinstance(block, Namespace) and "class_path" in block:
        return block.get("init_args")
    return block


def _signature_default(class_path: str | None, name: str) -> Any:
    """The default of ``name`` in ``class_path``'s constructor, or ``inspect.Parameter.empty``."""
    if class_path is None:
        return inspect.Parameter.empty
    try:
        parameter = inspect.signature(import_object(class_path)).parameters.get(name)
    except (ImportError, AttributeError, TypeError, ValueError):
        return inspect.Parameter.empty
    return inspect.Parameter.empty if parameter is None else parameter.default


def forward_datamodule_args(
    config: Namespace, keys: Iterable[str] = FORWARDED_DATA_ARGS
) -> dict[str, Any]:
    """Copy the datamodule's ``keys`` into the routine's arguments, in place.

    The datamodule decides which test loaders exist (an OOD loader when ``eval_ood``, a shifted one
    when ``eval_shift``, ``num_tta`` views per image), and the routine must agree or its
    ``test_step`` misreads them, so the datamodule's value wins. A key is forwarded only when the
    datamodule defines it and the routine accepts it (jsonargparse lists every accepted argument,
    defaults included, in the parsed ``init_args``). Works with and without ``class_path`` blocks.

    Args:
        config: The parsed configuration of one subcommand (holding ``routine`` and ``data``).
        keys: The argument names to forward. Defaults to :data:`FORWARDED_DATA_ARGS`.

    Returns:
        The forwarded ``{name: value}``.
    """
    routine_block, data_block = config.get("routine"), config.get("data")
    routine_args, data_args = _init_args(routine_block), _init_args(data_block)
    if routine_args is None or data_args is None:
        return {}
    routine_class = routine_block.get("class_path") if "class_path" in routine_block else None

    forwarded = {}
    for key in keys:
        if key not in data_args or key not in routine_args:
            continue
        value, current = data_args[key], routine_args[key]
        default = _signature_default(routine_class, key)
        if current != value and default is not inspect.Parameter.empty and current != default:
            rank_zero_warn(
                f"routine {key}={current!r} replaced by the datamodule's {key}={value!r}: the "
                "datamodule decides which evaluation loaders exist. Set it under `data:` instead."
            )
        routine_args[key] = value
        forwarded[key] = value
    return forwarded
