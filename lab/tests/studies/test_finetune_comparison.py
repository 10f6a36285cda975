"""The registered fine-tune comparison's readings: checks first, Holm on the primary NLL family,
TOST before "equivalent"."""

from __future__ import annotations

import csv
from pathlib import Path

from studies import finetune_comparison as study

RESULTS = Path(__file__).parents[3] / "studies" / "results" / "finetune_comparison"
COLUMNS = ["test/cls/NLL", "test/cls/Acc", "test/cal/ECE", "ood/AUROC"]


def _write(folder, nll: dict[str, list[float]], cos: float = 0.5, learned: bool = True):
    rows = []
    for method, values in nll.items():
        for seed, value in enumerate(values):
            run = folder / method / f"seed_{seed}"
            run.mkdir(parents=True)
            metrics = {
                "test/cls/NLL": value,
                "test/cls/Acc": 0.9 + 0.001 * seed,
                "test/cal/ECE": 0.02,
                "ood/AUROC": 0.9 + 0.03 * seed * (method == "single"),
                "test/div/signorm_cos_regularized": cos,
                "test/health/one_class": 0,
            }
            with (run / "results.csv").open("w", newline="") as file:
                writer = csv.DictWriter(file, fieldnames=list(metrics))
                writer.writeheader()
                writer.writerow(metrics)
            rows.append(
                {
                    "method": method,
                    "seed": seed,
                    "folder": f"{method}/seed_{seed}",
                    "learned": learned,
                }
            )
    with (folder / "comparison_runs.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=["method", "seed", "folder", "learned"])
        writer.writeheader()
        writer.writerows(rows)


def test_primary_nll_is_holm_corrected_and_each_verdict_follows_its_rule(tmp_path):
    _write(
        tmp_path,
        {
            "signorm": [0.30, 0.31, 0.29, 0.30, 0.32],
            "single": [0.40, 0.42, 0.39, 0.41, 0.40],  # σN-Ens clearly lower: better
            "multi_head": [0.301, 0.309, 0.292, 0.299, 0.321],  # within ±0.02: equivalent
            "deep_ensembles": [0.20, 0.35, 0.25, 0.40, 0.22],  # noisy: open
            "film": [0.20, 0.21, 0.19, 0.20, 0.22],  # σN-Ens clearly higher: worse
        },
    )
    runs = study.read_runs(tmp_path)
    assert study.checks(runs) == []
    rows = {(r["arm"], r["metric"]): r for r in study.readings(runs)}
    primary = [r for r in rows.values() if r["reading"] == "primary (Holm)"]
    assert {r["arm"] for r in primary} == {"single", "multi_head", "deep_ensembles"}
    # Holm: the smallest p-value at 1 - 0.05/3, the next at 1 - 0.05/2, the last at 0.95.
    assert sorted(round(r["level"], 4) for r in primary) == [0.95, 0.975, 0.9833]
    assert rows["single", "NLL"]["verdict"] == "better"
    assert rows["multi_head", "NLL"]["verdict"] == "equivalent (±0.02)"
    assert rows["deep_ensembles", "NLL"]["verdict"] == "open"
    assert rows["film", "NLL"]["verdict"] == "worse" and rows["film", "NLL"]["level"] == 0.95
    # Higher is better for AUROC: Single's rises with the seed, σN-Ens's does not.
    assert rows["single", "OOD AUROC (points)"]["mean"] < 0


def test_holm_steps_down_at_three_seeds_of_the_stored_tweets_clipped_runs():
    """Seeds 0-2 of the stored runs: Single's p = 0.018 is above α/3, so Holm rejects nothing,
    and Deep Ensembles' interval at its level α/2, which excludes 0, decides nothing either."""
    runs = study.read_runs(RESULTS / "tweets_clipped")
    three = {
        method: {s: run for s, run in seeds.items() if s < 3} for method, seeds in runs.items()
    }
    primary = {r["arm"]: r for r in study.readings(three) if r["reading"] == "primary (Holm)"}
    assert primary["deep_ensembles"]["high"] < 0 and primary["deep_ensembles"]["level"] == 0.975
    assert primary["single"]["p_holm"] > 0.05 and primary["single"]["level"] > 0.983
    assert primary["deep_ensembles"]["verdict"] == "open (Holm stopped before it)"
    assert [r["verdict"] for r in primary.values()].count("open") == 2
    # At five seeds every p-value is below its level: all three are decided.
    five = [r for r in study.readings(runs) if r["reading"] == "primary (Holm)"]
    assert [r["verdict"] for r in five] == ["better"] * 3


def test_failed_checks_are_named_before_any_reading(tmp_path):
    _write(tmp_path, {"signorm": [0.3, 0.3], "single": [0.4, 0.4]}, cos=0.995, learned=False)
    failed = study.checks(study.read_runs(tmp_path))
    assert "signorm seed 0: members not apart (σNorm-cos 0.995)" in failed
    assert "single seed 1: did not learn" in failed
    text = study.table(study.read_runs(tmp_path))
    assert text.startswith("Checks (learned, no one-class ending, σN-Ens members apart): FAILED")


def test_clipping_reads_clipped_minus_unclipped_per_arm_with_the_same_verdict_words(tmp_path):
    _write(
        tmp_path / "clipped",
        {"signorm": [0.20, 0.21, 0.19, 0.20, 0.22], "single": [0.40, 0.30, 0.45, 0.35, 0.50]},
    )
    _write(
        tmp_path / "unclipped",
        {"signorm": [0.30, 0.31, 0.29, 0.30, 0.32], "single": [0.38, 0.41, 0.36, 0.44, 0.39]},
    )
    text = study.clipping_table(
        study.read_runs(tmp_path / "clipped"), study.read_runs(tmp_path / "unclipped")
    )
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line for line in text.splitlines()}
    # σN-Ens: 0.1 lower at every seed when clipped, so better; Single's differences straddle 0.
    assert "| -0.100 | [-0.100, -0.100] | better |" in rows["signorm", "NLL"].replace("−", "-")
    assert rows["single", "NLL"].endswith("| open |")
    assert "signorm 0 / 0, single 0 / 0" in text


def test_the_lambda_rule_picks_the_most_diverse_of_the_lambdas_equivalent_to_the_lowest_nll(
    tmp_path,
):
    _write(
        tmp_path,
        {
            "signorm": [0.100, 0.101, 0.099, 0.100, 0.100],  # lowest mean NLL, least diverse
            "lambda_1e-3": [0.102, 0.103, 0.101, 0.102, 0.102],  # +0.002 at every seed
            "lambda_1e-2": [0.300, 0.250, 0.280, 0.310, 0.290],  # clearly worse
        },
    )
    for method, value, cos in (("signorm", 1e-4, 0.9), ("lambda_1e-3", 1e-3, 0.8)):
        for seed in range(5):
            (tmp_path / method / f"seed_{seed}" / "config.yaml").write_text(
                "routine: {init_args: {model: {init_args: {diversity_strength: "
                + str(value)
                + "}}}}\n"
            )
        for seed in range(5):
            path = tmp_path / method / f"seed_{seed}" / "results.csv"
            path.write_text(path.read_text().replace(",0.5,", f",{cos},"))
    for seed in range(5):
        (tmp_path / "lambda_1e-2" / f"seed_{seed}" / "config.yaml").write_text(
            "routine: {init_args: {model: {init_args: {diversity_strength: 1.0e-2}}}}\n"
        )
    study.main(["--lambda-grid", "--runs", str(tmp_path)])
    text = (tmp_path / "lambda_grid.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "lowest mean NLL" in rows["0.0001"]
    # Worse at every seed by 0.002, well inside the ±0.02 margin: the rule reads TOST alone.
    assert rows["0.001"].endswith("| worse, equivalent (±0.02) |")
    assert rows["0.01"].endswith("| worse |")
    assert "The rule picks λ = 0.001 (equivalent in NLL to λ 0.0001" in text


def test_a_lambda_whose_members_did_not_come_apart_is_set_aside_by_the_eligible_pick(tmp_path):
    _write(
        tmp_path,
        {
            "signorm": [0.200, 0.205, 0.195, 0.200, 0.200],
            "lambda_1e-4": [0.100, 0.101, 0.099, 0.100, 0.100],  # lowest NLL, one model
            "lambda_1e-2": [0.300, 0.250, 0.280, 0.310, 0.290],
        },
    )
    for method, value in (
        ("signorm", "1.0e-3"),
        ("lambda_1e-4", "1.0e-4"),
        ("lambda_1e-2", "1.0e-2"),
    ):
        for seed in range(5):
            (tmp_path / method / f"seed_{seed}" / "config.yaml").write_text(
                "routine: {init_args: {model: {init_args: {diversity_strength: " + value + "}}}}\n"
            )
    path = tmp_path / "lambda_1e-4" / "seed_3" / "results.csv"
    path.write_text(path.read_text().replace(",0.5,", ",0.995,"))
    study.main(["--lambda-grid", "--runs", str(tmp_path)])
    text = (tmp_path / "lambda_grid.md").read_text()
    assert "lambda_1e-4 seed 3: members not apart (σNorm-cos 0.995)" in text
    assert "The rule picks λ = 0.0001 (the lowest mean NLL)." in text
    assert (
        "Among the λ that passed every check at every seed (λ 0.0001 did not), the rule picks "
        "λ = 0.001 (the lowest mean NLL)." in text
    )
