"""Modules that moved stay importable at their old path for one release, behind a
``FutureWarning`` naming the new path (as transformers and Lightning keep moved names).

An import of an old path gives a module holding the new module's public names (``__all__``):
the same objects, so ``from torch_uncertainty_signorm.diversity import signorm_cosine`` keeps
working. A module whose names went to several places maps to a tuple of new paths, and gives all
their names. Nothing is imported until a user imports an old path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Mapping
from types import ModuleType

__all__ = ["MovedModules"]


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds each old module path of ``moved`` (old path → new path, or a tuple of new paths,
    all absolute) and loads it as the new modules' public names, warning once per import."""

    def __init__(self, moved: Mapping[str, str | tuple[str, ...]], removed_in: str) -> None:
        self.moved = dict(moved)
        self.removed_in = removed_in

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.moved:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return None  # a plain module, filled by exec_module

    def exec_module(self, module: ModuleType) -> None:
        moved = self.moved[module.__name__]
        new_paths = (moved,) if isinstance(moved, str) else tuple(moved)
        warnings.warn(
            f"{module.__name__} is deprecated and will be removed in "
            f"torch-uncertainty-signorm {self.removed_in}: import from "
            f"{' or '.join(new_paths)} instead (the same names).",
            FutureWarning,
            stacklevel=2,  # the frames of Python's import system are skipped
        )
        module.__all__ = []
        for new_path in new_paths:
            new = importlib.import_module(new_path)
            module.__all__ += list(new.__all__)
            module.__dict__.update({name: getattr(new, name) for name in new.__all__})

    def install(self) -> None:
        """Put this finder on the import path once (a re-imported package adds no second)."""
        if not any(isinstance(f, MovedModules) and f.moved == self.moved for f in sys.meta_path):
            sys.meta_path.append(self)
