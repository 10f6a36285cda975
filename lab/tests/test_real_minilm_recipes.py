"""The tweets_minilm_* recipes run through the command on the real packaged MiniLM and tweets."""

import csv
from pathlib import Path

import pytest

from signorm_lab.cli import cli_main

EXPERIMENTS = Path(__file__).parents[2] / "experiments"
# Fewer evaluation tweets than the recipes, so that a test takes seconds on 2 CPU cores.
SMALL_EVAL = [
    "--data.init_args.val_size=8",
    "--data.init_args.test_size=24",
    "--data.init_args.ood_size=24",
]


@pytest.mark.slow
def test_signorm_recipe_fits_tests_and_writes_accuracy_and_ood_auroc(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["torch-uncertainty"])
    recipe = EXPERIMENTS / "tweets_minilm_signorm.yaml"
    cli = cli_main(
        [
            "fit",
            "--config",
            str(recipe),
            "--trainer.max_steps=2",
            "--trainer.limit_train_batches=2",
            *SMALL_EVAL,
        ]
    )
    assert cli.trainer.global_step == 2
    (results,) = (tmp_path / "logs" / "tweets_minilm" / "signorm").rglob("results.csv")
    with results.open() as file:
        (row,) = list(csv.DictReader(file))
    assert 0 <= float(row["test/cls/Acc"]) <= 1 and 0 <= float(row["ood/AUROC"]) <= 1
    assert float(row["test/cplx/params"]) > 2e7  # the real 22.7 M-parameter MiniLM


@pytest.mark.slow
@pytest.mark.parametrize("method", ["single", "deep_ensembles", "lora_ensemble", "multi_head"])
def test_baseline_recipes_train_one_step(method, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["torch-uncertainty"])
    recipe = EXPERIMENTS / f"tweets_minilm_{method}.yaml"
    cli = cli_main(["fit", "--config", str(recipe), "--trainer.fast_dev_run=1", *SMALL_EVAL])
    assert cli.trainer.state.finished and cli.trainer.global_step == 1
    members = getattr(cli.routine.model, "num_estimators", 1)
    assert members == (1 if method == "single" else 4)
