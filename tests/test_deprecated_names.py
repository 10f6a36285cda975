"""Old paths. What moved to the lab in 0.2.0 keeps its old import path for one minor release,
behind a ``FutureWarning`` naming the new one (the lab's lab/tests/test_deprecated_names.py);
without the lab, importing it is an ``ImportError`` that says what to install. What 0.1.0 marked
for removal in 0.2.0 is gone."""

from __future__ import annotations

import importlib
import re
import sys
import warnings

import pytest

import torch_uncertainty_signorm
from torch_uncertainty_signorm import MOVED_MODULES, MOVED_NAMES, MOVED_REMOVED_IN

INSTALL = "pip install signorm-lab"
#: The module paths deprecated in 0.1.0 (``MOVED_MODULES`` then) and removed in 0.2.0.
REMOVED_MODULES = (
    "optim",
    "diversity",
    "prediction",
    "backbones",
    "offline_assets",
    "transforms",
    "lr_schedulers",
    "stand_in_data",
)
#: The σN-Ens-named forms of ``members.distributed``'s names, removed in 0.2.0.
REMOVED_SYNC_NAMES = (
    "SigmaNormSyncBatchNorm",
    "convert_sync_signorm",
    "revert_sync_signorm",
    "signorm_sync_batchnorm_plugins",
)


@pytest.fixture
def without_the_lab(monkeypatch):
    """The lab cannot be imported, as where only the method is installed."""
    for name in [name for name in sys.modules if name.split(".")[0] == "signorm_lab"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "signorm_lab", None)


def _future_warnings(caught) -> list[str]:
    """The messages of the ``FutureWarning`` s caught, each pointing at this file (the user's
    import or attribute read)."""
    future = [w for w in caught if issubclass(w.category, FutureWarning)]
    assert all(w.filename == __file__ for w in future), [w.filename for w in future]
    return [str(w.message) for w in future]


@pytest.mark.parametrize(("old_path", "new_path"), sorted(MOVED_MODULES.items()))
def test_without_the_lab_a_moved_module_says_what_to_install(
    old_path, new_path, without_the_lab, monkeypatch
):
    monkeypatch.delitem(sys.modules, old_path, raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(
            ImportError,
            match=rf"^{re.escape(old_path)} moved to {re.escape(new_path)}, which is not "
            rf"installed: {INSTALL} ",
        ):
            __import__(old_path)
    warned = (
        f"{old_path} moved to {new_path} and will be removed from torch-uncertainty-signorm in "
        f"{MOVED_REMOVED_IN}: import it from {new_path} instead (the same object)."
    )
    assert _future_warnings(caught) == [warned]


@pytest.mark.parametrize(("old_name", "new_name"), sorted(MOVED_NAMES.items()))
def test_without_the_lab_a_moved_name_says_what_to_install(old_name, new_name, without_the_lab):
    package, _, name = old_name.rpartition(".")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ImportError, match=rf"^{re.escape(old_name)} moved to .*{INSTALL} "):
            getattr(importlib.import_module(package), name)
    assert len(_future_warnings(caught)) == 1 and new_name in _future_warnings(caught)[0]


def test_the_moves_end_after_this_release():
    """The next minor release removes the old paths (``MOVED_MODULES``, ``MOVED_NAMES``)."""
    version = tuple(int(part) for part in torch_uncertainty_signorm.__version__.split(".")[:2])
    assert version < tuple(int(part) for part in MOVED_REMOVED_IN.split(".")[:2])


@pytest.mark.parametrize("old", REMOVED_MODULES)
def test_the_paths_deprecated_in_0_1_are_gone(old):
    with pytest.raises(ModuleNotFoundError, match=rf"torch_uncertainty_signorm\.{old}"):
        importlib.import_module(f"torch_uncertainty_signorm.{old}")


@pytest.mark.parametrize("old", REMOVED_SYNC_NAMES)
def test_the_method_named_sync_names_are_gone(old):
    from torch_uncertainty_signorm.members import distributed

    with pytest.raises(AttributeError, match=f"has no attribute '{old}'"):
        getattr(distributed, old)
