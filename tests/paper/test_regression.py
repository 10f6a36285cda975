"""The regression check: passes on the committed digits reference, fails on a perturbed copy."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.results_files import tu_metrics, write_run

from torch_uncertainty_signorm.paper import regression
from torch_uncertainty_signorm.paper.regression import DEFAULT_TOLERANCES, compare_rows
from torch_uncertainty_signorm.paper.results_table import read_rows, write_rows

REFERENCE_DIR = Path(__file__).parents[2] / "docs" / "reference"
REFERENCE = REFERENCE_DIR / "digits_signorm.csv"
REFERENCE_RUN = REFERENCE_DIR / "digits_signorm"  # the quickstart's results.csv and config.yaml


def _perturbed_copy(tmp_path, **deltas):
    (row,) = read_rows(REFERENCE)
    for metric, delta in deltas.items():
        row[metric] += delta
    write_rows([row], tmp_path / "perturbed.csv")
    return tmp_path / "perturbed.csv"


def test_committed_reference_is_reproduced_from_its_results_file(capsys):
    zero = [f"{metric}=0" for metric in DEFAULT_TOLERANCES]
    status = regression.main([str(REFERENCE_RUN), "--reference", str(REFERENCE),
                              "--tol", *zero, "Brier=0", "aECE=0"])
    report = capsys.readouterr().out
    assert status == 0, report
    assert "0 of 10 metrics out of tolerance" in report  # Acc ... MAdds, all compared


def test_perturbed_copy_fails_and_the_diff_names_the_metric(tmp_path, capsys):
    perturbed = _perturbed_copy(tmp_path, Acc=-0.8, NLL=0.01)
    assert regression.main([str(perturbed), "--reference", str(REFERENCE)]) == 1
    report = capsys.readouterr().out
    (acc_line,) = [line for line in report.splitlines() if line.startswith("Acc ")]
    assert acc_line.endswith("FAIL") and "-0.8" in acc_line
    (nll_line,) = [line for line in report.splitlines() if line.startswith("NLL ")]
    assert nll_line.endswith("ok")  # 0.01 is within the default 0.02
    assert report.splitlines()[-1] == "1 of 10 metrics out of tolerance: Acc"


def test_tolerances_are_overridable_per_metric(tmp_path, capsys):
    perturbed = _perturbed_copy(tmp_path, Acc=-0.8)
    assert regression.main([str(perturbed), "--reference", str(REFERENCE), "--tol", "Acc=1"]) == 0
    assert regression.main([str(perturbed), "--reference", str(REFERENCE),
                            "--metrics", "NLL", "ECE"]) == 0
    assert "Acc" not in capsys.readouterr().out.split("verdict")[-1].split("\n", 1)[1]


def test_published_row_check_from_results_files(tmp_path, capsys):
    # σN-Ens, CIFAR-100 / ResNet-50 of the main table: 80.8, 0.701, 1.6 (AUROC 80.7)
    for seed, acc in enumerate((0.806, 0.810)):
        write_run(tmp_path / f"seed{seed}", tu_metrics(acc, 0.701, 0.016, auroc=0.807))
    where = ["--published", "main", "--where", "dataset=CIFAR-100", "arch=ResNet-50",
             "method=σN-Ens", "--metrics", "Acc", "NLL", "ECE", "AUROC"]
    assert regression.main([str(tmp_path), *where]) == 0
    write_run(tmp_path / "seed2", tu_metrics(0.78, 0.80, 0.016, auroc=0.807))
    assert regression.main([str(tmp_path), *where]) == 1
    failed = capsys.readouterr().out.splitlines()[-1]
    assert failed == "2 of 4 metrics out of tolerance: Acc, NLL"


def test_compare_rows_checks_the_absolute_difference():
    (acc,) = compare_rows({"Acc": 80.0}, {"Acc": 80.5, "NLL": 0.7})
    assert acc.ok and acc.delta == pytest.approx(-0.5)
    (acc,) = compare_rows({"Acc": 79.4}, {"Acc": 80.0})
    assert not acc.ok


def test_bad_input_raises_clear_errors(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"tolerances must be >= 0, got \{'Acc': -1.0\}"):
        compare_rows({"Acc": 1.0}, {"Acc": 1.0}, {"Acc": -1.0})
    with pytest.raises(ValueError, match="metric 'AUPR' is not in our row"):
        compare_rows({"Acc": 1.0}, {"Acc": 1.0, "AUPR": 2.0}, metrics=["AUPR"])
    with pytest.raises(ValueError, match="the rows share no metric"):
        compare_rows({"Acc": 1.0}, {"NLL": 1.0})
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
    perturbed = _perturbed_copy(tmp_path, ECE=1.5)
    command = [sys.executable, "-m", "torch_uncertainty_signorm.paper.regression",
               "--reference", str(REFERENCE)]
    failed = subprocess.run([*command, str(perturbed)], check=False, capture_output=True,
                            text=True)
    assert failed.returncode == 1
    assert "ECE" in failed.stdout.splitlines()[-1]


def test_reference_files_hold_the_quickstart_columns():
    with (REFERENCE_RUN / "results.csv").open() as file:
        header = next(csv.reader(file))
    assert {"test/cls/Acc", "test/cal/ECE", "ood/AUROC", "test/cplx/flops",
            "test/div/signorm_cos"} <= set(header)
