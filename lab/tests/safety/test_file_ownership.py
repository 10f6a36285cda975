"""Every file the package writes or removes is one it created, for this command: temporary
names carry the process's token, only their creator removes them, an overwrite keeps the
folder's mode and refuses what it cannot carry over, and no writer goes through a link."""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from pathlib import Path

import pytest
import torch

from fixtures.backbones import tiny_signorm_spec
from signorm_lab.evaluation import append_to_last_row
from signorm_lab.export import build_model, export_ensemble, load_ensemble
from signorm_lab.safety.atomic_files import replaced_atomically, replaced_folder
from signorm_lab.safety.checkpoint_io import AtomicCheckpointIO

SPEC = tiny_signorm_spec(2, style="cifar")
PROFILE = b"export PATH=$HOME/bin:$PATH\n"


def _snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every entry under ``folder``: its content's hash (files) and its mode."""
    found = {}
    for path in sorted(folder.rglob("*")):
        status = path.lstat()
        digest = (
            hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(status.st_mode) else ""
        )
        found[str(path.relative_to(folder))] = (digest, stat.S_IMODE(status.st_mode))
    return found


def _users_look_alikes(folder: Path) -> None:
    """A user's backup named like an old temporary file, and a cache folder (with a file)
    named like an old temporary folder, both older than this process."""
    (folder / ".bashrc.20240101.old").write_bytes(PROFILE)
    cache = folder / ".cache.deadbeef.old"
    cache.mkdir()
    (cache / "keep.txt").write_bytes(PROFILE)
    for path in (folder / ".bashrc.20240101.old", cache / "keep.txt", cache):
        os.utime(path, (time.time() - 3600, time.time() - 3600))


def test_a_users_files_beside_an_export_are_never_removed(tmp_path):
    """The parent of ``--output`` is the user's: look-alikes of temporary names stay whole."""
    _users_look_alikes(tmp_path)
    before = _snapshot(tmp_path)
    out = export_ensemble(build_model(SPEC).eval(), SPEC, tmp_path / "out")
    export_ensemble(build_model(SPEC).eval(), SPEC, out, overwrite=True)
    after = {k: v for k, v in _snapshot(tmp_path).items() if not k.startswith("out")}
    assert after == before


def test_a_checkpoint_folder_keeps_a_users_look_alikes(tmp_path):
    _users_look_alikes(tmp_path)
    before = _snapshot(tmp_path)
    AtomicCheckpointIO().save_checkpoint({"state_dict": {}}, tmp_path / "last.ckpt")
    after = {k: v for k, v in _snapshot(tmp_path).items() if k != "last.ckpt"}
    assert after == before


def test_an_unrelated_folder_named_like_an_export_aside_is_not_moved_in(tmp_path):
    """``.out.<8 hex>.old/`` unpacked from an archive, no ``out``: the export is written fresh,
    the folder stays where it is, as it is."""
    aside = tmp_path / ".out.0123abcd.old"
    aside.mkdir()
    (aside / "payload.txt").write_text("not an export")
    os.utime(aside, (time.time() - 3600, time.time() - 3600))
    before = _snapshot(aside)
    export_ensemble(build_model(SPEC).eval(), SPEC, tmp_path / "out")
    assert not (tmp_path / "out" / "payload.txt").exists()
    assert _snapshot(aside) == before
    assert load_ensemble(tmp_path / "out").training is False


def test_an_overwrite_keeps_the_folders_mode(tmp_path):
    out = export_ensemble(build_model(SPEC).eval(), SPEC, tmp_path / "out")
    os.chmod(out, 0o700)
    export_ensemble(build_model(SPEC).eval(), SPEC, out, overwrite=True)
    assert stat.S_IMODE(out.stat().st_mode) == 0o700


def test_an_overwrite_refuses_a_folder_holding_a_named_pipe(tmp_path):
    out = export_ensemble(build_model(SPEC).eval(), SPEC, tmp_path / "out")
    os.mkfifo(out / "feed")
    before = _snapshot(tmp_path)
    with pytest.raises(
        ValueError,
        match=r"'.*out' holds '.*feed', a named pipe .FIFO., which an "
        r"export cannot carry over",
    ) as error:
        export_ensemble(build_model(SPEC).eval(), SPEC, out, overwrite=True)
    assert "\n" not in str(error.value)
    assert _snapshot(tmp_path) == before


def test_temporary_names_carry_the_process_token_and_only_theirs_are_removed(tmp_path):
    other = tmp_path / ".last.ckpt.4242-0123456789abcdef.partial"  # another process's
    other.write_bytes(b"x")
    with replaced_atomically(tmp_path / "last.ckpt") as partial:
        assert re.fullmatch(rf"\.last\.ckpt\.{os.getpid()}-[0-9a-f]{{16}}\.partial", partial.name)
        partial.write_bytes(b"y")
    with pytest.raises(RuntimeError), replaced_folder(tmp_path / "folder") as staging:
        assert re.fullmatch(rf"\.folder\.{os.getpid()}-[0-9a-f]{{16}}\.partial", staging.name)
        raise RuntimeError
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([other.name, "last.ckpt"])


def test_a_write_replaces_a_symbolic_link_never_the_file_it_leads_to(tmp_path):
    target = tmp_path / "profile"
    target.write_bytes(PROFILE)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "last.ckpt").symlink_to(target)
    AtomicCheckpointIO().save_checkpoint(
        {"state_dict": {"w": torch.zeros(1)}}, tmp_path / "run" / "last.ckpt"
    )
    assert target.read_bytes() == PROFILE
    assert not (tmp_path / "run" / "last.ckpt").is_symlink()


def test_a_hard_linked_results_table_is_not_rewritten(tmp_path):
    """A run's ``results.csv`` hard-linked to a file outside the run: left as it is."""
    outside = tmp_path / "elsewhere.csv"
    outside.write_text("test/cls/Acc\n0.9000\n")
    (tmp_path / "run").mkdir()
    os.link(outside, tmp_path / "run" / "results.csv")
    before = _snapshot(tmp_path)
    with pytest.warns(UserWarning, match="is a hard link"):
        append_to_last_row(
            tmp_path / "run" / "results.csv", {"test/div/jensen_gap": 0.5}, run_dir=tmp_path / "run"
        )
    assert _snapshot(tmp_path) == before
