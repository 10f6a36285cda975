"""The user's files through ``torch-uncertainty fit``: a resume never deletes the user's copy of a
checkpoint (even on read-only storage), continuing from a best checkpoint never rewrites the old
run, and a checkpoint on a full disk is whole or absent, with the disk error reported.

Real runs of the command, a real SIGTERM, real filesystems: ``tmpfs`` mounts (read-only, or of
2 MB) where the machine allows them (root, or for the 2 MB one a user mount namespace), else the
test says why it is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from journey_commands import EXPERIMENTS, best_checkpoint, failure, only, tiny_args

from fixtures.cifar_files import run_command

RECIPE = EXPERIMENTS / "resnet18_c10_signorm.yaml"


def _digest(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _interrupt(hook: str, batch: int, epoch: int | None = 0) -> str:
    init_args = {"hook": hook, "epoch": epoch, "batch": batch, "action": "SIGTERM"}
    return "--trainer.callbacks+=" + json.dumps(
        {"class_path": "interrupt_points.InterruptAt", "init_args": init_args}
    )


@pytest.fixture
def env(command_env):
    helpers = str(Path(__file__).parent)
    return {**command_env, "PYTHONPATH": os.pathsep.join([helpers, command_env["PYTHONPATH"]])}


def _mount_tmpfs(path: Path, size: str) -> None:
    """Mount a tmpfs of ``size`` at ``path``, or skip the test saying why."""
    path.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"this machine does not allow a tmpfs mount ({done.stderr.strip()})")


@pytest.fixture
def tmpfs(tmp_path):
    """``mount(name, size)``: a tmpfs under ``tmp_path``, unmounted after the test."""
    mounted = []

    def mount(name: str, size: str) -> Path:
        _mount_tmpfs(tmp_path / name, size)
        mounted.append(tmp_path / name)
        return tmp_path / name

    yield mount
    for path in mounted:
        subprocess.run(["umount", str(path)], check=False)


@pytest.mark.slow
def test_resuming_from_a_read_only_copy_keeps_it_and_finishes(
    signorm_run, cifar_root, env, tmp_path, tmpfs
):
    """The interruption checkpoint of a run, kept by the user on read-only storage: the resumed
    run neither deletes it nor fails on it; it tests, writes results.csv, and leaves no new
    interruption checkpoint."""
    logs = shutil.copytree(signorm_run.log_dir, tmp_path / "logs")
    # The shared run's epoch-end checkpoint as ExactResumeCheckpoint writes it on a SIGTERM there
    # (the "between-epochs" point of test_interrupt_resume.py): marked as an interruption.
    checkpoint = torch.load(best_checkpoint(logs), weights_only=True)
    checkpoint["callbacks"]["ExactResumeCheckpoint"]["interrupted"] = True
    backup = tmpfs("backup", "64M") / "interrupted.ckpt"
    torch.save(checkpoint, backup)
    subprocess.run(["mount", "-o", "remount,ro", str(backup.parent)], check=True)
    kept, before = backup.read_bytes(), _digest(logs)

    done = run_command(
        [
            "fit",
            "--config",
            RECIPE,
            *tiny_args(cifar_root, logs),
            "--trainer.max_epochs=2",
            "--ckpt_path",
            backup,
        ],
        cwd=tmp_path,
        env=env,
    )

    assert done.returncode == 0, failure(done)
    assert backup.read_bytes() == kept  # the user's copy
    resumed = only(logs.glob("*/version_1"), "resumed run")  # no run's folder: a new version
    assert (resumed / "results.csv").is_file()
    assert not list(resumed.rglob("interrupted*.ckpt"))
    assert {k: v for k, v in _digest(logs).items() if "version_1" not in k} == before


@pytest.mark.slow
def test_continuing_from_a_best_checkpoint_leaves_the_old_run_as_it_was(
    signorm_run, cifar_root, env, tmp_path
):
    """``fit --ckpt_path <version_0's best> --trainer.max_epochs=2`` logs into a new version; a
    SIGTERM during its final test says how to test the finished run's best checkpoint."""
    logs = shutil.copytree(signorm_run.log_dir, tmp_path / "logs")
    old_run = only(logs.glob("*/version_0"), "first run")
    before = _digest(old_run)
    done = run_command(
        [
            "fit",
            "--config",
            RECIPE,
            *tiny_args(cifar_root, logs),
            "--trainer.max_epochs=2",
            "--ckpt_path",
            best_checkpoint(old_run),
            _interrupt("on_test_batch_start", 1, epoch=None),
        ],
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 143, failure(done)
    assert _digest(old_run) == before
    new_run = old_run.with_name("version_1")
    best = best_checkpoint(new_run)
    assert "interrupted while testing after fit: training had finished" in done.stderr
    assert f"completing its record) with: torch-uncertainty test --config {RECIPE}" in (done.stderr)
    ending = f"--trainer.logger.init_args.version=1 --ckpt_path {best}"
    assert done.stderr.rstrip().endswith(ending) or f"{ending}\n" in done.stderr, done.stderr[
        -2000:
    ]
    assert "run the same command again" not in done.stderr


def _fit_with_logs_on_a_small_tmpfs(
    args: list[str], logs: Path, size: str, left: Path, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess:
    """``torch-uncertainty fit args`` with ``logs`` a fresh tmpfs of ``size``; what the run left
    there is copied to ``left`` before the tmpfs goes. As root the tmpfs is mounted here and
    unmounted after; otherwise the command runs in a user and mount namespace of its own
    (``unshare -rm``); where neither is allowed the test is skipped, saying why."""
    command = [str(Path(sys.executable).parent / "torch-uncertainty"), *map(str, args)]
    if os.geteuid() == 0:
        _mount_tmpfs(logs, size)
        try:
            done = subprocess.run(
                command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
            )
            shutil.copytree(logs, left, symlinks=True)
        finally:
            subprocess.run(["umount", str(logs)], check=False)
        return done
    if shutil.which("unshare") is None:
        pytest.skip("not root, and no unshare command for a user mount namespace: no tmpfs")
    logs.mkdir(parents=True)
    script = (
        'mount -t tmpfs -o size="$1" tmpfs "$2" || exit 97\n'
        'logs="$2"; left="$3"; shift 3\n'
        '"$@"; status=$?\n'
        'mkdir -p "$left" && cp -a "$logs"/. "$left"/\n'
        "exit $status\n"
    )
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", size, str(logs), str(left), *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode == 97 or (done.returncode != 0 and "unshare:" in done.stderr):
        pytest.skip(
            f"this machine allows no tmpfs mount, as root or in a user namespace "
            f"({done.stderr.strip()[-300:]})"
        )
    return done


@pytest.mark.slow
def test_a_full_disk_leaves_whole_checkpoints_and_reports_the_disk_error(cifar_root, env, tmp_path):
    """Logs on a 2 MB tmpfs, where the run's first checkpoint (1.5 MB) fits and the next does
    not: the command fails with the disk's error (ENOSPC), which the interruption handler, failing
    on the same full disk, reports beside it and does not replace; the checkpoint that did not
    fit is absent, not truncated at its final name, no 0-byte ``interrupted.ckpt`` and no
    partial file is left, and every checkpoint there loads."""
    logs, left = tmp_path / "full", tmp_path / "left"
    done = _fit_with_logs_on_a_small_tmpfs(
        ["fit", "--config", RECIPE, *tiny_args(cifar_root, logs), "--eval_after_fit=false"],
        logs,
        "2M",
        left,
        cwd=tmp_path,
        env=env,
    )

    assert done.returncode == 1, failure(done)
    assert "save_checkpoint" in done.stderr, failure(done)  # a checkpoint hit the full disk
    assert done.stderr.rstrip().splitlines()[-1] == (
        "OSError: [Errno 28] No space left on device"
    ), failure(done)  # the error it ends with
    assert "During handling of the above exception, another exception occurred" not in (
        done.stderr
    ), failure(done)
    assert done.stderr.count("Traceback (most recent call last)") == 1, failure(done)
    assert "the interruption checkpoint could not be written" in done.stderr, failure(done)
    files = [path for path in left.rglob("*") if path.is_file()]
    assert not [path for path in files if ".partial" in path.name], files
    checkpoints = [path for path in files if path.suffix == ".ckpt"]
    assert checkpoints, files  # the first checkpoint fitted
    assert not list(left.rglob("interrupted*.ckpt")), files
    for checkpoint in checkpoints:
        assert checkpoint.stat().st_size > 0, checkpoint
        torch.load(checkpoint, weights_only=True, map_location="cpu")  # whole
