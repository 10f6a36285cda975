"""Stop training at the first non-finite loss, naming the term that produced it.

σN-Ens optimises the task loss plus the diversity regularizer :math:`\\lambda \\mathcal{L}_{div}`.
When their sum turns NaN or infinite, knowing which term did it decides the fix (learning
rate, inputs, precision for the task loss; τ, λ or the scale logits for the regularizer), so
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

__all__ = ["check_finite_inputs", "check_finite_losses"]

#: What to look at when a term is not finite.
_HINTS = {
    "task_loss": "check the inputs and labels for NaN/inf, lower the learning rate, or train "
    "with bf16-mixed or 32 instead of 16-mixed",
    "diversity_loss": "check the σNorm scale logits for NaN/inf (a too large scale learning "
    "rate) and the regularizer's tau and diversity_strength",
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


def check_finite_inputs(inputs: Tensor | object, where: str) -> None:
    """Raise if floating-point ``inputs`` hold NaN or infinite values (one host sync).

    Evaluation metrics would otherwise fail later on non-finite scores, far from the data.

    Args:
        inputs: A batch's inputs; anything but a floating-point tensor is left alone.
        where: The batch, quoted in the error (``"test batch 3 of loader 1"``).

    Raises:
        ValueError: Naming the batch and the number of non-finite values.
    """
    if not isinstance(inputs, Tensor) or not inputs.is_floating_point():
        return
    bad = int((~torch.isfinite(inputs)).sum())
    if bad:
        raise ValueError(
            f"The inputs of {where} hold {bad} non-finite value(s) (NaN or inf) out of "
            f"{inputs.numel()}: check the dataset and its transforms."
        )
