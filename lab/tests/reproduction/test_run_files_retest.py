"""A finished run tested again into its own folder, as the comparison prints it (``test
--ckpt_path <best> --trainer.logger.init_args.version=N``), keeps a whole ``results.csv``: the
tests' rows under the union of their columns, each with its check, read by the regression
check."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from signorm_lab.cli import cli_main
from signorm_lab.evaluation.results_csv import check_test_rows
from signorm_lab.reproduction import regression
from signorm_lab.reproduction.runs import read_results

RECIPE = Path(__file__).parents[3] / "experiments" / "digits_signorm.yaml"
TINY = (
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=2",
    "--trainer.limit_val_batches=1",
    "--trainer.limit_test_batches=1",
    "--trainer.enable_progress_bar=false",
)


@pytest.mark.slow
def test_a_run_tested_twice_more_keeps_a_whole_results_csv(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["torch-uncertainty"])
    cli_main(["fit", "--config", str(RECIPE), *TINY])  # fit, then its test (eval_after_fit)
    (version,) = (tmp_path / "logs").rglob("version_0")
    (best,) = (version / "checkpoints").glob("epoch=*.ckpt")
    again = ["test", "--config", str(RECIPE), *TINY, f"--ckpt_path={best}"]
    cli_main([*again, "--trainer.logger.init_args.version=0"])  # the printed command
    cli_main([*again, "--trainer.logger.init_args.version=0", "--data.init_args.eval_ood=false"])
    header, *rows = list(csv.reader((version / "results.csv").open()))
    assert len(rows) == 3 and {len(row) for row in rows} == {len(header)}
    check_test_rows(version / "results.csv")
    assert rows[0][header.index("ood/AUROC")] and not rows[2][header.index("ood/AUROC")]
    assert read_results(version / "results.csv")["test/cls/Acc"] >= 0
    reference = tmp_path / "ref.csv"
    reference.write_text("method,Acc\nref,50.0\n")
    capsys.readouterr()
    regression.main([str(version), "--reference", str(reference), "--tol", "Acc=100"])
    assert f"{version / 'results.csv'} holds 3 result rows" in capsys.readouterr().out
