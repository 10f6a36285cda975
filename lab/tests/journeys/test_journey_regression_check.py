"""Journey: the reproduction check on a real run, as a CI job runs it, cannot pass a broken run.

A trained CIFAR-10 σN-Ens run (the shared ``signorm_run``), re-tested by ``torch-uncertainty
test --ckpt_path`` of its best checkpoint without OOD evaluation, then checked by
``reproduction.results_table`` and ``reproduction.regression`` as commands: the re-test is the
same training run (one seed, MAdds kept), the OOD metrics it lacks fail by name, a NaN in a copy
(its row's check as a test writes it) fails by name.
"""

import csv
import re
import shutil

import pytest
import yaml
from journey_commands import EXPERIMENTS, best_checkpoint, failure, only, tiny_args

from fixtures.cifar_files import run_command, run_module
from signorm_lab.evaluation.results_csv import ROW_CHECK_COLUMN, row_check
from signorm_lab.reproduction.regression import ReproductionError, check_reproduction

REGRESSION = "signorm_lab.reproduction.regression"
RESULTS_TABLE = "signorm_lab.reproduction.results_table"
# The reference row holds the diversity too.
PAPER_METRICS = {
    "Acc",
    "NLL",
    "ECE",
    "aECE",
    "Brier",
    "AUPR",
    "AUROC",
    "FPR95",
    "Params",
    "MAdds",
    "signorm_cos",
    "U_mod",
    "jensen_gap",
}


def _verdicts(report: str) -> dict[str, str]:
    """metric -> verdict of a regression report (the table's rows)."""
    # metric, ours, expected, delta, tol, tol from (one or more words), verdict
    rows = re.findall(r"^(\w+) +\S+ +\S+ +\S+ +\S+ +.+? +(ok|excluded|FAIL.*)$", report, re.M)
    return dict(rows)


@pytest.mark.slow
def test_regression_check_names_missing_and_nan_metrics_and_counts_training_runs(
    signorm_run, cifar_root, command_env, tmp_path
):
    # The trained run, and its reference row (the paper's columns, OOD included).
    logs = shutil.copytree(signorm_run.log_dir, tmp_path / "logs")
    trained = only(logs.glob("*/version_0"), "trained run")
    done = run_module(
        RESULTS_TABLE,
        ["--run", f"reference={trained}", "--out", tmp_path / "ref"],
        cwd=tmp_path,
        env=command_env,
    )
    assert done.returncode == 0, failure(done)
    reference = tmp_path / "ref" / "rows.csv"
    with reference.open() as file:
        (row,) = list(csv.DictReader(file))
    assert {k for k, v in row.items() if v} >= PAPER_METRICS
    assert row["seeds"] == "0" and row["max_epochs"] == "1" and row["limit_train_batches"] == "2"

    # Item 3: `test` of the run's checkpoint, without OOD evaluation, logs a folder of its own
    # and saves config.yaml there (the checkpoint it evaluated included).
    checkpoint = best_checkpoint(trained)
    done = run_command(
        [
            "test",
            "--config",
            EXPERIMENTS / "resnet18_c10_signorm.yaml",
            "--ckpt_path",
            checkpoint,
            *tiny_args(cifar_root, logs),
            "--data.init_args.eval_ood=false",
        ],
        cwd=tmp_path,
        env=command_env,
    )
    assert done.returncode == 0, failure(done)
    retest = only([p for p in logs.glob("*/version_*") if p != trained], "re-test folder")
    saved = yaml.safe_load((retest / "config.yaml").read_text())
    assert saved["ckpt_path"] == str(checkpoint)

    done = run_module(
        RESULTS_TABLE,
        ["--run", f"σN-Ens={logs}", "--out", tmp_path / "table"],
        cwd=tmp_path,
        env=command_env,
    )
    assert done.returncode == 0, failure(done)
    assert "σN-Ens (n=1)" in done.stdout  # one training run, not two seeds
    assert "1 training run (seed 0) from 2 results.csv" in done.stderr
    assert f"latest ({retest}) counts" in done.stderr
    with (tmp_path / "table" / "rows.csv").open() as file:
        (ours,) = list(csv.DictReader(file))
    assert ours["runs"] == "1" and ours["MAdds"]  # MAdds kept: the re-test saved its config
    assert ours["MAdds"] == row["MAdds"] and ours["Acc"] == row["Acc"]  # the same weights

    # Item 2: the OOD metrics the re-test did not compute fail, each named.
    done = run_module(REGRESSION, [logs, "--reference", reference], cwd=tmp_path, env=command_env)
    assert done.returncode == 1, failure(done)
    verdicts = _verdicts(done.stdout)
    assert set(verdicts) == PAPER_METRICS, done.stdout
    assert {m for m, v in verdicts.items() if v != "ok"} == {"AUPR", "AUROC", "FPR95"}
    assert verdicts["AUROC"] == "FAIL (missing from the run)"
    assert done.stdout.splitlines()[-1].startswith("3 of 13 metrics failed: AUPR (missing")
    assert "smoke test" not in done.stdout  # the reference row had the same budget
    assert "1 training run (seed 0) from 2 results.csv" in done.stdout
    assert "budget: ours max_epochs=1, limit_train_batches=2, trained_steps=2" in done.stdout
    done = run_module(
        REGRESSION,
        [logs, "--reference", reference, "--exclude", "AUPR", "AUROC", "FPR95"],
        cwd=tmp_path,
        env=command_env,
    )
    assert done.returncode == 0, failure(done)
    assert done.stdout.splitlines()[-1] == "0 of 10 metrics failed; excluded: AUPR, AUROC, FPR95"

    # Item 1: a NaN in the run fails, named, instead of leaving the comparison.
    broken = shutil.copytree(trained, tmp_path / "broken" / "version_0")
    results = broken / "results.csv"
    with results.open() as file:
        rows = list(csv.DictReader(file))
    rows[-1] |= {"test/cls/Acc": "nan", "test/cls/NLL": "nan"}
    rows[-1][ROW_CHECK_COLUMN] = row_check(len(rows), list(rows[0]), list(rows[-1].values()))
    with results.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    done = run_module(REGRESSION, [broken, "--reference", reference], cwd=tmp_path, env=command_env)
    assert done.returncode == 1, failure(done)
    verdicts = _verdicts(done.stdout)
    assert verdicts["Acc"] == verdicts["NLL"] == "FAIL (NaN in the run)"
    assert done.stdout.splitlines()[-1] == (
        "2 of 13 metrics failed: Acc (NaN in the run), NLL (NaN in the run)"
    )

    # Item 4: seeds required, the published protocol's budget, the table's aliases; and the
    # same check from a pytest test of a CI job.
    published = [
        "--published",
        "rn18",
        "--where",
        "dataset=C10",
        "arch=RN18",
        "method=sigmaN-Ens",
        "--min-seeds",
        "3",
    ]
    done = run_module(REGRESSION, [trained, *published], cwd=tmp_path, env=command_env)
    assert done.returncode == 1, failure(done)
    assert (
        "expected: published table 'rn18', row dataset=CIFAR-10, arch=ResNet-18, method=σN-Ens"
    ) in done.stdout
    assert "| expected max_epochs=75 (Packed-Ensembles protocol" in done.stdout
    assert "a smoke test, not a reproduction" in done.stdout
    assert done.stdout.splitlines()[-1] == "FAIL: 1 distinct seed averaged, --min-seeds 3 required"
    with pytest.raises(ReproductionError, match="NaN in the run"):
        check_reproduction(broken, "--reference", reference)
    assert "0 of 13 metrics failed" in check_reproduction(trained, "--reference", reference)
