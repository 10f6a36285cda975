"""Names moved since their last documented form keep working for one release (0.1.x), behind a
``FutureWarning`` naming the new one (as transformers and Lightning do): removed in 0.2.0."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys

import pytest

import torch_uncertainty_signorm


@pytest.mark.parametrize(
    ("old_path", "new_path"), sorted(torch_uncertainty_signorm.MOVED_MODULES.items())
)
def test_a_moved_module_warns_naming_the_new_one_and_gives_its_names(
    old_path, new_path, monkeypatch
):
    new_paths = (new_path,) if isinstance(new_path, str) else new_path
    monkeypatch.delitem(sys.modules, old_path, raising=False)
    named = " or ".join(map(re.escape, new_paths))
    with pytest.warns(
        FutureWarning, match=rf"{re.escape(old_path)} is deprecated .* 0\.2\.0: import from {named}"
    ) as caught:
        __import__(old_path)  # as `import old_path` does (importlib's frames are skipped)
    old = sys.modules[old_path]
    assert caught[0].filename == __file__  # the warning points at the user's import
    names = 0
    for path in new_paths:  # every public name of each new module, the same objects
        new = importlib.import_module(path)
        assert all(getattr(old, name) is getattr(new, name) for name in new.__all__)
        names += len(new.__all__)
    assert len(old.__all__) == names


def test_the_deprecations_end_after_this_release():
    """A 0.2 release removes them (``MOVED_MODULES``, export/__main__.py)."""
    assert torch_uncertainty_signorm.__version__.startswith("0.1.")


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
    assert "FutureWarning: `python -m signorm_lab.export` is deprecated" in (done.stderr)
    assert "run `signorm-export`" in done.stderr and "0.2.0" in done.stderr


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("SigmaNormSyncBatchNorm", "MemberSyncBatchNorm"),
        ("convert_sync_signorm", "convert_sync_member_norms"),
        ("revert_sync_signorm", "revert_sync_member_norms"),
        ("signorm_sync_batchnorm_plugins", "member_sync_batchnorm_plugins"),
    ],
)
def test_the_method_neutral_sync_names_keep_their_old_names_for_a_release(old, new):
    from torch_uncertainty_signorm.members import distributed

    with pytest.warns(FutureWarning, match=rf"distributed\.{old} is deprecated .* 0\.2\.0: use "):
        aliased = getattr(distributed, old)
    assert aliased is getattr(distributed, new)
    with pytest.raises(AttributeError, match="has no attribute 'SigmaNormSync'"):
        distributed.SigmaNormSync  # noqa: B018
