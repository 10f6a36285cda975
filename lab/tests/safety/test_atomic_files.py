"""A file is whole or absent: written beside its destination, flushed, then renamed; a write cut
off (an error, SIGKILL) leaves the destination as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from signorm_lab.safety.atomic_files import replaced_atomically
from signorm_lab.safety.checkpoint_io import AtomicCheckpointIO


def test_an_error_mid_write_leaves_the_old_file_and_no_partial_one(tmp_path):
    path = tmp_path / "best.ckpt"
    path.write_bytes(b"the previous checkpoint")
    with pytest.raises(OSError, match="No space left"), replaced_atomically(path) as partial:
        partial.write_bytes(b"half a checkpoi")
        raise OSError(28, "No space left on device")
    assert path.read_bytes() == b"the previous checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.ckpt"]


def test_a_killed_writer_never_leaves_a_truncated_file_at_the_final_name(tmp_path):
    """SIGKILL while the checkpoint is being written (what a scheduler does after SIGTERM):
    the final name does not exist; only the unfinished temporary file does."""
    ready = tmp_path / "writing"
    child = os.fork()
    if child == 0:  # the writer: never returns into pytest
        try:
            with (
                replaced_atomically(tmp_path / "interrupted.ckpt") as partial,
                partial.open("wb") as file,
            ):
                file.write(b"x" * 1_000_000)
                file.flush()
                ready.touch()
                time.sleep(60)
        finally:
            os._exit(0)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ready.exists()
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    assert not (tmp_path / "interrupted.ckpt").exists()
    assert [p.name for p in tmp_path.glob(".interrupted.ckpt.*.partial")]  # it was being written


def test_the_checkpoint_io_writes_a_loadable_checkpoint_atomically(tmp_path, monkeypatch):
    io = AtomicCheckpointIO()
    state = {"state_dict": {"w": torch.ones(2)}, "global_step": 3}
    io.save_checkpoint(state, tmp_path / "run" / "last.ckpt")
    assert torch.load(tmp_path / "run" / "last.ckpt", weights_only=True)["global_step"] == 3

    def cut_off(self, data):  # the disk fills up after a few bytes
        with open(self, "wb") as handle:
            handle.write(bytes(data)[:10])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", cut_off)
    with pytest.raises(OSError, match="No space left"):
        io.save_checkpoint(state, tmp_path / "run" / "best.ckpt")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["last.ckpt"]


def test_the_file_helpers_load_without_torch():
    """The results commands write files through these helpers: importing them costs no torch or
    Lightning (seconds of every ``signorm-results-table`` start)."""
    probe = (
        "import sys; import signorm_lab.safety.atomic_files; "
        "print(sorted({'torch', 'lightning'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
