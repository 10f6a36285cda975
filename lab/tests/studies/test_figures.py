"""Sweep tables and figures on small constructed sweeps: right columns, right values."""

import csv
import json
import math

import pytest
import torch
from safetensors.torch import save_file

from fixtures.results_files import tu_metrics, write_run
from signorm_lab.reproduction.runs import find_runs
from studies import figures

TAUS = [0.01, 0.1, 1.0, 10.0]


def _read(path):
    with path.open() as file:
        return list(csv.DictReader(file))


@pytest.fixture
def tau_sweep(tmp_path):
    """σNorm-cos rises with τ; the output diversities fall, non-linearly (monotone, not affine)."""
    for i, tau in enumerate(TAUS):
        for seed in range(2):
            cos = 0.2 + 0.2 * i + 0.01 * seed
            diversity = {
                "test/div/signorm_cos": cos,
                "test/div/jensen_gap": math.exp(-5 * cos),
                "test/ens_MI": 1 - cos**3,
                "test/div/geometric_ambiguity": 1 / cos,
            }
            write_run(
                tmp_path / "tau" / f"t{tau}" / f"seed{seed}",
                tu_metrics(0.90 + 0.01 * i + 0.02 * seed, 0.3, 0.02 + 0.01 * seed, **diversity),
                settings={"method": "signorm", "tau": tau, "seed": seed},
            )
    return tmp_path / "tau"


def test_spearman_is_minus_one_on_a_monotone_sweep_and_pearson_is_not(tau_sweep, tmp_path):
    out = tmp_path / "figs"
    figures.main(["diversity", str(tau_sweep), "--out", str(out)])
    table = _read(out / "diversity_correlations.csv")
    assert {(r["metric"], r["points"]) for r in table} == {
        (m, p) for m in ("MI", "jensen_gap", "geometric_ambiguity") for p in ("runs", "tau means")
    }
    for row in table:
        assert float(row["spearman"]) == pytest.approx(-1.0)
        assert -1.0 < float(row["pearson"]) < -0.8  # curved, so |Pearson| < 1
        assert int(row["n"]) == (8 if row["points"] == "runs" else 4)
    points = _read(out / "diversity_points.csv")
    assert len(points) == 8 and {"tau", "seed", "signorm_cos", "jensen_gap"} <= set(points[0])
    assert [float(p["tau"]) for p in points] == sorted(float(p["tau"]) for p in points)
    assert (out / "diversity_correlations.png").stat().st_size > 1000


def test_frontier_averages_seeds_per_tau(tau_sweep, tmp_path):
    out = tmp_path / "figs"
    figures.main(["frontier", str(tau_sweep), "--out", str(out), "--pdf"])
    rows = _read(out / "tau_frontier.csv")
    assert [float(r["tau"]) for r in rows] == TAUS
    # τ index 1: Acc 91 % and 93 % -> 92 ± 1.414; ECE 2 % and 3 % -> 2.5
    assert float(rows[1]["Acc"]) == pytest.approx(92.0)
    assert float(rows[1]["Acc_std"]) == pytest.approx(math.sqrt(2))
    assert float(rows[1]["ECE"]) == pytest.approx(2.5)
    assert (out / "tau_frontier.png").is_file() and (out / "tau_frontier.pdf").is_file()


def test_member_scaling_groups_by_method_and_m(tmp_path):
    for method in ("signorm", "packed"):
        for m in (2, 4):
            for seed in range(2):
                acc = 0.8 + 0.01 * m * (1 if method == "signorm" else -1) + 0.01 * seed
                write_run(
                    tmp_path / "members" / f"{method}{m}" / f"s{seed}",
                    tu_metrics(acc, 0.5, 0.02),
                    settings={"method": method, "num_estimators": m},
                )
    rows, figure = figures.member_scaling(find_runs([tmp_path / "members"]))
    assert [(r["method"], r["num_estimators"]) for r in rows] == [
        ("Packed", 2),
        ("Packed", 4),
        ("σN-Ens", 2),
        ("σN-Ens", 4),
    ]
    assert rows[3]["Acc"] == pytest.approx(84.5) and rows[1]["Acc"] == pytest.approx(76.5)
    assert len(figure.axes) == 4


def test_lambda_table_and_severity_curves(tmp_path):
    for lam in (1e-4, 1e-2):
        shift = {f"shift/s{k}/{m}": 0.01 * k for k in range(1, 6) for m in ("Acc", "NLL", "ECE")}
        write_run(
            tmp_path / f"l{lam}",
            tu_metrics(0.9, 0.3 + lam, 0.02, **shift),
            settings={"method": "signorm", "diversity_strength": lam, "tau": 0.1},
        )
    runs = find_runs([tmp_path])
    rows, _ = figures.lambda_table(runs)
    assert [r["diversity_strength"] for r in rows] == [1e-4, 1e-2]
    assert rows[1]["NLL"] == pytest.approx(0.31)
    rows, _ = figures.severity_curves(runs)
    assert [(r["method"], r["severity"]) for r in rows] == [("σN-Ens", k) for k in range(1, 6)]
    assert rows[4]["ECE"] == pytest.approx(5.0) and rows[4]["runs"] == 2


@pytest.mark.slow  # imports Lightning (the ownership callback's figures)
def test_ownership_counts_of_saved_importances(tmp_path):
    run = write_run(tmp_path / "run", tu_metrics(0.9, 0.3, 0.02), settings={"tau": 0.1})
    # 3 features: owned by 1, 2 and 0 of the 2 members (threshold 0.5)
    save_file(
        {"bn1": torch.tensor([[0.9, 0.9, 0.1], [0.2, 0.8, 0.3]])},
        run / "importances.safetensors",
        metadata={"regularized": json.dumps(["bn1"])},
    )
    rows = figures.ownership([run], tmp_path)
    assert rows == [
        {
            "run": f"{tmp_path.name}_run",
            "scope": "all",
            "k=0": pytest.approx(1 / 3, abs=1e-4),
            "k=1": pytest.approx(1 / 3, abs=1e-4),
            "k=2": pytest.approx(1 / 3, abs=1e-4),
        },
        {
            "run": f"{tmp_path.name}_run",
            "scope": "regularized",
            "k=0": pytest.approx(1 / 3, abs=1e-4),
            "k=1": pytest.approx(1 / 3, abs=1e-4),
            "k=2": pytest.approx(1 / 3, abs=1e-4),
        },
    ]
    assert (tmp_path / f"importance_embedding_{tmp_path.name}_run.png").is_file()
    assert (tmp_path / f"importance_histogram_{tmp_path.name}_run.png").is_file()


def test_errors_name_what_is_missing(tmp_path):
    write_run(tmp_path / "a", tu_metrics(0.9, 0.3, 0.02))
    runs = find_runs([tmp_path])
    with pytest.raises(ValueError, match="correlations need at least 3 runs, got 1"):
        figures.diversity_correlations(runs)
    with pytest.raises(ValueError, match="the frontier needs the 'tau' setting of every run"):
        figures.frontier(runs)
    with pytest.raises(ValueError, match=r"no run logged shift/s\{k\}/ECE"):
        figures.severity_curves(runs)
