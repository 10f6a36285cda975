"""``signorm-standin-data`` writes only its own files, whole, never through a link; a rerun
after a write cut off recognises its files; a run on stand-ins is told by its data, not only
by the marker file in its folder."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from fixtures.results_files import tu_metrics, write_run
from signorm_lab.cli.stand_in import main
from signorm_lab.datamodules.stand_in_data import (
    MANIFEST,
    is_stand_in_root,
    write_stand_in,
)
from signorm_lab.reproduction import regression

PROFILE = b"export PATH=$HOME/bin:$PATH\n"


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def test_a_listed_file_that_now_holds_something_else_is_not_rewritten(tmp_path):
    root = tmp_path / "standin"
    write_stand_in(root)
    (root / "cifar-100-python" / "test").write_bytes(PROFILE)  # the user's now
    before = _digest(tmp_path)
    with pytest.raises(
        FileExistsError,
        match=r"cifar-100-python/test exists and was not "
        r"written by signorm-standin-data",
    ):
        write_stand_in(root)
    assert _digest(tmp_path) == before


@pytest.mark.parametrize("where", ["file", "folder"])
def test_a_link_in_the_folder_is_never_written_through(where, tmp_path):
    root, outside = tmp_path / "standin", tmp_path / "outside"
    write_stand_in(root)
    outside.mkdir()
    (outside / "test").write_bytes(PROFILE)
    if where == "file":
        (root / "cifar-100-python" / "test").unlink()
        (root / "cifar-100-python" / "test").symlink_to(outside / "test")
    else:
        for path in (root / "cifar-100-python").iterdir():
            path.unlink()
        (root / "cifar-100-python").rmdir()
        (root / "cifar-100-python").symlink_to(outside)
    before = _digest(outside)
    with pytest.raises(FileExistsError, match="symbolic link"):
        write_stand_in(root)
    assert _digest(outside) == before


def test_a_hard_linked_file_is_not_replaced(tmp_path):
    root = tmp_path / "standin"
    write_stand_in(root)
    os.link(root / "test_32x32.mat", tmp_path / "mine.mat")
    with pytest.raises(FileExistsError, match="is a hard link"):
        write_stand_in(root)


def test_a_rerun_after_a_write_cut_off_before_the_manifest_recognises_its_files(tmp_path):
    root = tmp_path / "standin"
    write_stand_in(root)
    (root / MANIFEST).unlink()  # killed before the manifest was written (earlier releases)
    first = _digest(root)
    write_stand_in(root)
    assert _digest(root) == first | {MANIFEST: _digest(root)[MANIFEST]}


def test_the_command_refuses_on_one_line(tmp_path, capsys):
    (tmp_path / "file").write_bytes(PROFILE)
    assert main([str(tmp_path / "file")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("signorm-standin-data: error: ") and err.count("\n") == 1
    assert "usage" not in err and (tmp_path / "file").read_bytes() == PROFILE
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / MANIFEST).write_text("[")
    assert main([str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "is not a stand-in data manifest" in err and err.count("\n") == 1


def test_a_stand_in_run_without_its_marker_is_still_refused(tmp_path, capsys):
    """The run folder's STAND_IN_DATA.txt removed: its config.yaml's data root still holds
    the stand-ins, and the check refuses the run."""
    root = tmp_path / "standin"
    write_stand_in(root)
    assert is_stand_in_root(root) and not is_stand_in_root(tmp_path)
    run = write_run(
        tmp_path / "logs" / "version_0",
        tu_metrics(0.97, 0.1, 0.04),
        config={
            "seed_everything": 0,
            "data": {
                "class_path": "CIFAR10DataModule",
                "init_args": {"root": "standin", "batch_size": 16},
            },
        },
    )
    reference = tmp_path / "ref.csv"
    reference.write_text("method,Acc\nref,97.0\n")
    with pytest.raises(SystemExit) as exit_:
        regression.main([str(run.parent), "--reference", str(reference)])
    assert exit_.value.code == 2
    assert "used stand-in data" in capsys.readouterr().err
    assert yaml.safe_load((run / "config.yaml").read_text())["data"]["init_args"]["root"]


def test_the_run_label_records_the_data_and_never_writes_through_a_link(tmp_path):
    from types import SimpleNamespace

    from signorm_lab.cli.stand_in import stand_in_label
    from signorm_lab.datamodules.stand_in_data import RUN_LABEL

    root, run = tmp_path / "standin", tmp_path / "run"
    write_stand_in(root)
    run.mkdir()
    profile = tmp_path / "profile"
    profile.write_bytes(PROFILE)
    (run / RUN_LABEL).symlink_to(profile)
    trainer = SimpleNamespace(
        log_dir=str(run), logger=object(), is_global_zero=True, fast_dev_run=False
    )
    stand_in_label(root)._write(trainer)
    assert profile.read_bytes() == PROFILE and not (run / RUN_LABEL).is_symlink()
    manifest = json.loads((root / MANIFEST).read_text())
    label = (run / RUN_LABEL).read_text()
    assert all(f"{md5}  {name}" in label for name, md5 in manifest["files"].items())


def _leftover(root: Path, relative: str, data: bytes, pid: int = 2**22 + 1) -> Path:
    """The temporary file a write of ``relative`` cut off by SIGKILL leaves (pid: none alive;
    Linux's pid_max is at most 2**22)."""
    path = root / relative
    partial = path.with_name(f".{path.name}.{pid}-0123456789abcdef.partial")
    partial.write_bytes(data)
    return partial


@pytest.mark.parametrize(
    "relative", ["cifar-10-batches-py/data_batch_2", "test_32x32.mat", MANIFEST]
)
def test_a_rerun_after_a_sigkill_replaces_its_own_temporary_files(relative, tmp_path):
    root = tmp_path / "standin"
    write_stand_in(root)
    whole = _digest(root)
    data = (root / relative).read_bytes()
    (root / relative).unlink()  # killed before the rename
    partial = _leftover(root, relative, data[: len(data) // 2])
    assert main([str(root)]) == 0
    assert _digest(root) == whole and not partial.exists()


@pytest.mark.parametrize(
    ("pid", "data", "message"),
    [
        (2**22 + 1, PROFILE, "does not hold the start of cifar-10-batches-py/test_batch"),
        (os.getppid(), b"", r"is being written by process \d+"),
    ],
    ids=["not a stand-in's start", "a running process's"],
)
def test_a_temporary_file_it_cannot_tell_as_its_own_is_left_and_named(
    pid, data, message, tmp_path, capsys
):
    root = tmp_path / "standin"
    write_stand_in(root)
    partial = _leftover(root, "cifar-10-batches-py/test_batch", data, pid)
    before = _digest(tmp_path)
    assert main([str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(rf"{re.escape(str(partial))} .*{message}", err)
    assert _digest(tmp_path) == before
