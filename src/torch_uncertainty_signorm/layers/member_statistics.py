"""Per-member BatchNorm statistics on member-major ``(M·B, C, ...)`` batches.

Shared by σBN and FiLM-Ensemble's BatchNorm: both keep one set of running statistics per
member in ``(M, C)`` buffers and normalise member m's contiguous row block with torch's fused
``batch_norm`` kernel, which updates row ``m`` of the buffers exactly as
:class:`torch.nn.BatchNorm2d` updates its own.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "check_batch_statistics",
    "copy_member_statistics",
    "init_member_statistics",
    "member_batch_norm",
]


def init_member_statistics(
    layer: nn.Module,
    num_estimators: int,
    num_features: int,
    eps: float,
    momentum: float | None,
    track_running_stats: bool,
    device: torch.device | None = None,
    dtype: torch.dtype | None = None,
) -> None:
    """Set BatchNorm's ``eps``, ``momentum``, ``track_running_stats`` on ``layer`` and
    register ``running_mean``/``running_var`` ``(M, C)`` (on ``device``, in ``dtype``) and
    ``num_batches_tracked`` (``None`` buffers when ``track_running_stats`` is off, as torch's
    BatchNorm does)."""
    layer.eps = eps
    layer.momentum = momentum
    layer.track_running_stats = track_running_stats
    if not track_running_stats:
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            layer.register_buffer(name, None)
        return
    shape = (num_estimators, num_features)
    layer.register_buffer("running_mean", torch.zeros(shape, device=device, dtype=dtype))
    layer.register_buffer("running_var", torch.ones(shape, device=device, dtype=dtype))
    layer.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device))


@torch.no_grad()
def copy_member_statistics(layer: nn.Module, source: nn.Module) -> None:
    """Give every member the running statistics of the plain BatchNorm ``source``."""
    if layer.track_running_stats and getattr(source, "running_mean", None) is not None:
        layer.running_mean.copy_(source.running_mean.expand_as(layer.running_mean))
        layer.running_var.copy_(source.running_var.expand_as(layer.running_var))
        layer.num_batches_tracked.copy_(source.num_batches_tracked)


def check_batch_statistics(layer: nn.Module, x: Tensor) -> None:
    """Batch statistics need more than one value per channel in each member's row block.

    A last training batch of one sample per member hits this after a whole epoch, so the
    error names that batch size and the two ways out.
    """
    per_member = x.shape[0] // layer.num_estimators
    if x.numel() // (layer.num_estimators * x.shape[1]) > 1:
        return
    raise ValueError(
        f"{type(layer).__name__} needs more than 1 value per channel and member when training, "
        f"got input shape {tuple(x.shape)} with {layer.num_estimators} members: batch size "
        f"{per_member}. Such a batch is usually the last, incomplete one of an epoch: pass "
        f"drop_last=True to the training DataLoader, or choose a batch_size that leaves at "
        f"least {per_member + 1} samples in the last batch."
    )


def member_batch_norm(
    layer: nn.Module, x: Tensor, weight: Tensor, bias: Tensor | None
) -> Tensor:
    """BatchNorm of each member's row block with its own statistics and affine.

    Args:
        layer: Holds ``num_estimators``, ``eps``, ``momentum``, ``track_running_stats``,
            ``training`` and the buffers of :func:`init_member_statistics`.
        x: Member-major input ``(M·B, C, ...)``.
        weight: Members' scales ``(M, C)``.
        bias: Members' shifts ``(M, C)``, one shift ``(C,)`` for all, or ``None``.

    Returns:
        The normalised ``(M·B, C, ...)`` tensor. Running statistics are updated on the device;
        the only host read is the cumulative average (``momentum=None``), as in torch.
    """
    use_batch_stats = layer.training or not layer.track_running_stats
    if use_batch_stats:
        check_batch_statistics(layer, x)
    update_stats = layer.training and layer.track_running_stats
    if update_stats:
        layer.num_batches_tracked.add_(1)
    if update_stats and layer.momentum is None:
        factor = 1.0 / float(layer.num_batches_tracked)  # cumulative average, as torch's BN
    else:
        factor = 0.0 if layer.momentum is None else layer.momentum
    outputs = []
    for m, x_m in enumerate(x.unflatten(0, (layer.num_estimators, -1)).unbind(0)):
        stats = (None, None) if layer.running_mean is None else (
            layer.running_mean[m], layer.running_var[m]
        )
        bias_m = bias[m] if bias is not None and bias.dim() == 2 else bias
        outputs.append(
            F.batch_norm(x_m, *stats, weight[m], bias_m, use_batch_stats, factor, layer.eps)
        )
    return torch.cat(outputs)
