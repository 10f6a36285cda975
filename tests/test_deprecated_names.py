"""Names moved since their last documented form keep working for one release (0.1.x), behind a
``FutureWarning`` naming the new one (as transformers and Lightning do): removed in 0.2.0."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import torch_uncertainty_signorm
from torch_uncertainty_signorm.signorm import optim as signorm_optim


def test_the_old_optim_module_warns_naming_the_new_one_and_gives_its_names(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch_uncertainty_signorm.optim", raising=False)
    with pytest.warns(
        FutureWarning,
        match=r"torch_uncertainty_signorm\.optim is deprecated .* "
        r"0\.2\.0: import from torch_uncertainty_signorm\.signorm\.optim",
    ) as caught:
        import torch_uncertainty_signorm.optim as old
    assert caught[0].filename == __file__  # the warning points at the user's import
    assert old.__all__ and all(
        getattr(old, name) is getattr(signorm_optim, name) for name in old.__all__
    )
    assert "signorm_optim_recipe" in old.__all__


def test_the_deprecations_end_after_this_release():
    """A 0.2 release removes them (torch_uncertainty_signorm/optim.py, export/__main__.py)."""
    assert torch_uncertainty_signorm.__version__.startswith("0.1.")


@pytest.mark.slow
def test_python_m_export_warns_naming_signorm_export_and_runs_it(tmp_path):
    env = {**os.environ, "PYTHONWARNINGS": ""}
    done = subprocess.run(
        [sys.executable, "-m", "torch_uncertainty_signorm.export", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: signorm-export ")  # the new command's own help
    assert "FutureWarning: `python -m torch_uncertainty_signorm.export` is deprecated" in (
        done.stderr
    )
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
