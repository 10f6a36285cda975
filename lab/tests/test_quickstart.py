"""The README's quickstart: the digits recipe trains, tests and reports its wall time on CPU."""

import csv
import os
from pathlib import Path

import pytest

from fixtures.cifar_files import run_command
from signorm_lab.reproduction import regression
from torch_uncertainty_signorm.routines.member_health import WARNING_PREFIX

RECIPE = Path(__file__).parents[2] / "experiments" / "digits_signorm.yaml"
REFERENCE = Path(__file__).parents[2] / "docs" / "reference" / "digits_signorm.csv"
#: The run's conditions: one intra-op thread (the recipe's too), no library deprecation noise.
#: The kernels are whatever this machine's CPU dispatches: the reference row's tolerances come
#: from its seeds' spread (docs/reference/README.md), which a run on other kernels stays within.
RUN_ENV = {"OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore::DeprecationWarning"}


@pytest.mark.slow
def test_quickstart_trains_tests_and_prints_its_wall_time(tmp_path, capsys):
    """The README's main command, in a subprocess, then the regression check against the
    committed reference."""
    done = run_command(
        ["fit", "--config", RECIPE, "--trainer.enable_progress_bar=false"],
        cwd=tmp_path,
        env={**os.environ, **RUN_ENV},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "torch-uncertainty finished in" in done.stdout and "s (wall time, " in done.stdout
    assert "s of it start-up" in done.stdout  # the printed time includes the imports
    # The console holds what concerns the run: no library warning, tip or warning source line.
    console = done.stdout + done.stderr
    noise = [
        line
        for line in console.splitlines()
        if "Warning" in line
        or "💡 Tip" in line
        or "rank_zero_warn(" in line
        or "warnings.warn(" in line
        or "LeafSpec" in line
    ]
    assert noise == [], noise
    (results,) = (tmp_path / "logs" / "digits").rglob("results.csv")
    with results.open() as file:
        (row,) = list(csv.DictReader(file))
    assert float(row["test/cls/Acc"]) > 0.85
    assert float(row["ood/AUROC"]) > 0.8  # pixel-permuted digits are detected
    assert float(row["test/div/signorm_cos_regularized"]) < float(row["test/div/signorm_cos"])
    # Every member is healthy: no health warning, each member's accuracy in results.csv.
    assert WARNING_PREFIX not in done.stdout + done.stderr, done.stderr[-3000:]
    assert float(row["test/health/dead_members"]) == 0
    assert min(float(row[f"test/member_{m}/Acc"]) for m in range(4)) > 0.8
    assert list((tmp_path / "logs" / "digits").rglob("ownership.csv"))
    assert list((tmp_path / "logs" / "digits").rglob("config.yaml"))
    # The regression check passes against the committed reference of this recipe, each metric
    # within the prediction interval its 10 seeds' spread gives.
    status = regression.main([str(results.parent), "--reference", str(REFERENCE)])
    report = capsys.readouterr().out
    assert status == 0, report
    assert "99% PI, 10 seeds" in report
