"""Swapping submodules through their parent: the one walk every wrapper's conversion and member
model uses."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

__all__ = ["replace_modules"]


def replace_modules(
    model: nn.Module, names: list[str], build: Callable[[nn.Module], nn.Module]
) -> dict[str, nn.Module]:
    """Replace, in place, each named submodule of ``model`` by ``build(submodule)``.

    The targets are collected first and each is replaced through its parent
    (:meth:`torch.nn.Module.set_submodule`), so nested modules, ``nn.Sequential``/
    ``nn.ModuleList`` children and a module registered under several names are all handled
    (a shared module is built once and stays shared). The wrappers' conversions and their
    member models all swap modules here.

    Returns:
        The new modules by their qualified name in ``model``.
    """
    targets = [(name, model.get_submodule(name)) for name in names]
    built: dict[int, nn.Module] = {}
    replaced: dict[str, nn.Module] = {}
    for name, module in targets:
        if id(module) not in built:
            built[id(module)] = build(module)
        model.set_submodule(name, built[id(module)])
        replaced[name] = built[id(module)]
    return replaced
