"""What a checkpoint's saved routine arguments may set: the values ``--ckpt_path`` takes where
the recipe leaves an argument unset, checked before the command's parser reads them (it imports
what it reads) and again on what it parsed.

Which values are taken is the command's decision
(:func:`~signorm_lab.cli.ckpt_path_args.reconcile_checkpoint_args`); this module
says which of them are safe to take: none that reads or fetches weights or files, no number
that is not finite, no class outside the allow-list, no string the parser would read as a
class, no layer-selection pattern that could take exponential time to match.
"""

from __future__ import annotations

import math
from typing import Any

from .allowlist import argument_type, check_class_paths, check_class_strings, check_parsed
from .patterns import check_selection_patterns

__all__ = ["check_parsed_arguments", "check_taken_arguments"]

#: ``pretrained`` of σN-Ens (its settings included) is a layout flag: the conversion of a
#: pretrained backbone, which fetches nothing (``model_registry``'s ``layout_flags``).
_LAYOUT_FLAGS = frozenset(
    {
        "model.init_args.pretrained",
        "model.init_args.config.pretrained",
        "model.init_args.config.init_args.pretrained",
    }
)


def check_taken_arguments(
    ckpt_path: Any, taken: dict[str, Any], routine_class: str, current_args: dict[str, Any]
) -> dict[str, Any]:
    """Refuse a value of ``taken`` (``{dotted key: saved value}``, the checkpoint's values the
    recipe leaves unset) that is not safe to take, before anything is parsed or imported.

    Args:
        ckpt_path: The checkpoint, in error messages.
        taken: The values to take, by dotted key of the routine's ``init_args``.
        routine_class: The recipe's routine class path (already imported by the parser).
        current_args: The routine's ``init_args`` as parsed from the recipe, which tell the
            nested blocks' classes.

    Returns:
        ``taken`` as the nested ``init_args`` tree to parse.

    Raises:
        ValueError: Naming the checkpoint, the key, the value and what is valid.
    """
    for key, saved in taken.items():
        _check_value(ckpt_path, f"routine.init_args.{key}", saved)
    tree, where = _nested(taken), f"ckpt_path='{ckpt_path}': routine.init_args"
    check_class_paths(tree, where=where)
    check_selection_patterns(tree, where)
    for key, saved in taken.items():
        check_class_strings(
            saved, argument_type(routine_class, key, current_args), f"{where}.{key}"
        )
    return tree


def check_parsed_arguments(ckpt_path: Any, taken: dict[str, Any], parsed: dict[str, Any]) -> None:
    """After parsing, before building: each taken value was read as given, no string became a
    class block, and every class is allowed
    (:func:`~signorm_lab.safety.allowlist.check_parsed`)."""
    where = f"ckpt_path='{ckpt_path}': routine.init_args"
    for key, saved in taken.items():
        check_parsed(saved, _value_at(parsed, key), f"{where}.{key}")


def _check_value(ckpt_path: Any, where: str, saved: Any) -> None:
    """Refuse a checkpoint value that would fetch or read weights or files (an argument of
    :data:`~signorm_lab.safety.model_registry.FETCHING_ARGUMENTS` set to anything
    but ``None``/``False``: a checkpoint never chooses what is read, fetched or where a download
    cache is written) or that is not a finite number (NaN, inf)."""
    from .model_registry import fetching_arguments

    key = where.removeprefix("routine.init_args.")
    if (
        key.rpartition(".")[2] in fetching_arguments()
        and key not in _LAYOUT_FLAGS
        and saved not in (None, False)
    ):
        raise ValueError(
            f"ckpt_path='{ckpt_path}' sets {where}={saved!r:.200}, which the recipe leaves "
            f"unset: an argument that reads or fetches weights or files "
            f"(signorm_lab.safety.model_registry.FETCHING_ARGUMENTS) is never taken "
            f"from a checkpoint; set it in the recipe or on the command line if you mean it."
        )
    if _non_finite(saved):
        raise ValueError(
            f"ckpt_path='{ckpt_path}' sets {where}={saved!r:.200}, which the recipe leaves "
            f"unset: a value taken from a checkpoint must be a finite number (no NaN or inf)."
        )


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_non_finite(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_non_finite(item) for item in value)
    return False


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` -> ``{"a": {"b": 1}}``."""
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = tree
        for parent in parents:
            node = node.setdefault(parent, {})
        node[leaf] = value
    return tree


def _value_at(tree: dict[str, Any], key: str) -> Any:
    """The value of the dotted ``key`` in ``tree``."""
    for part in key.split("."):
        tree = tree.get(part) if isinstance(tree, dict) else None
    return tree
