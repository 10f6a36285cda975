"""Passing a constructor's arguments on by name once: a subclass keeps its explicit signature
(jsonargparse parses recipes from it) without writing every shared argument out again."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["arguments_for"]


def arguments_for(
    target: Callable, arguments: Mapping[str, Any], **overrides: Any
) -> dict[str, Any]:
    """The named parameters of ``target`` taken from ``arguments`` (a caller's ``locals()``),
    then ``overrides``.

    Raises:
        TypeError: If ``arguments`` lacks one of them, naming it.
    """
    names = [
        name
        for name, parameter in inspect.signature(target).parameters.items()
        if name != "self"
        and parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]
    missing = [name for name in names if name not in arguments and name not in overrides]
    if missing:
        raise TypeError(
            f"{getattr(target, '__qualname__', target)} needs {', '.join(missing)}, "
            f"which the caller's arguments lack."
        )
    return {name: arguments[name] for name in names if name not in overrides} | overrides
