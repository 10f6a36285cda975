r"""The softmax-temperature diversity regularizer on σNorm importances (paper §3.2)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real
from typing import Any

import torch
from torch import Tensor, nn

from ..utils.checks import check_positive_number

__all__ = [
    "DEFAULT_DIVERSITY_STRENGTH",
    "DEFAULT_TAU",
    "MAX_DIVERSITY_STRENGTH",
    "TAU_RANGE",
    "ImportanceSharingPenalty",
    "check_penalty_settings",
    "check_tau",
    "sharing_penalty",
]

#: Temperatures where the penalty works in float32 on importances in (0, 1): below, shares
#: of importances 0.02 apart are already one-hot (the τ → 0 limit) and a lower τ only
#: scales the gradient by 1/τ; above, the gradient on the logits is under λ/(4τ²) and
#: vanishes in float32. ``tests/test_regularization.py`` checks both ends.
TAU_RANGE = (1e-3, 1e3)
#: The paper's from-scratch CNN setting (τ = 0.1, λ = 10⁻²): every factory's default.
DEFAULT_TAU, DEFAULT_DIVERSITY_STRENGTH = 0.1, 1e-2
#: Largest λ accepted, four orders of magnitude above the paper's sweep (10⁻⁴ to 10⁻¹): beyond
#: it the regularizer swamps the task loss, and towards 10³⁰ it overflows float32.
MAX_DIVERSITY_STRENGTH = 1e3


def sharing_penalty(importances: Tensor, tau: float | Tensor) -> Tensor:
    r"""Sum over features of :math:`\sum_m \log[\mathrm{softmax}_\tau(s_{\cdot, i})]_m`.

    .. math::
        \mathcal{L} = \sum_{i} \sum_{m=1}^{M} \log
        \frac{e^{s_{m,i}/\tau}}{\sum_{m'} e^{s_{m',i}/\tau}}
        = \sum_i \Big( \sum_m s_{m,i}/\tau - M \log \sum_{m'} e^{s_{m',i}/\tau} \Big)

    The softmax runs across the M members of one feature. Its gradient is
    :math:`\partial \mathcal{L} / \partial s_{j,i} = (1 - M p_{j,i}) / \tau`; minimising
    it drives each feature towards fewer owners, more sharply the lower :math:`\tau`. The
    log-sum-exp form is finite for any :math:`\tau > 0`; the penalty works in ``TAU_RANGE``.

    Args:
        importances: Importances :math:`s = \sigma(\gamma)`, shape ``(..., M, num_features)``
            (the features of all regularized layers concatenated; leading dims are summed).
        tau: Softmax temperature :math:`\tau > 0`, or a tensor broadcasting against
            ``importances`` (one temperature per leading index).

    Returns:
        A scalar (non-positive) tensor.
    """
    scaled = importances / tau
    num_members = importances.shape[-2]
    return (scaled.sum(dim=-2) - num_members * torch.logsumexp(scaled, dim=-2)).sum()


def check_tau(tau: Any) -> float:
    """``tau`` as a float if it is a number in :data:`TAU_RANGE`, else a ValueError whose message
    is the same for every bad value (0, a negative, infinity, a bool, 1e-4, 1e9)."""
    low, high = TAU_RANGE
    if (
        isinstance(tau, Real)
        and not isinstance(tau, bool)
        and math.isfinite(tau)
        and low <= tau <= high
    ):
        return float(tau)
    raise ValueError(
        f"tau={tau!r} is outside [{low:g}, {high:g}] (TAU_RANGE), where the diversity penalty "
        f"works (tau must be a finite number > 0, got {tau!r}, in that range): below, shares "
        f"are already one-hot and a lower tau only scales the gradient by 1/tau; above, the "
        f"gradient vanishes in float32. To switch the regularizer off, set diversity_strength=0."
    )


def check_penalty_settings(tau: float, diversity_strength: float) -> tuple[float, float]:
    """``(tau, diversity_strength)`` as floats if ``tau`` is a number in :data:`TAU_RANGE` and
    ``diversity_strength`` one in ``[0, MAX_DIVERSITY_STRENGTH]``, else ValueError."""
    tau_value = check_tau(tau)
    strength = check_positive_number("diversity_strength (lambda)", diversity_strength, True)
    if strength > MAX_DIVERSITY_STRENGTH:
        raise ValueError(
            f"diversity_strength (lambda)={diversity_strength!r} is above "
            f"{MAX_DIVERSITY_STRENGTH:g}: "
            f"the regularizer would swamp the task loss (the paper uses 1e-4 to 1e-1, "
            f"{DEFAULT_DIVERSITY_STRENGTH:g} by default)."
        )
    return tau_value, strength


class ImportanceSharingPenalty(nn.Module):
    r"""Penalises members sharing a feature's importance: :math:`\lambda \sum_{\ell \in
    \mathcal{R}} \mathcal{L}(\sigma(\gamma^\ell), \tau)`, computed in one pass over layers.

    Args:
        tau: Softmax temperature :math:`\tau` in ``TAU_RANGE``, the user's control of the
            diversity equilibrium: low τ drives features to single owners, high τ lets them
            be shared.
        diversity_strength: Regularization strength :math:`\lambda` in
            ``[0, MAX_DIVERSITY_STRENGTH]`` (0 switches it off), the name the wrapper, its config
            and the recipes give it.

    Raises:
        ValueError: If ``tau`` is no number in ``TAU_RANGE`` or ``diversity_strength`` no number in
            ``[0, MAX_DIVERSITY_STRENGTH]``.
    """

    def __init__(
        self, tau: float = DEFAULT_TAU, diversity_strength: float = DEFAULT_DIVERSITY_STRENGTH
    ) -> None:
        super().__init__()
        self._tau, self.diversity_strength = check_penalty_settings(tau, diversity_strength)

    @property
    def tau(self) -> float:
        """The temperature the penalty uses now: the one place τ lives during a run (a config's
        ``tau`` is the value it started from). Changed through :meth:`set_tau` only."""
        return self._tau

    def set_tau(self, tau: float) -> None:
        """Use the temperature ``tau`` from now on (what the τ controller does each step).

        Raises:
            ValueError: If ``tau`` is no number in :data:`TAU_RANGE`.
        """
        self._tau = check_tau(tau)

    def forward(self, importances: Sequence[Tensor] | Tensor) -> Tensor:
        """λ · penalty of ``(M, F_ℓ)`` importances, concatenated along features."""
        stacked = importances if isinstance(importances, Tensor) else torch.cat(importances, 1)
        return self.diversity_strength * sharing_penalty(stacked, self.tau)

    def extra_repr(self) -> str:
        return f"tau={self._tau}, diversity_strength={self.diversity_strength}"
