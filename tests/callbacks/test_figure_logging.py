"""log_figure: a figure reaches TensorBoard at its step, MLflow as a run artifact, else a file.

MLflow is an optional extra of the method (``[mlflow]``) and TensorBoard a logger users add:
each test is skipped where its logger is not installed (the ``test`` extra installs both).
"""

import importlib.util

import pytest
from lightning.pytorch.loggers import MLFlowLogger, TensorBoardLogger
from matplotlib.figure import Figure

from torch_uncertainty_signorm.callbacks.figure_logging import log_figure

PNG = b"\x89PNG\r\n\x1a\n"
ARTIFACT = "ownership/epoch=3/counts.png"


def _figure():
    figure = Figure(figsize=(2, 2))
    figure.subplots().plot([0, 1], [1, 0])
    return figure


@pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None, reason="no tensorboard")
def test_tensorboard_gets_the_figure_at_its_step_and_no_file_is_written(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorBoardLogger(tmp_path / "tb")
    log_figure([logger], "ownership/counts", _figure(), 3, ARTIFACT, tmp_path / "run")
    logger.save()
    events = EventAccumulator(logger.log_dir, size_guidance={"images": 0})
    events.Reload()
    assert [e.step for e in events.Images("ownership/counts")] == [3]
    assert not (tmp_path / "run").exists()


def test_mlflow_gets_the_figure_as_an_artifact_of_its_run_and_no_file_is_written(
    tmp_path, monkeypatch
):
    pytest.importorskip("mlflow", reason="MLflow is the optional [mlflow] extra")
    # MLflow 3 refuses a file store (a local folder) unless told it is wanted.
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    logger = MLFlowLogger(experiment_name="figures", tracking_uri=f"file:{tmp_path / 'mlruns'}")
    log_figure([logger], "ownership/counts", _figure(), 3, ARTIFACT, tmp_path / "run")
    local = logger.experiment.download_artifacts(logger.run_id, ARTIFACT, str(tmp_path))
    with open(local, "rb") as file:
        assert file.read(8) == PNG
    assert not (tmp_path / "run").exists()


def test_without_a_logger_the_figure_is_a_png_file_in_the_folder(tmp_path):
    log_figure([], "ownership/counts", _figure(), 3, ARTIFACT, tmp_path / "run")
    assert (tmp_path / "run" / ARTIFACT).read_bytes()[:8] == PNG
