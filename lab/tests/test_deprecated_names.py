"""With the lab installed, what moved to it in 0.2.0 is importable at its old path for one minor
release, behind a ``FutureWarning`` naming the new one (as transformers and Lightning keep moved
names): the same objects (without the lab: the method's tests/test_deprecated_names.py)."""

from __future__ import annotations

import importlib
import re
import sys

import pytest

from torch_uncertainty_signorm import MOVED_MODULES, MOVED_NAMES, MOVED_REMOVED_IN


def _warning(old: str, new: str) -> str:
    return (
        rf"^{re.escape(old)} moved to {re.escape(new)} and will be removed from "
        rf"torch-uncertainty-signorm in {re.escape(MOVED_REMOVED_IN)}: import it from "
        rf"{re.escape(new)} instead \(the same object\)\.$"
    )


@pytest.mark.parametrize(("old_path", "new_path"), sorted(MOVED_MODULES.items()))
def test_a_moved_module_warns_naming_the_new_one_and_gives_its_names(
    old_path, new_path, monkeypatch
):
    new_paths = (new_path,) if isinstance(new_path, str) else tuple(new_path)
    monkeypatch.delitem(sys.modules, old_path, raising=False)
    with pytest.warns(FutureWarning, match=_warning(old_path, " and ".join(new_paths))) as caught:
        __import__(old_path)  # as `import old_path` does (importlib's frames are skipped)
    assert caught[0].filename == __file__  # the warning points at the user's import
    old, names = sys.modules[old_path], []
    for path in new_paths:  # a folder of modules alone gives no name
        new = importlib.import_module(path)
        own = list(getattr(new, "__all__", ()))
        names += own
        assert all(getattr(old, name) is getattr(new, name) for name in own)
    assert old.__all__ == names  # every public name of the new modules, the same objects


@pytest.mark.parametrize(("old_name", "new_name"), sorted(MOVED_NAMES.items()))
def test_a_moved_name_warns_naming_the_new_one_and_is_the_same_object(old_name, new_name):
    package, _, name = old_name.rpartition(".")
    module, _, attribute = new_name.rpartition(".")
    with pytest.warns(FutureWarning, match=_warning(old_name, new_name)) as caught:
        value = getattr(importlib.import_module(package), name)
    assert caught[0].filename == __file__
    assert value is getattr(importlib.import_module(module), attribute)
