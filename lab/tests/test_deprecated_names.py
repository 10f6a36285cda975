"""With the lab installed, what moved to it in 0.2.0 is importable at its old path for one minor
release, behind a ``FutureWarning`` naming the new one (as transformers and Lightning keep moved
names): the same objects (without the lab: the method's tests/test_deprecated_names.py)."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
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
    monkeypatch.delitem(sys.modules, old_path, raising=False)
    with pytest.warns(FutureWarning, match=_warning(old_path, new_path)) as caught:
        __import__(old_path)  # as `import old_path` does (importlib's frames are skipped)
    old, new = sys.modules[old_path], importlib.import_module(new_path)
    assert caught[0].filename == __file__  # the warning points at the user's import
    names = list(getattr(new, "__all__", ()))  # a folder of modules alone gives none
    assert old.__all__ == names  # every public name of the new module, the same objects
    assert all(getattr(old, name) is getattr(new, name) for name in names)


@pytest.mark.parametrize(("old_name", "new_name"), sorted(MOVED_NAMES.items()))
def test_a_moved_name_warns_naming_the_new_one_and_is_the_same_object(old_name, new_name):
    package, _, name = old_name.rpartition(".")
    module, _, attribute = new_name.rpartition(".")
    with pytest.warns(FutureWarning, match=_warning(old_name, new_name)) as caught:
        value = getattr(importlib.import_module(package), name)
    assert caught[0].filename == __file__
    assert value is getattr(importlib.import_module(module), attribute)


@pytest.mark.slow
def test_python_m_export_warns_naming_signorm_export_and_runs_it(tmp_path):
    env = {**os.environ, "PYTHONWARNINGS": ""}
    done = subprocess.run(
        [sys.executable, "-m", "signorm_lab.export", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: signorm-export ")  # the new command's own help
    assert "FutureWarning: `python -m signorm_lab.export` is deprecated" in done.stderr
    assert "run `signorm-export`" in done.stderr and "0.2.0" in done.stderr
