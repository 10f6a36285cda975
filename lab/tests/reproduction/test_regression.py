"""The regression check: passes on the committed digits reference, fails on a perturbed copy."""

import csv
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from fixtures.results_files import tu_metrics, write_run
from signorm_lab.reproduction import regression
from signorm_lab.reproduction.published import load_table
from signorm_lab.reproduction.regression import (
    DEFAULT_TOLERANCES,
    ReproductionError,
    check_reproduction,
    compare_rows,
    spread_tolerance,
)
from signorm_lab.reproduction.results_table import read_rows, write_rows

REFERENCE_DIR = Path(__file__).parents[3] / "docs" / "reference"
REFERENCE = REFERENCE_DIR / "digits_signorm.csv"
#: The quickstart's runs at seeds 0-9 (seed_<s>/results.csv and config.yaml) behind the row.
REFERENCE_RUNS = REFERENCE_DIR / "digits_signorm"
REFERENCE_RUN = REFERENCE_RUNS / "seed_0"
#: Runs the check must pass (the recipe on AVX2 kernels, seeds 0-4, the reference's on AVX-512)
#: and fail (members collapsed by tau 1000 and a symmetric start; tau 1.0; 3 epochs, not 5).
CHECKS = Path(__file__).parents[1] / "fixtures" / "data" / "reference_checks"
#: The routine a run's config.yaml names: a config of the seed alone holds no settings.
ROUTINE = {"model": {"class_path": "x.SigmaNormClassificationRoutine"}}


def _perturbed_copy(tmp_path, **deltas):
    (row,) = read_rows(REFERENCE)
    for metric, delta in deltas.items():
        row[metric] += delta
    write_rows([row], tmp_path / "perturbed.csv")
    return tmp_path / "perturbed.csv"


def test_committed_reference_is_reproduced_from_its_results_files(capsys):
    zero = [f"{metric}=1e-9" for metric in DEFAULT_TOLERANCES]
    status = regression.main(
        [str(REFERENCE_RUNS), "--reference", str(REFERENCE), "--tol", *zero, "Brier=0", "aECE=0"]
    )
    report = capsys.readouterr().out
    assert status == 0, report
    assert "0 of 13 metrics failed" in report  # Acc ... MAdds and the diversity, all compared
    assert "10 training runs (seeds 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)" in report
    assert "budget: ours max_epochs=5" in report


@pytest.mark.parametrize("run", [f"avx2_seed_{seed}" for seed in range(5)])
def test_a_run_on_other_kernels_passes_the_reference_with_tolerances_from_its_spread(run, capsys):
    assert regression.main([str(CHECKS / run), "--reference", str(REFERENCE)]) == 0
    assert "99% PI, 10 seeds" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("run", "failure"),
    [
        ("collapsed", "signorm_cos (out of tolerance)"),  # σNorm-cos 0.98: one model
        ("wrong_tau", "signorm_cos (out of tolerance)"),  # tau 1.0 instead of 0.1
        ("wrong_budget", "FAIL: our runs trained with max_epochs=3, the reference row with"),
    ],
)
def test_a_collapsed_a_wrong_tau_or_a_wrong_budget_run_fails_the_reference(run, failure, capsys):
    assert regression.main([str(CHECKS / run), "--reference", str(REFERENCE)]) == 1
    assert failure in capsys.readouterr().out


def test_perturbed_copy_fails_and_the_diff_names_the_metric(tmp_path, capsys):
    perturbed = _perturbed_copy(tmp_path, Acc=-3.0, NLL=0.01)  # of a row of one run, no spread
    assert regression.main([str(perturbed), "--reference", str(REFERENCE)]) == 1
    report = capsys.readouterr().out
    (acc_line,) = [line for line in report.splitlines() if line.startswith("Acc ")]
    assert acc_line.endswith("FAIL") and "-3" in acc_line  # outside the reference's 2.33
    (nll_line,) = [line for line in report.splitlines() if line.startswith("NLL ")]
    assert nll_line.endswith("ok")  # 0.01 is within the reference's 0.052
    assert report.splitlines()[-1] == "1 of 13 metrics failed: Acc (out of tolerance)"


def test_tolerances_are_overridable_per_metric(tmp_path, capsys):
    perturbed = _perturbed_copy(tmp_path, Acc=-0.8)
    assert regression.main([str(perturbed), "--reference", str(REFERENCE), "--tol", "Acc=1"]) == 0
    assert (
        regression.main([str(perturbed), "--reference", str(REFERENCE), "--metrics", "NLL", "ECE"])
        == 0
    )
    assert "Acc" not in capsys.readouterr().out.split("verdict")[-1].split("\n", 1)[1]
    assert regression.main([str(perturbed), "--reference", str(REFERENCE), "--exclude", "Acc"]) == 0
    report = capsys.readouterr().out
    assert "excluded" in next(line for line in report.splitlines() if line.startswith("Acc "))
    assert report.splitlines()[-1] == "0 of 12 metrics failed; excluded: Acc"


def _copy_of_reference_run(tmp_path, drop=(), **values):
    """The quickstart's run folder, its last results.csv row edited."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text((REFERENCE_RUN / "config.yaml").read_text())
    with (REFERENCE_RUN / "results.csv").open() as file:
        rows = list(csv.DictReader(file))
    row = {k: values.get(k, v) for k, v in rows[-1].items() if not k.startswith(drop or "\0")}
    with (run / "results.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(row))
        writer.writeheader()
        writer.writerow(row)
    return run


def test_a_nan_or_infinite_metric_fails_by_name(tmp_path, capsys):
    run = _copy_of_reference_run(
        tmp_path, **{"test/cls/Acc": "nan", "test/cls/NLL": "nan", "test/cal/aECE": "inf"}
    )
    assert regression.main([str(run), "--reference", str(REFERENCE)]) == 1
    report = capsys.readouterr().out
    assert re.search(
        r"^Acc +nan +97.61 +-- +2.333 +99% PI, 10 seeds +FAIL \(NaN in the run\)$", report, re.M
    )
    assert re.search(r"^aECE +inf .* FAIL \(infinite in the run\)$", report, re.M)
    assert report.splitlines()[-1] == (
        "3 of 13 metrics failed: Acc (NaN in the run), NLL (NaN in "
        "the run), aECE (infinite in the run)"
    )


def test_a_metric_missing_from_the_run_fails_unless_excluded(tmp_path, capsys):
    run = _copy_of_reference_run(tmp_path, drop="ood/")  # a run without eval_ood
    assert regression.main([str(run), "--reference", str(REFERENCE)]) == 1
    report = capsys.readouterr().out
    assert report.splitlines()[-1] == (
        "3 of 13 metrics failed: AUPR (missing from the run), AUROC (missing from the run), "
        "FPR95 (missing from the run)"
    )
    assert (
        regression.main(
            [str(run), "--reference", str(REFERENCE), "--exclude", "AUPR", "AUROC", "FPR95"]
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines()[-1] == (
        "0 of 10 metrics failed; excluded: AUPR, AUROC, FPR95"
    )


def test_min_seeds_counts_distinct_training_runs(tmp_path, capsys):
    for seed, acc in enumerate((0.806, 0.810)):
        write_run(
            tmp_path / f"seed{seed}",
            tu_metrics(acc, 0.701, 0.016, auroc=0.807),
            config={"seed_everything": seed, **ROUTINE},
        )
    where = [
        "--published",
        "main",
        "--where",
        "dataset=CIFAR-100",
        "arch=RN50",
        "method=sigmaN-Ens",
        "--metrics",
        "Acc",
        "NLL",
        "ECE",
        "AUROC",
    ]
    assert regression.main([str(tmp_path), *where, "--min-seeds", "2"]) == 0
    report = capsys.readouterr().out
    assert "2 training runs (seeds 0, 1)" in report
    assert (
        "expected: published table 'main', row dataset=CIFAR-100, arch=ResNet-50, method=σN-Ens"
    ) in report
    assert regression.main([str(tmp_path), *where, "--min-seeds", "3"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "FAIL: 2 distinct seeds averaged, --min-seeds 3 required"
    )


def test_a_short_budget_is_called_a_smoke_test(tmp_path, capsys):
    write_run(
        tmp_path / "run",
        tu_metrics(0.806, 0.701, 0.016, auroc=0.807),
        config={"seed_everything": 0, "trainer": {"max_epochs": 1, "limit_train_batches": 2}},
    )
    regression.main(
        [
            str(tmp_path),
            "--published",
            "main",
            "--where",
            "dataset=CIFAR-100",
            "arch=ResNet-50",
            "method=σN-Ens",
            "--metrics",
            "Acc",
        ]
    )
    report = capsys.readouterr().out
    assert (
        "budget: ours max_epochs=1, limit_train_batches=2 | expected max_epochs=200 "
        "(Packed-Ensembles protocol"
    ) in report
    assert "a smoke test, not a reproduction" in report


def test_check_reproduction_raises_with_the_report_for_pytest(tmp_path):
    assert "0 of 13 metrics failed" in check_reproduction(REFERENCE_RUN, "--reference", REFERENCE)
    perturbed = _perturbed_copy(tmp_path, Acc=-3.0)
    with pytest.raises(ReproductionError, match=r"(?s)Acc .*FAIL.*1 of 13 metrics failed"):
        check_reproduction(perturbed, "--reference", REFERENCE)


def test_published_row_check_from_results_files(tmp_path, capsys):
    # σN-Ens, CIFAR-100 / ResNet-50 of the main table: 80.8, 0.701, 1.6 (AUROC 80.7)
    for seed, acc in enumerate((0.806, 0.810)):
        write_run(
            tmp_path / f"seed{seed}",
            tu_metrics(acc, 0.701, 0.016, auroc=0.807),
            config={"seed_everything": seed, **ROUTINE},
        )
    where = [
        "--published",
        "main",
        "--where",
        "dataset=CIFAR-100",
        "arch=ResNet-50",
        "method=σN-Ens",
        "--metrics",
        "Acc",
        "NLL",
        "ECE",
        "AUROC",
    ]
    assert regression.main([str(tmp_path), *where]) == 0
    write_run(
        tmp_path / "seed2",
        tu_metrics(0.78, 0.80, 0.016, auroc=0.807),
        config={"seed_everything": 2, **ROUTINE},
    )
    assert regression.main([str(tmp_path), *where]) == 1
    failed = capsys.readouterr().out.splitlines()[-1]
    assert failed == "2 of 4 metrics failed: Acc (out of tolerance), NLL (out of tolerance)"


def test_compare_rows_checks_the_absolute_difference():
    acc, nll = compare_rows({"Acc": 80.0}, {"Acc": 80.5, "NLL": 0.7})
    assert acc.ok and acc.delta == pytest.approx(-0.5)
    assert not nll.ok and nll.problem == "missing from the run"  # every expected metric
    (acc,) = compare_rows({"Acc": 79.4}, {"Acc": 80.0, "NLL": math.nan})  # NaN: not reported
    assert not acc.ok


def test_bad_input_raises_clear_errors(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"tolerances must be >= 0, got \{'Acc': -1.0\}"):
        compare_rows({"Acc": 1.0}, {"Acc": 1.0}, {"Acc": -1.0})
    with pytest.raises(
        ValueError,
        match=r"metric 'AUPR' is not in the expected row; it holds "
        r"\['Acc'\]",
    ):
        compare_rows({"Acc": 1.0}, {"Acc": 1.0}, metrics=["AUPR"])
    with pytest.raises(ValueError, match="excluded metric 'ECE' is not in the expected row"):
        compare_rows({"Acc": 1.0}, {"Acc": 1.0}, exclude=["ECE"])
    with pytest.raises(ValueError, match="the expected row holds no metric"):
        compare_rows({"Acc": 1.0}, {"method": "x", "NLL": math.nan})
    with pytest.raises(SystemExit) as exit_info:
        regression.main([str(REFERENCE), "--reference", str(REFERENCE), "--tol", "Acc"])
    assert exit_info.value.code == 2
    assert "--tol expects NAME=VALUE, got 'Acc'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        regression.main([str(REFERENCE), "--reference", str(REFERENCE), "--tol", "Acc=big"])
    assert "--tol Acc: expected a number, got 'big'" in capsys.readouterr().err


@pytest.mark.slow
def test_command_exit_status_gates_a_ci_job(tmp_path):
    """``python -m ...regression`` exits 1 on a drift (0 on success: main's return value)."""
    perturbed = _perturbed_copy(tmp_path, ECE=6.0)
    command = [
        sys.executable,
        "-m",
        "signorm_lab.reproduction.regression",
        "--reference",
        str(REFERENCE),
    ]
    failed = subprocess.run([*command, str(perturbed)], check=False, capture_output=True, text=True)
    assert failed.returncode == 1
    assert "ECE" in failed.stdout.splitlines()[-1]


def test_reference_files_hold_the_quickstart_columns():
    with (REFERENCE_RUN / "results.csv").open() as file:
        header = next(csv.reader(file))
    assert {
        "test/cls/Acc",
        "test/cal/ECE",
        "ood/AUROC",
        "test/cplx/flops",
        "test/div/signorm_cos",
    } <= set(header)


def test_the_example_ci_workflow_gates_on_valid_checks():
    """docs/ci/reproduction.yml: each regression step parses, names an existing row or
    reference, and the quickstart's step passes on the committed reference run."""
    root = Path(__file__).parents[3]
    workflow = yaml.safe_load((root / "docs" / "ci" / "reproduction.yml").read_text())
    commands = [
        line.strip()
        for job in workflow["jobs"].values()
        for step in job["steps"]
        for line in step.get("run", "").splitlines()
        if line.strip().startswith("signorm-regression ")
    ]
    assert len(commands) == 2
    for command in commands:
        args = shlex.split(command)[1:]
        parsed = regression._parser().parse_args(args)
        if parsed.published:
            table = load_table(parsed.published)
            row = table.row(**dict(pair.split("=", 1) for pair in parsed.where))
            assert parsed.min_seeds == 3 and table.budget(row)["max_epochs"] == 200
        else:
            assert (root / parsed.reference).is_file()
            args[0] = str(REFERENCE_RUN)  # the run the quickstart job trains, as committed
            args[args.index("--reference") + 1] = str(root / parsed.reference)
            assert regression.main(args) == 0


def test_an_empty_reference_cell_is_named_not_dropped_silently(tmp_path, capsys):
    """An empty cell is a value the reference row does not hold: the metric is not compared,
    and the report says so, naming it."""
    with REFERENCE.open() as file:
        rows = list(csv.DictReader(file))
    rows[0]["NLL"] = ""
    blank = tmp_path / "blank_nll.csv"
    with blank.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert regression.main([str(REFERENCE), "--reference", str(blank)]) == 0
    report = capsys.readouterr().out
    assert "not compared (empty in the reference row, present in ours): NLL;" in report, report
    assert report.splitlines()[-1] == "0 of 12 metrics failed"


def test_the_spread_tolerance_covers_a_new_run_at_its_level():
    """The prediction interval's half-width: a new draw from the reference seeds' distribution
    falls outside it at the rate 1 − level, and outside every one of k metrics' at most that."""
    rng = np.random.default_rng(0)
    for runs, level, metrics in ((5, 0.95, 1), (10, 0.99, 1), (10, 0.95, 4)):
        reference = rng.normal(size=(20_000, metrics, runs))
        new = rng.normal(size=(20_000, metrics))
        half = spread_tolerance(1.0, runs, 1, metrics, level) * reference.std(axis=2, ddof=1)
        outside = (np.abs(new - reference.mean(axis=2)) > half).any(axis=1).mean()
        assert outside == pytest.approx(1 - level, abs=0.006 if metrics == 1 else 0.01) or (
            metrics > 1 and outside < 1 - level
        )
    assert spread_tolerance(2.0, 10) == pytest.approx(2 * spread_tolerance(1.0, 10))
    # more reference seeds, a tighter interval; more of our runs averaged, tighter still
    assert spread_tolerance(1.0, 10) < spread_tolerance(1.0, 5)
    assert spread_tolerance(1.0, 10, our_runs=3) < spread_tolerance(1.0, 10)
    with pytest.raises(ValueError, match="needs >= 2 reference runs"):
        spread_tolerance(1.0, 1)


def test_a_reference_row_with_its_spread_sets_the_tolerances_and_the_report_names_them(
    tmp_path, capsys
):
    reference = {
        "method": "ref",
        "runs": 10,
        "seeds": " ".join(map(str, range(10))),
        "max_epochs": 5,
        "Acc": 96.0,
        "Acc_std": 0.5,
        "NLL": 0.12,
        "NLL_std": 0.01,
        "Params": 0.7,
        "Params_std": 0.0,
    }
    write_rows([reference], tmp_path / "reference.csv")
    write_run(
        tmp_path / "run",
        {"test/cls/Acc": 0.946, "test/cls/NLL": 0.13, "test/cplx/params": 700_000},
        config={"seed_everything": 3, "trainer": {"max_epochs": 5}},
    )
    args = [str(tmp_path / "run"), "--reference", str(tmp_path / "reference.csv")]
    assert regression.main(args) == 0  # Acc 1.4 below: inside 0.5 × 5.2 (99 %, 2 metrics)
    report = capsys.readouterr().out
    acc = spread_tolerance(0.5, 10, 1, 2, 0.99)
    assert re.search(rf"^Acc .* {acc:.4g} +99% PI, 10 seeds +ok$", report, re.M), report
    assert re.search(r"^Params .* 0.01 +default +ok$", report, re.M)  # no spread: the default
    assert (
        "prediction interval for one new run around the reference's mean, at 99% over its 2"
        in report
    )
    assert regression.main([*args, "--tol", "Acc=1"]) == 1  # an explicit tolerance wins
    assert re.search(r"^Acc .* 1 +--tol +FAIL$", capsys.readouterr().out, re.M)
    assert regression.main([*args, "--level", "0.5"]) == 1  # a narrower interval
    capsys.readouterr()


def test_a_run_of_another_budget_than_the_reference_row_fails(tmp_path, capsys):
    reference = {"method": "ref", "runs": 3, "max_epochs": 5, "Acc": 96.0, "Acc_std": 0.5}
    write_rows([reference], tmp_path / "reference.csv")
    write_run(
        tmp_path / "run",
        {"test/cls/Acc": 0.96},
        config={"seed_everything": 0, "trainer": {"max_epochs": 3}},
    )
    assert regression.main([str(tmp_path / "run"), "--reference", str(tmp_path / "reference.csv")])
    report = capsys.readouterr().out
    assert "FAIL: our runs trained with max_epochs=3, the reference row with max_epochs=5" in report
