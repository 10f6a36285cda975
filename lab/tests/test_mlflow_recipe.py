"""The digits recipe logged to MLflow (a local store) instead of TensorBoard: each run's files
and the ownership figures land in that run's artifacts. MLflow is the optional [mlflow] extra."""

import csv
import os
from pathlib import Path

import pytest

from fixtures.cifar_files import run_command

RECIPE = Path(__file__).parents[2] / "experiments" / "digits_signorm.yaml"
FIGURES = {"importance_histogram.png", "importance_embedding.png", "ownership_counts.png"}


def test_digits_recipe_under_mlflow_logs_the_ownership_figures_and_csvs_as_run_artifacts(
    tmp_path, monkeypatch
):
    mlflow = pytest.importorskip("mlflow", reason="MLflow is the optional [mlflow] extra")
    store = f"file:{tmp_path / 'mlruns'}"
    # MLflow 3 refuses a file store (a local folder) unless told it is wanted: in the run and
    # in this test's client.
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = run_command(
        [
            "fit",
            "--config",
            RECIPE,
            "--trainer.enable_progress_bar=false",
            "--trainer.max_epochs=1",
            "--trainer.limit_train_batches=2",
            "--trainer.limit_val_batches=1",
            "--trainer.limit_test_batches=1",
            "--trainer.logger=lightning.pytorch.loggers.MLFlowLogger",
            f"--trainer.logger.init_args.save_dir={tmp_path / 'mlruns'}",  # the store
            "--trainer.logger.init_args.experiment_name=digits",
        ],
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    client = mlflow.MlflowClient(store)
    (run,) = client.search_runs([client.get_experiment_by_name("digits").experiment_id])
    run_id = run.info.run_id

    def artifacts(folder=None):
        return {Path(a.path).name for a in client.list_artifacts(run_id, folder)}

    assert artifacts("ownership/epoch=0") == FIGURES
    # The run's own files beside the figures, none in the store's root that runs share.
    assert {"ownership.csv", "results.csv", "config.yaml"} <= artifacts()
    assert not (tmp_path / "mlruns" / "config.yaml").exists()
    ownership = client.download_artifacts(run_id, "ownership.csv", str(tmp_path))
    with open(ownership, newline="") as file:
        assert {(row["epoch"], row["scope"]) for row in csv.DictReader(file)} == {
            ("0", "all"),
            ("0", "regularized"),
        }
    assert "ownership/all/k1" in run.data.metrics  # MLflow's name for ownership/all/k=1
