"""Parameter counts in the paper's convention: every parameter once, buffers excluded.

The paper's Params column counts the learnable tensors of the deployed model, each shared
tensor once: a Deep Ensemble counts its M copies, σN-Ens and FiLM-Ensemble count their
per-member normalization parameters and heads on top of the shared backbone, LoRA-Ensemble
counts the frozen backbone plus every member's adapters and head. Running statistics are
buffers, not parameters, and are not counted. ``trainable`` is the subset with
``requires_grad`` (for LoRA-Ensemble: adapters and heads only).
"""

from __future__ import annotations

from torch import nn

__all__ = ["parameter_counts"]


def parameter_counts(model: nn.Module) -> dict[str, int]:
    """Trainable and total parameter counts of ``model``, each shared parameter once.

    Args:
        model: Any module (an ensemble, a backbone, or a routine holding one).

    Returns:
        ``{"trainable": ..., "total": ...}`` in number of scalars.

    Raises:
        TypeError: If ``model`` is not an :class:`torch.nn.Module`.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"parameter_counts takes an nn.Module, got {type(model).__name__}.")
    params = list(model.parameters())  # nn.Module.parameters() yields shared tensors once
    return {
        "trainable": sum(p.numel() for p in params if p.requires_grad),
        "total": sum(p.numel() for p in params),
    }
