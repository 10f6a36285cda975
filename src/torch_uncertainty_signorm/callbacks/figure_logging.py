"""A matplotlib figure logged to every logger of a run, whichever logger that is.

TensorBoard takes it with ``add_figure`` at a step, MLflow as an artifact of the run (a local
store or a server alike); a logger that takes neither (``CSVLogger``, none at all) gets a PNG
file in the run's folder instead, so a figure is never lost to the choice of logger.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lightning.pytorch.loggers import Logger, MLFlowLogger
from matplotlib.figure import Figure
from torch_uncertainty.utils.logging import log_figure as tu_log_figure

__all__ = ["log_figure"]


def log_figure(
    loggers: Sequence[Logger], tag: str, figure: Figure, step: int, artifact: str, folder: Path
) -> None:
    """Log ``figure`` to each of ``loggers``: TensorBoard's ``tag`` at ``step``; MLflow's run
    artifact ``artifact`` (a relative ``.png`` path); and ``folder / artifact`` when a logger
    takes neither or there is no logger. The figure is left open for the caller to drop."""
    to_file = not loggers
    for logger in loggers:
        if isinstance(logger, MLFlowLogger):  # TorchUncertainty's: the artifact ``<tag>.png``
            tu_log_figure(logger, artifact.removesuffix(".png"), figure)
        elif hasattr(logger.experiment, "add_figure"):  # at ``step``, left open: not TU's
            logger.experiment.add_figure(tag, figure, global_step=step, close=False)
        else:
            to_file = True
    if to_file:
        path = folder / artifact
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=100)
