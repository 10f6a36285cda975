"""Modules and names that moved stay importable at their old path for one minor release,
behind a ``FutureWarning`` naming the new path (as transformers and Lightning keep moved names).

An import of an old module path gives a module holding the new module's public names
(``__all__``): the same objects, so ``from torch_uncertainty_signorm.export import load_ensemble``
keeps working. A moved package maps its submodules too; a module whose names went to several
places maps to a tuple of new paths, and gives all their names. Nothing is imported until a user
imports an old path, so that the method never imports what it does not need; a new path that
cannot be imported (the lab distribution not installed) is an ``ImportError`` saying what to
install.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["MovedModules", "moved_names", "names_moved_from"]

#: Where the moved modules' distribution comes from, for the ImportError's advice.
_INSTALL = {"signorm_lab": "pip install signorm-lab (the lab, in the repository's lab/ folder)"}


def _import(new_path: str, old: str) -> ModuleType:
    try:
        return importlib.import_module(new_path)
    except ModuleNotFoundError as error:
        top = new_path.split(".")[0]
        if error.name is None or not error.name.startswith(top):
            raise
        advice = _INSTALL.get(top, f"install the distribution of {top}")
        raise ImportError(f"{old} moved to {new_path}, which is not installed: {advice}.") from None


def _warn(old: str, new: str, removed_in: str, stacklevel: int) -> None:
    warnings.warn(
        f"{old} moved to {new} and will be removed from torch-uncertainty-signorm in "
        f"{removed_in}: import it from {new} instead (the same object).",
        FutureWarning,
        stacklevel=stacklevel,
    )


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds each old module path of ``moved`` (old path → new path, or a tuple of new paths, all
    absolute), and every submodule of an old path moved whole, and loads it as the new modules'
    public names, warning once per import."""

    def __init__(self, moved: Mapping[str, str | tuple[str, ...]], removed_in: str) -> None:
        self.moved = dict(moved)
        self.removed_in = removed_in

    def new_paths(self, fullname: str) -> tuple[str, ...] | None:
        """The new paths of ``fullname`` (a moved module or a submodule of one), else ``None``."""
        if fullname in self.moved:
            new = self.moved[fullname]
            return (new,) if isinstance(new, str) else tuple(new)
        for old, new in self.moved.items():
            if isinstance(new, str) and fullname.startswith(old + "."):
                return (new + fullname[len(old) :],)
        return None

    def find_spec(self, fullname, path=None, target=None):
        if self.new_paths(fullname) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return None  # a plain module, filled by exec_module

    def exec_module(self, module: ModuleType) -> None:
        new_paths = self.new_paths(module.__name__)
        # the frames of Python's import system are skipped by warnings' own filtering
        _warn(module.__name__, " and ".join(new_paths), self.removed_in, stacklevel=3)
        module.__all__ = []
        for new_path in new_paths:
            new = _import(new_path, module.__name__)
            names = list(getattr(new, "__all__", ()))
            module.__all__ += names
            module.__dict__.update({name: getattr(new, name) for name in names})
        module.__path__ = []  # a package: its submodules are found by this finder too

    def install(self) -> None:
        """Put this finder on the import path once (a re-imported package adds no second)."""
        if not any(isinstance(f, MovedModules) and f.moved == self.moved for f in sys.meta_path):
            sys.meta_path.append(self)


def moved_names(
    package: str,
    moved: Mapping[str, str],
    removed_in: str,
    fallback: Callable[[str], Any],
) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) for ``package``: a name of ``moved`` (name →
    ``module.name`` of its new place) is imported from there with a ``FutureWarning``, the
    first time it is used; any other name goes to ``fallback`` (the package's own lazy
    ``__getattr__``)."""

    def __getattr__(name: str) -> Any:
        if name not in moved:
            return fallback(name)
        module, _, attribute = moved[name].rpartition(".")
        _warn(f"{package}.{name}", moved[name], removed_in, stacklevel=3)
        value = getattr(_import(module, f"{package}.{name}"), attribute)
        # kept: `from package import name` looks the name up twice, and warns once
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


def names_moved_from(package: str, moved: Mapping[str, str]) -> dict[str, str]:
    """The names of ``moved`` (old dotted path → new) that were ``package``'s own, by their name
    in it: what :func:`moved_names` takes."""
    return {
        old[len(package) + 1 :]: new
        for old, new in moved.items()
        if old.rpartition(".")[0] == package
    }
