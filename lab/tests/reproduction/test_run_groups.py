"""The regression check averages only runs that differ in their seed (``--select`` picks a
group)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.results_files import tu_metrics, write_run
from signorm_lab.datamodules.stand_in_data import RUN_LABEL
from signorm_lab.reproduction.results_table import write_rows
from signorm_lab.reproduction.run_groups import select_runs
from signorm_lab.reproduction.runs import find_runs


def _config(tau: float, seed: int, target: float | None = None, strength: float = 0.01) -> dict:
    model = {
        "class_path": "torch_uncertainty_signorm.signorm_ensemble",
        "init_args": {"tau": tau, "diversity_strength": strength, "num_estimators": 4},
    }
    routine = {
        "class_path": "torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine",
        "init_args": {"model": model, "target_diversity": target},
    }
    return {
        "seed_everything": seed,
        "routine": routine,
        "data": {"class_path": "D", "init_args": {"root": f"./data{seed}", "num_workers": seed}},
        "trainer": {"max_epochs": 5, "devices": 1, "logger": {"save_dir": f"logs{seed}"}},
    }


def _mixed_folder(root: Path) -> Path:
    """Two seeds of τ = 0.1 (different data roots and workers: the same setting), one of τ = 10,
    one of τ = 0.1 with a diversity target."""
    for name, config, acc in [
        ("a/version_0", _config(0.1, 0), 0.9),
        ("a/version_1", _config(0.1, 1), 0.91),
        ("b/version_0", _config(10.0, 0), 0.5),
        ("c/version_0", _config(0.1, 0, target=0.6), 0.7),
    ]:
        write_run(root / name, tu_metrics(acc, 0.3, 0.02), config=config)
    return root


def _reference(tmp_path: Path) -> Path:
    path = tmp_path / "ref.csv"
    write_rows([{"method": "ref", "Acc": 90.5, "NLL": 0.3, "ECE": 2.0}], path)
    return path


def test_the_command_refuses_a_folder_mixing_settings_and_names_them(tmp_path):
    logs = _mixed_folder(tmp_path / "logs")
    command = [
        sys.executable,
        "-m",
        "signorm_lab.reproduction.regression",
        str(logs),
        "--reference",
        str(_reference(tmp_path)),
        "--tol",
        "Acc=1.0",
    ]
    mixed = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)
    assert mixed.returncode == 2, mixed.stdout + mixed.stderr
    (line,) = mixed.stderr.strip().splitlines()
    assert "3 different settings" in line and "differ in tau, target_diversity" in line
    assert "[1] 2 runs (seeds 0 1): tau=0.1, target_diversity=unset" in line
    assert "--select tau=0.1 target_diversity=unset" in line
    selected = subprocess.run(
        [*command, "--select", "tau=0.1", "target_diversity=unset"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert selected.returncode == 0, selected.stdout + selected.stderr
    assert "2 training runs (seeds 0, 1)" in selected.stdout


def test_select_errors_name_what_exists(tmp_path):
    runs = find_runs([_mixed_folder(tmp_path)])
    with pytest.raises(
        ValueError,
        match=r"--select tua: no run .* settings that differ are "
        r"\['target_diversity', 'tau'\]",
    ):
        select_runs(runs, ["tua=1"], "logs")
    with pytest.raises(
        ValueError,
        match=r"no run under logs matches; the runs have tau=0.1, "
        r"tau=10",
    ):
        select_runs(runs, ["tau=3"], "logs")
    assert len(select_runs(runs, ["tau=10"], "logs")) == 1


def test_stand_in_runs_are_refused(tmp_path):
    run = write_run(
        tmp_path / "logs" / "version_0", tu_metrics(0.9, 0.3, 0.02), config=_config(0.1, 0)
    )
    (run / RUN_LABEL).write_text("stand-in\n")
    with pytest.raises(ValueError, match="stand-in data"):
        select_runs(find_runs([tmp_path / "logs"]), (), "logs")
