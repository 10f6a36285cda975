r"""Diversity measures: from the weights (σNorm-cos, ownership) and from member outputs.

The weight-space measures (:func:`signorm_cosine`, :func:`ownership_counts`,
:func:`ownership_fractions`) take the model itself (anything with ``importances()``) or its
importances, and return values without a graph: ``float(signorm_cosine(model))`` just works.
Output-space measures take member probabilities ``(M, B, C)``; from TorchUncertainty's
member-major logits ``(M·B, C)`` use
:func:`~torch_uncertainty_signorm.evaluation.prediction.member_probabilities`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "geometric_ambiguity",
    "jensen_gap",
    "layer_importances",
    "member_ownership",
    "mutual_information",
    "ownership_counts",
    "ownership_fractions",
    "pairwise_cosine",
    "signorm_cosine",
]


def pairwise_cosine(importance: Tensor) -> Tensor:
    r"""Mean cosine over member pairs :math:`i < j` of one layer's ``(..., M, F)`` importances.

    A single member is identical to itself: ``M = 1`` gives 1. Leading dims are kept. Computed
    in float32 at least, outside autocast: a bf16 product resolves cosines only to about 0.004,
    coarser than the 0.999 at which members count as one model.
    """
    num_members = importance.shape[-2]
    if num_members == 1:
        return importance.new_ones(importance.shape[:-2])
    with torch.autocast(importance.device.type, enabled=False):
        unit = F.normalize(
            importance.to(torch.promote_types(importance.dtype, torch.float32)), dim=-1
        )
        cosines = unit @ unit.transpose(-1, -2)
    i, j = torch.triu_indices(num_members, num_members, offset=1, device=importance.device)
    return cosines[..., i, j].mean(dim=-1)


def layer_importances(source: Any, name: str = "signorm_cosine") -> list[Tensor]:
    """The ``(M, F_ℓ)`` importances of each layer, detached: ``source.importances()`` for a
    model (a ``SigmaNormEnsemble``, anything with ``importances()``), else ``source`` itself (a
    sequence of such tensors, or one)."""
    importances = (
        source.importances() if callable(getattr(source, "importances", None)) else (source)
    )
    if isinstance(importances, Tensor):
        importances = [importances]
    if not isinstance(importances, Sequence) or not all(
        isinstance(imp, Tensor) and imp.dim() >= 2 for imp in importances
    ):
        raise TypeError(
            f"{name} takes a σN-Ens model (anything with importances()) or its importances "
            f"(a list of (M, F) tensors, model.importances()), got {type(source).__name__}."
        )
    if len(importances) == 0:
        raise ValueError(f"{name} needs at least one layer's importances, got none.")
    return [imp.detach() for imp in importances]


def signorm_cosine(model_or_importances: Any) -> Tensor:
    r"""σNorm-cos: :math:`\operatorname{mean}_{\ell, i<j} \cos(\sigma(\gamma^\ell_i),
    \sigma(\gamma^\ell_j))` over the layers' ``(M, F_ℓ)`` importances.

    Parameter-space diversity, from the weights alone: 1 means identical members. Takes the
    model (all its σNorm layers; ``model.importances(regularized_only=True)`` for the
    regularized ones) or the importances; returns a 0-dim tensor without a graph (a measure,
    not a loss: ``float()`` of it is the number).
    """
    importances = layer_importances(model_or_importances)
    return torch.stack([pairwise_cosine(imp) for imp in importances]).mean()


def member_ownership(importance: Tensor, threshold: float = 0.5) -> Tensor:
    """Ownership k per feature: how many members have importance above ``threshold``.

    Args:
        importance: ``(M, F)`` importances σ(γ).
        threshold: Importance above which a member owns a feature (paper: 0.5).

    Returns:
        ``(F,)`` integer tensor with values in ``0..M``.
    """
    return (importance > threshold).sum(dim=0)


def ownership_counts(model_or_importances: Any, threshold: float = 0.5) -> Tensor:
    """Number of features owned by k = 0..M members, over all layers of a model or of the given
    importances, shape (M+1,)."""
    importances = layer_importances(model_or_importances, "ownership_counts")
    num_members = importances[0].shape[0]
    owners = torch.cat([member_ownership(imp, threshold) for imp in importances])
    return torch.bincount(owners, minlength=num_members + 1)


def ownership_fractions(model_or_importances: Any, threshold: float = 0.5) -> Tensor:
    """Fraction of features owned by k = 0..M members over a model's layers or the given
    importances, float64 (M+1,)."""
    counts = ownership_counts(model_or_importances, threshold).double()
    return counts / counts.sum()


def _log(probs: Tensor) -> Tensor:
    return probs.clamp_min(torch.finfo(probs.dtype).tiny).log()


def _entropy(probs: Tensor) -> Tensor:
    return -(probs * _log(probs)).sum(dim=-1)


def jensen_gap(probs: Tensor, targets: Tensor) -> Tensor:
    r"""Jensen gap per input: :math:`\frac1M\sum_m \mathrm{CE}(y, q_m) - \mathrm{CE}(y, \bar q)`.

    The diversity term of the bias-variance-diversity decomposition under the
    arithmetic-mean combiner; non-negative, zero when members agree.

    Args:
        probs: Member probabilities ``(M, B, C)``.
        targets: Class indices ``(B,)``.
    """
    index = targets.view(1, -1, 1).expand(probs.shape[0], -1, 1)
    member_nll = -_log(probs.gather(-1, index)).squeeze(-1).mean(dim=0)
    mean_nll = -_log(probs.mean(dim=0).gather(-1, targets.view(-1, 1))).squeeze(-1)
    return member_nll - mean_nll


def mutual_information(probs: Tensor) -> Tensor:
    r"""Modulation uncertainty :math:`U_{mod}(x) = I[Y; M \mid x] = H[\bar q] - \frac1M
    \sum_m H[q_m]` per input, for member probabilities ``(M, B, C)``."""
    return _entropy(probs.mean(dim=0)) - _entropy(probs).mean(dim=0)


def geometric_ambiguity(probs: Tensor) -> Tensor:
    r"""Ambiguity under the normalized geometric-mean combiner, per input.

    With :math:`q^* \propto \exp(\frac1M \sum_m \log q_m)`, this is
    :math:`\frac1M \sum_m \mathrm{KL}(q^* \,\|\, q_m) = -\log \sum_c \exp(\frac1M \sum_m
    \log q_m(c))`, the cross-entropy's diversity term; label-free and non-negative.
    """
    return -torch.logsumexp(_log(probs).mean(dim=0), dim=-1)
