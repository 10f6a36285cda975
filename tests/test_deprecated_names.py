"""Old paths. What moved since 0.1.0 (to the lab in 0.2.0, or inside the method before) keeps its
old import path for one minor release, behind a ``FutureWarning`` naming the new one (the lab's
lab/tests/test_deprecated_names.py checks the objects); where the new path is the lab's and the lab
is not installed, importing it is an ``ImportError`` that says what to install. What 0.1.0 itself
marked deprecated for removal in 0.2.0 is gone."""

from __future__ import annotations

import importlib
import re
import sys
import warnings

import pytest

import torch_uncertainty_signorm
from torch_uncertainty_signorm import MOVED_MODULES, MOVED_NAMES, MOVED_REMOVED_IN

INSTALL = "pip install signorm-lab"
#: The module path 0.1.0 deprecated (its CHANGELOG's "Deprecated": removed in 0.2.0).
REMOVED_MODULES = ("optim",)
#: The σN-Ens-named forms of ``members.distributed``'s names (renamed after 0.1.0), with the
#: names they warn about.
RENAMED_SYNC_NAMES = {
    "SigmaNormSyncBatchNorm": "MemberSyncBatchNorm",
    "convert_sync_signorm": "convert_sync_member_norms",
    "revert_sync_signorm": "revert_sync_member_norms",
    "signorm_sync_batchnorm_plugins": "member_sync_batchnorm_plugins",
}
#: Module paths of 0.1.0 whose new place is the method's own: they import without the lab.
WITHIN_THE_METHOD = {
    f"torch_uncertainty_signorm.{old}": f"torch_uncertainty_signorm.{new}"
    for old, new in (
        ("diversity", "evaluation.diversity"),
        ("prediction", "evaluation.prediction"),
        ("lr_schedulers", "optim_recipes"),
    )
}


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


@pytest.mark.parametrize(
    ("old_path", "new_path"),
    sorted((old, new) for old, new in MOVED_MODULES.items() if old not in WITHIN_THE_METHOD),
)
def test_without_the_lab_a_moved_module_says_what_to_install(
    old_path, new_path, without_the_lab, monkeypatch
):
    monkeypatch.delitem(sys.modules, old_path, raising=False)
    first = new_path if isinstance(new_path, str) else new_path[0]
    named = new_path if isinstance(new_path, str) else " and ".join(new_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(
            ImportError,
            match=rf"^{re.escape(old_path)} moved to {re.escape(first)}, which is not "
            rf"installed: {INSTALL} ",
        ):
            __import__(old_path)
    warned = (
        f"{old_path} moved to {named} and will be removed from torch-uncertainty-signorm in "
        f"{MOVED_REMOVED_IN}: import it from {named} instead (the same object)."
    )
    assert _future_warnings(caught) == [warned]


@pytest.mark.parametrize(("old_path", "new_path"), sorted(WITHIN_THE_METHOD.items()))
def test_a_module_moved_within_the_method_warns_and_gives_the_same_names(
    old_path, new_path, without_the_lab, monkeypatch
):
    monkeypatch.delitem(sys.modules, old_path, raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        __import__(old_path)  # as a user's import statement
    old, new = sys.modules[old_path], importlib.import_module(new_path)
    assert old.__all__ == new.__all__
    assert all(getattr(old, name) is getattr(new, name) for name in new.__all__)
    assert [f"{old_path} moved to {new_path} " in m for m in _future_warnings(caught)] == [True]


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


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED_SYNC_NAMES.items()))
def test_the_method_named_sync_names_warn_until_the_next_minor_release(old, new):
    from torch_uncertainty_signorm.members import distributed

    with pytest.warns(FutureWarning, match=r"removed in torch-uncertainty-signorm 0\.3\.0: use "):
        assert getattr(distributed, old) is getattr(distributed, new)
