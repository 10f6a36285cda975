r"""Per-member BatchNorm statistics in one native kernel, on batch-major ``(B·M, C, ...)`` rows.

The kernel of :class:`~torch_uncertainty_signorm.members.norm.MemberBatchNorm`, the
base of σBN and FiLM-Ensemble's BatchNorm. Inside the backbone, row ``b·M + m`` holds
sample ``b`` of member ``m`` (batch-major), so the contiguous activations ``(B·M, C, ...)``
are also a contiguous ``(B, M·C, ...)`` tensor whose channel ``m·C + c`` is channel ``c`` of
member ``m``. BatchNorm of that view, with the ``(M, C)`` running statistics and affine
flattened to ``(M·C,)``, computes every member's statistics, normalization, affine and
running-statistics update in one call of torch's fused kernel (and one in backward), for
any M: no loop over members, no concatenation.

Under DDP (:func:`~torch_uncertainty_signorm.members.distributed.convert_sync_member_norms`) the
same view goes through torch's synchronised batch-norm (on CUDA), so every member's statistics
are taken over the global batch.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from ..utils import _compat

__all__ = [
    "check_batch_statistics",
    "gather_member_moments",
    "member_batch_norm",
    "rows_result",
]


def check_batch_statistics(layer: nn.Module, x: Tensor) -> None:
    """Batch statistics need more than one value per channel and member.

    A last training batch of one sample per member hits this after a whole epoch, so the
    error names that batch size and the two ways out.
    """
    per_member = x.shape[0] // layer.num_estimators
    if x.numel() // (layer.num_estimators * x.shape[1]) > 1:
        return
    raise ValueError(
        f"{type(layer).__name__} needs more than 1 value per channel and member when training, "
        f"got input shape {tuple(x.shape)} with {layer.num_estimators} members: batch size "
        f"{per_member}. Such a batch is usually the last, incomplete one of an epoch (the "
        f"training set size modulo the batch size): choose a batch_size that leaves at least "
        f"{per_member + 1} samples in the last batch (with the torch-uncertainty command: "
        f"--data.init_args.batch_size=...); a datamodule of your own may instead drop that "
        f"batch (DataLoader(..., drop_last=True))."
    )


def _flat(tensor: Tensor | None, num_estimators: int) -> Tensor | None:
    """An ``(M, C)`` tensor as the view's ``(M·C,)`` channels; a shared ``(C,)`` repeated."""
    if tensor is None:
        return None
    return tensor.reshape(-1) if tensor.dim() == 2 else tensor.repeat(num_estimators)


def _momentum(layer: nn.Module) -> float:
    """The running-statistics factor of this step; counts the step, as torch's BatchNorm."""
    if not (layer.training and layer.track_running_stats):
        return 0.0 if layer.momentum is None else layer.momentum
    layer.num_batches_tracked.add_(1)
    if layer.momentum is None:  # cumulative average: the only host read, as in torch
        return 1.0 / float(layer.num_batches_tracked)
    return layer.momentum


def member_batch_norm(layer: nn.Module, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """BatchNorm of every member with its own statistics and affine, in one native call.

    Args:
        layer: The :class:`~torch_uncertainty_signorm.members.norm.MemberBatchNorm`
            (its ``num_estimators``, ``eps``, ``momentum``, ``track_running_stats``,
            ``training``, ``sync_statistics``, ``process_group`` and running statistics).
        x: Batch-major input ``(B·M, C, ...)``.
        weight: Members' scales ``(M, C)``.
        bias: Members' shifts ``(M, C)``, one shift ``(C,)`` for all, or ``None``.

    Returns:
        The normalized ``(B·M, C, ...)`` tensor; the ``(M, C)`` running statistics are
        updated in place (their flattened views are the kernel's buffers).
    """
    num_estimators = layer.num_estimators
    use_batch_stats = layer.training or not layer.track_running_stats
    if use_batch_stats:
        check_batch_statistics(layer, x)
    factor = _momentum(layer)
    view = x.reshape(x.shape[0] // num_estimators, num_estimators * x.shape[1], *x.shape[2:])
    stats = (
        (None, None)
        if layer.running_mean is None
        else (layer.running_mean.view(-1), layer.running_var.view(-1))
    )
    weight, bias = _flat(weight, num_estimators), _flat(bias, num_estimators)
    if layer.training and layer.sync_statistics:
        out = _synchronized(layer, view, weight, bias, stats, factor)
    else:
        out = F.batch_norm(view, *stats, weight, bias, use_batch_stats, factor, layer.eps)
    return rows_result(out, x.shape)


def rows_result(out: Tensor, shape: torch.Size) -> Tensor:
    """A norm layer's fresh output, computed on a member view, reshaped to its rows ``shape``.

    Same storage as a view, but autograd sees a tensor of its own: the backbone's in-place
    ops on a norm output (``out += shortcut``, ``relu_``) then stay plain in-place ops,
    where on a view autograd would rewrite the view's base (copies of the activation in
    backward), or refuse them outright on a custom autograd function's output.
    """
    return _compat.unsafe_view(out, shape)


def _world_size(group: Any) -> int:
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size(group)


def _synchronized(layer, view, weight, bias, stats, factor) -> Tensor:
    """Training BatchNorm of the ``(B, M·C, ...)`` view with statistics over all processes.

    On CUDA this is torch's own synchronised batch-norm (the function behind
    :class:`torch.nn.SyncBatchNorm`). torch has no CPU kernel for it (``batch_norm_stats``
    is CUDA-only), so on CPU (gloo) the moments are gathered here instead.
    """
    world_size = _world_size(layer.process_group)
    if world_size == 1:
        return F.batch_norm(view, *stats, weight, bias, True, factor, layer.eps)
    if view.is_cuda:
        group = layer.process_group or dist.group.WORLD
        return _compat.sync_batch_norm_function().apply(
            view, weight, bias, *stats, layer.eps, factor, group, world_size
        )
    return _gathered_batch_norm(layer, view, weight, bias, stats, factor)


def gather_member_moments(
    mean: Tensor, var: Tensor, count: int, group: Any = None
) -> tuple[Tensor, Tensor, Tensor]:
    r"""Combine every process's per-channel moments into those of the whole batch.

    With process :math:`r` holding :math:`n_r` values per channel, mean :math:`\mu_r` and
    biased variance :math:`v_r`, the batch of :math:`N = \sum_r n_r` values has

    .. math::
        \mu = \frac{1}{N} \sum_r n_r \mu_r, \qquad
        v = \frac{1}{N} \sum_r n_r \big(v_r + (\mu_r - \mu)^2\big),

    the pairwise combination of Chan et al. One differentiable ``all_gather`` exchanges the
    moments, so the gradient reaches every process's inputs, as in ``SyncBatchNorm``.

    Args:
        mean: This process's means (any shape, e.g. ``(M·C,)``).
        var: This process's biased variances, same shape.
        count: Values per channel in this process's batch (may differ by process).
        group: Process group; all processes when ``None``.

    Returns:
        ``(mean, var, total_count)``; the inputs when running alone.
    """
    if _world_size(group) == 1:
        return mean, var, torch.full_like(mean, count)
    from torch.distributed.nn.functional import all_gather

    packed = torch.stack([mean, var, torch.full_like(mean, count)])
    with warnings.catch_warnings():
        # Deprecated for torch's private functional collectives; still the public
        # differentiable gather, and its backward runs on gloo (CPU) as well as NCCL.
        warnings.simplefilter("ignore", FutureWarning)
        gathered = all_gather(packed, group=group)
    means, variances, counts = torch.stack(gathered).unbind(1)
    total = counts.sum(0)
    global_mean = (counts * means).sum(0) / total
    global_var = (counts * (variances + (means - global_mean).square())).sum(0) / total
    return global_mean, global_var, total


def _gathered_batch_norm(layer, view, weight, bias, stats, factor) -> Tensor:
    """CPU fallback of :func:`_synchronized`: gathered moments, then one affine."""
    channels = view.shape[1]
    dims = [0, *range(2, view.dim())]
    count = view.numel() // channels
    stats_input = view.float() if view.dtype in (torch.float16, torch.bfloat16) else view
    var, mean = torch.var_mean(stats_input, dim=dims, correction=0)
    mean, var, total = gather_member_moments(mean, var, count, layer.process_group)
    running_mean, running_var = stats
    if running_mean is not None:
        with torch.no_grad():
            unbiased = var * (total / (total - 1).clamp(min=1))
            running_mean.lerp_(mean.to(running_mean.dtype), factor)
            running_var.lerp_(unbiased.to(running_var.dtype), factor)
    gain = torch.rsqrt(var + layer.eps)
    if weight is not None:
        gain = gain * weight
    offset = -mean * gain if bias is None else bias - mean * gain
    shape = [1, channels] + [1] * (view.dim() - 2)
    return torch.addcmul(offset.to(view.dtype).view(shape), view, gain.to(view.dtype).view(shape))
