r"""Member ownership of a σNorm-Ensemble, logged at the end of every validation epoch.

A member *owns* a feature (a channel of a σNorm layer) when its importance
:math:`\sigma(\gamma)` exceeds a threshold (0.5 in the paper); the ownership ``k`` of the
feature is the number of its owners, from ``0`` to ``M``. :class:`MemberOwnershipCallback`
records how the features split over ``k`` (each feature of each layer counted once) for all
σNorm layers and for the regularized ones, with the per-layer σNorm-cos, and draws the
paper's figures: the importance histograms (Figure 1, left), the importance embedding
coloured by ``k`` (appendix) and the ownership bar chart.

The embedding is the 2-D PCA (scikit-learn, exact SVD) of the pooled per-feature
``M``-dimensional importance vectors. PCA is linear and deterministic, and it keeps the
global geometry that ownership lives in: the features gather near the corners of
:math:`[0, 1]^M` and a linear map keeps those clusters and their distances, where t-SNE or
UMAP would be stochastic, slow on big backbones and distort distances between clusters. PCA
is fitted on every feature; only the plotted points are capped at ``max_embedding_points``,
chosen evenly spaced over the features in layer order (deterministic, proportional to each
layer's width).

Figures are bare :class:`matplotlib.figure.Figure` objects rendered by the Agg canvas
(TensorBoard's ``add_figure``, MLflow's ``log_figure``, ``savefig``): they never enter
pyplot, so the callback neither switches the user's backend nor leaves figures open to leak.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import torch
from lightning.pytorch import Callback, LightningModule, Trainer
from matplotlib import colormaps
from matplotlib.figure import Figure
from torch import Tensor
from torch_uncertainty.utils import get_logger_dir

from ..evaluation.diversity import (
    member_ownership,
    ownership_counts,
    ownership_fractions,
    pairwise_cosine,
)
from ..signorm.ensemble import SigmaNormEnsemble
from ..utils.checks import check_fraction, check_integer
from .figure_logging import log_figure

__all__ = ["MemberOwnershipCallback", "importance_embedding_figure", "importance_histogram_figure"]

CSV_FIELDS = ("epoch", "scope", "k", "count", "fraction")


class MemberOwnershipCallback(Callback):
    """Log the member-ownership structure of a σNorm-Ensemble after each validation epoch.

    At the end of every validation epoch (not the sanity check), for ``pl_module.model``:

    - scalars at step ``epoch``, to every logger and to ``trainer.callback_metrics``:
      ``ownership/signorm_cos/<layer>`` (mean pairwise cosine of the layer's member
      importances) and ``ownership/{all,regularized}/k=<k>`` (fraction of the scope's
      features owned by ``k`` members, ``k = 0..M``);
    - figures (``log_figures=True``) at step ``epoch``: ``ownership/importance_histogram``,
      ``ownership/importance_embedding`` and ``ownership/ownership_counts``
      (:func:`~.figure_logging.log_figure`): through ``add_figure`` for TensorBoard, as MLflow
      artifacts ``ownership/epoch=<e>/<name>.png``, and for any other logger as PNG files
      ``<dir>/ownership/epoch=<e>/<name>.png``;
    - ``<dir>/ownership.csv`` with columns ``epoch, scope, k, count, fraction``, one row
      per (epoch, scope, k). Rows are appended and the header is written once; an epoch
      seen again (a resumed run, ``trainer.validate``) replaces that epoch's rows.

    ``<dir>`` is ``dirpath``, else the first logger's run directory (for ``MLFlowLogger`` on a
    local store, the run's artifact folder), else the trainer's ``default_root_dir``. Files
    and figures are written on global rank zero only.

    Args:
        dirpath: Where ``ownership.csv`` (and PNG figures) go; defaults to the logger's.
        threshold: Importance above which a member owns a feature, in ``(0, 1)``.
        log_figures: Whether to draw and log the figures (the scalars and CSV always are).
        max_embedding_points: Most features plotted in the embedding, ``>= 2``.

    Example:
        >>> callback = MemberOwnershipCallback()
        >>> trainer = Trainer(callbacks=[callback], logger=TensorBoardLogger("logs"))
    """

    def __init__(
        self,
        dirpath: str | Path | None = None,
        threshold: float = 0.5,
        log_figures: bool = True,
        max_embedding_points: int = 4096,
    ) -> None:
        super().__init__()
        self.dirpath = Path(dirpath) if dirpath is not None else None
        self.threshold = check_fraction("threshold", threshold)
        self.log_figures = bool(log_figures)
        self.max_embedding_points = check_integer("max_embedding_points", max_embedding_points, 2)

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if trainer.sanity_checking:
            return
        model = getattr(pl_module, "model", None)
        if not isinstance(model, SigmaNormEnsemble):
            raise TypeError(
                f"MemberOwnershipCallback needs a routine whose .model is a SigmaNormEnsemble, "
                f"got {type(model).__name__} on {type(pl_module).__name__}."
            )
        epoch = trainer.current_epoch
        with torch.no_grad():
            layers = {
                name: layer.importance().detach().float().cpu()
                for name, layer in model.signorm_layers().items()
            }
        scopes = {"all": list(layers), "regularized": list(model.regularized_layer_names)}
        importances = {s: [layers[n] for n in names] for s, names in scopes.items() if names}
        counts = {s: ownership_counts(imps, self.threshold) for s, imps in importances.items()}

        metrics = {
            f"ownership/signorm_cos/{n}": float(pairwise_cosine(i)) for n, i in layers.items()
        }
        for scope, imps in importances.items():
            fractions = ownership_fractions(imps, self.threshold)
            metrics.update({f"ownership/{scope}/k={k}": float(f) for k, f in enumerate(fractions)})
        pl_module.log_dict(metrics, logger=False, sync_dist=True)  # for monitors; same on ranks
        if not trainer.is_global_zero:
            return
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=epoch)
        out_dir = self._output_dir(trainer)
        _write_csv(out_dir / "ownership.csv", epoch, counts)
        if self.log_figures:
            figures = {
                "importance_histogram": lambda: importance_histogram_figure(
                    importances, self.threshold
                ),
                "importance_embedding": lambda: importance_embedding_figure(
                    importances, model.num_estimators, self.threshold, self.max_embedding_points
                ),
                "ownership_counts": lambda: _counts_figure(counts),
            }
            for name, draw in figures.items():  # one figure alive at a time
                artifact = f"ownership/epoch={epoch}/{name}.png"
                log_figure(trainer.loggers, f"ownership/{name}", draw(), epoch, artifact, out_dir)

    def _output_dir(self, trainer: Trainer) -> Path:
        if self.dirpath is not None:
            return self.dirpath
        if trainer.logger is not None and (log_dir := get_logger_dir(trainer.logger)) is not None:
            return log_dir
        return Path(trainer.default_root_dir)


def importance_embedding_figure(
    importances: dict[str, list[Tensor]],
    num_members: int,
    threshold: float = 0.5,
    max_points: int = 4096,
) -> Figure:
    """2-D PCA of the pooled per-feature importance vectors, coloured by ownership k.

    ``importances`` maps a scope name (``"all"``, ``"regularized"``) to its layers' ``(M, F)``
    importances; at most ``max_points`` features per scope are drawn, evenly spaced.
    """
    figure = Figure(figsize=(5, 4.5 * len(importances)))
    axes = figure.subplots(len(importances), 1, squeeze=False)
    colours = colormaps["viridis"].resampled(num_members + 1)
    for ax, (scope, imps) in zip(axes[:, 0], importances.items(), strict=True):
        points = torch.cat(imps, dim=1).T.double()  # (F, M)
        owners = torch.cat([member_ownership(i, threshold) for i in imps])
        embedding = _pca_2d(points)
        keep = _even_subsample(len(points), max_points)
        for k in range(num_members + 1):
            chosen = keep[owners[keep] == k]
            if len(chosen):
                ax.scatter(*embedding[chosen].T.tolist(), s=6, color=colours(k), label=f"k={k}")
        shown = f"{len(keep)} of {len(points)}" if len(keep) < len(points) else len(points)
        ax.set(title=f"{scope} layers ({shown} features)", xlabel="PC 1", ylabel="PC 2")
        ax.legend(markerscale=2, fontsize="small")
    figure.tight_layout()
    return figure


def _pca_2d(points: Tensor) -> Tensor:
    """``(N, 2)`` PCA coordinates (scikit-learn's); missing components (M = 1, a single point)
    are zero."""
    embedding = torch.zeros(len(points), 2, dtype=torch.float64)
    components = min(2, *points.shape)
    if components > 0 and len(points) > 1:
        from sklearn.decomposition import PCA  # imported when a figure is drawn

        pca = PCA(n_components=components, svd_solver="full")
        embedding[:, :components] = torch.as_tensor(pca.fit_transform(points.tolist()))
    return embedding


def _even_subsample(total: int, cap: int) -> Tensor:
    """``min(total, cap)`` evenly spaced indices into ``range(total)``, deterministic."""
    if total <= cap:
        return torch.arange(total)
    return torch.linspace(0, total - 1, cap, dtype=torch.float64).round().long().unique()


def importance_histogram_figure(
    importances: dict[str, list[Tensor]], threshold: float = 0.5
) -> Figure:
    """Distribution of every σ(γ) value per scope (paper Figure 1, left), ``threshold`` marked."""
    figure = Figure(figsize=(5 * len(importances), 3.5))
    axes = figure.subplots(1, len(importances), squeeze=False)
    for ax, (scope, imps) in zip(axes[0], importances.items(), strict=True):
        values = torch.cat([i.flatten() for i in imps]).tolist()
        ax.hist(values, bins=torch.linspace(0, 1, 51).tolist(), color="tab:blue")
        ax.axvline(threshold, color="black", linestyle="--", linewidth=1)
        ax.set(
            title=f"{scope} layers",
            xlabel=r"importance $\sigma(\gamma)$",
            ylabel="count",
            xlim=(0, 1),
        )
    figure.tight_layout()
    return figure


def _counts_figure(counts: dict[str, Tensor]) -> Figure:
    """Fraction of features owned by k members, one bar per (k, scope)."""
    figure = Figure(figsize=(5, 3.5))
    ax = figure.subplots()
    num_k = len(next(iter(counts.values())))
    width = 0.8 / len(counts)
    for i, (scope, count) in enumerate(counts.items()):
        fractions = (count.double() / count.sum()).tolist()
        ax.bar(
            [k + (i - (len(counts) - 1) / 2) * width for k in range(num_k)],
            fractions,
            width,
            label=f"{scope} layers",
        )
    ax.set(
        xticks=list(range(num_k)),
        xlabel="ownership k (members with σ(γ) > threshold)",
        ylabel="fraction of features",
        ylim=(0, 1),
    )
    ax.legend()
    figure.tight_layout()
    return figure


def _write_csv(path: Path, epoch: int, counts: dict[str, Tensor]) -> None:
    """Append this epoch's rows; header once; an epoch already present is replaced."""
    rows = [
        {
            "epoch": epoch,
            "scope": scope,
            "k": k,
            "count": int(c),
            "fraction": f"{float(c) / float(count.sum()):.6f}",
        }
        for scope, count in counts.items()
        for k, c in enumerate(count)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    has_header = path.is_file() and path.stat().st_size > 0
    existing: list[dict] = []
    if has_header:
        with path.open(newline="") as file:
            existing = list(csv.DictReader(file))
    if any(row["epoch"] == str(epoch) for row in existing):
        rows = [row for row in existing if row["epoch"] != str(epoch)] + rows
        temporary = path.with_name(path.name + ".tmp")
        with temporary.open("w", newline="") as file:
            writer = csv.DictWriter(file, CSV_FIELDS)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(temporary, path)  # atomic: a crash never leaves half a file
        return
    with path.open("a", newline="") as file:
        writer = csv.DictWriter(file, CSV_FIELDS)
        if not has_header:
            writer.writeheader()
        writer.writerows(rows)
