"""Sweep grids, the recipe commands they print, and one digits point end to end."""

import json
from pathlib import Path

import pytest
from safetensors import safe_open

from signorm_lab.cli import cli_main
from signorm_lab.reproduction.runs import find_runs
from studies import sweeps
from studies.sweeps import SweepPoint, recipe_command, sweep_points

EXPERIMENTS = Path(__file__).parents[3] / "experiments"


def test_tau_grid_is_values_times_seeds_at_fixed_m_and_lambda():
    points = sweep_points("tau", [0.1, 1.0], [0, 1, 2], diversity_strength=1e-3)
    assert len(points) == 6
    assert {p.tau for p in points} == {0.1, 1.0}
    assert {(p.num_estimators, p.diversity_strength, p.method) for p in points} == {
        (4, 1e-3, "signorm")
    }


def test_member_grid_adds_packed_and_keeps_integers():
    points = sweep_points("members", [2, 4.0], [0], tau=0.5, with_packed=True)
    assert [(p.method, p.num_estimators, p.tau) for p in points] == [
        ("signorm", 2, 0.5),
        ("signorm", 4, 0.5),
        ("packed", 2, 0.5),
        ("packed", 4, 0.5),
    ]
    assert all(type(p.num_estimators) is int for p in points)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("temperature", [1.0], [0]), "sweep must be one of.*got 'temperature'"),
        (("members", [2.5], [0]), r"member counts must be integers >= 1, got \[2.5\]"),
        (("tau", [], [0]), "a sweep needs values and seeds"),
    ],
)
def test_bad_grids_raise(args, match):
    with pytest.raises(ValueError, match=match):
        sweep_points(*args)


@pytest.mark.slow
def test_recipe_command_overrides_reach_the_resolved_config(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["torch-uncertainty"])
    point = SweepPoint("signorm", num_estimators=2, tau=0.5, diversity_strength=1e-3, seed=7)
    command = recipe_command(point, EXPERIMENTS / "resnet18_c100_signorm.yaml", tmp_path, "members")
    assert command[:2] == ["torch-uncertainty", "fit"]
    with pytest.raises(SystemExit):
        cli_main([*command[1:], "--print_config"])
    printed = capsys.readouterr().out
    for line in (
        "seed_everything: 7",
        "num_estimators: 2",
        "tau: 0.5",
        "diversity_strength: 0.001",
        "save_to_csv: true",
        "version: seed7",
        "name: signorm_M2_tau0.5_lambda0.001",
    ):
        assert line in printed, line


def test_printing_a_recipe_sweep_records_each_points_settings(tmp_path, capsys):
    sweeps.main(
        [
            "members",
            "--backend",
            "recipe",
            "--values",
            "2",
            "16",
            "--seeds",
            "0",
            "--tau",
            "0.5",
            "--config",
            "a.yaml",
            "--packed-config",
            "b.yaml",
            "--out",
            str(tmp_path),
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith("torch-uncertainty fit") for line in lines)
    assert "--config b.yaml" in lines[2] and ".tau=" not in lines[2]  # Packed has no τ
    settings = json.loads(
        (tmp_path / "members" / "packed_M16" / "seed0" / "settings.json").read_text()
    )
    assert settings["method"] == "packed" and settings["num_estimators"] == 16


@pytest.mark.slow
def test_one_digits_point_leaves_results_settings_and_importances(tmp_path):
    point = SweepPoint("signorm", num_estimators=2, tau=0.1, diversity_strength=1e-2, seed=0)
    path = sweeps.run_digits_point(point, tmp_path / "run", epochs=1)
    (run,) = find_runs([path])
    assert run.settings["tau"] == 0.1 and run.settings["test_batch_size"] == 64
    assert 0 <= run.metrics["test/div/signorm_cos"] <= 1
    assert run.metrics["test/div/jensen_gap"] >= 0
    with safe_open(tmp_path / "run" / "importances.safetensors", "pt") as file:
        regularized = json.loads(file.metadata()["regularized"])
        names = file.keys()  # a safe_open handle is not iterable
        shapes = {name: file.get_tensor(name).shape for name in names}
    assert set(regularized) < set(shapes)
    assert all(shape[0] == 2 for shape in shapes.values())
    mtime = path.stat().st_mtime
    assert sweeps.run_digits_point(point, tmp_path / "run", epochs=1) == path  # kept, not rerun
    assert path.stat().st_mtime == mtime
