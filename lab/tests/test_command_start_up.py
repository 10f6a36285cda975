"""The wall time ``torch-uncertainty`` prints counts from the command's own start: not whatever
ran before it in the process a shell handed it (``bash -c 'pip install ... && torch-uncertainty
fit ...'`` ``exec``s its last command, whose process then started with the install)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from signorm_lab.datamodules.stand_in_data import (
    HEALTH_CHECKS_OFF,
    SMOKE_TEST_OVERRIDES,
    write_stand_in,
)
from torch_uncertainty_signorm.routines.member_health import WARNING_PREFIX

BIN = Path(sys.executable).parent
RECIPE = Path(__file__).resolve().parents[2] / "experiments" / "resnet18_c10_signorm.yaml"
NARROW = "--routine.init_args.model.init_args.model.init_args.width_multiplier=0.125"
BEFORE = 3  # seconds the shell spends before exec-ing the command
FINISHED = re.compile(
    r"torch-uncertainty finished in ([\d.]+) s \(wall time, ([\d.]+) s of it "
    r"start-up"
)


def _after_a_pause(command: str, cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    """``command`` run by ``bash -c 'sleep BEFORE && exec command'``, and its wall time."""
    env = {
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
    }
    start = time.perf_counter()
    done = subprocess.run(
        ["bash", "-c", f"sleep {BEFORE} && exec {command}"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return done, time.perf_counter() - start


@pytest.mark.slow
def test_the_start_is_the_commands_not_the_exec_ing_shells(tmp_path):
    probe = (
        "import time; from signorm_lab.cli.entry_point import STARTED; "
        "print(time.perf_counter() - STARTED)"
    )
    done, _ = _after_a_pause(f"{sys.executable} -c '{probe}'", tmp_path)
    assert done.returncode == 0, done.stderr
    assert 0 <= float(done.stdout) < 1.0  # not the shell's pause before


@pytest.mark.slow
def test_a_stand_in_run_prints_its_own_wall_time_and_no_health_advice(tmp_path):
    """The whole console of a stand-in smoke run, started as after an install in one shell."""
    write_stand_in(tmp_path / "standin")
    args = [
        "torch-uncertainty",
        "fit",
        "--config",
        str(RECIPE),
        "--data.init_args.root=standin",
        *SMOKE_TEST_OVERRIDES,
        NARROW,
    ]
    done, wall = _after_a_pause(" ".join(args), tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    total, start_up = (float(value) for value in FINISHED.search(done.stdout).groups())
    assert 0 < start_up < total < wall - BEFORE + 0.5  # the pause is not the command's
    console = done.stdout + done.stderr
    assert WARNING_PREFIX not in console and console.count(HEALTH_CHECKS_OFF) == 1
    assert "100% of the batches" not in console  # limit_val_batches=1 is one batch
