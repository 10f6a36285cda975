"""Stop training at the first non-finite loss, naming the term that produced it.

σN-Ens optimises the task loss plus the diversity regulariser :math:`\\lambda \\mathcal{L}_{div}`.
When their sum turns NaN or infinite, knowing which term did it decides the fix (learning
rate, inputs, precision for the task loss; τ, λ or the scale logits for the regulariser), so
:func:`check_finite_losses` raises a :class:`FloatingPointError` that names it, before the
optimiser step would spread it into the weights.

Cost: the terms are stacked and tested on the device, then read back once, which is one
host synchronisation per training step (on a GPU it keeps the host from queuing the next
step's kernels ahead, which Lightning's progress bar already prevents on the steps it
refreshes).
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["check_finite_losses"]

#: What to look at when a term is not finite.
_HINTS = {
    "task_loss": "check the inputs and labels for NaN/inf, lower the learning rate, or train "
    "with bf16-mixed or 32 instead of 16-mixed",
    "diversity_loss": "check the σNorm scale logits for NaN/inf (a too large scale learning "
    "rate) and the regulariser's tau and diversity_strength",
}


def check_finite_losses(step: int, **terms: Tensor) -> None:
    """Raise if any loss term is NaN or infinite.

    Args:
        step: The global step, quoted in the error.
        **terms: Scalar loss terms by name, e.g. ``task_loss=..., diversity_loss=...``.

    Raises:
        FloatingPointError: Naming every non-finite term with its value and what to check.
    """
    values = torch.stack([term.detach().float().reshape(()) for term in terms.values()])
    finite = torch.isfinite(values)
    if bool(finite.all()):  # the one host synchronisation
        return
    pairs = zip(terms, values.tolist(), strict=True)
    report = ", ".join(f"{name} = {value:.6g}" for name, value in pairs)
    bad = [name for name, ok in zip(terms, finite.tolist(), strict=True) if not ok]
    hints = "; ".join(f"{name}: {_HINTS.get(name, 'check how it is computed')}" for name in bad)
    raise FloatingPointError(
        f"Non-finite training loss at step {step}, produced by the {' and the '.join(bad)} "
        f"({report}). To fix it, {hints}."
    )
