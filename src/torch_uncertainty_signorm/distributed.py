r"""Multi-process training of σN-Ens: σBN statistics synchronised across processes.

Lightning's ``sync_batchnorm=True`` installs :class:`~lightning.pytorch.plugins.TorchSyncBatchNorm`,
which calls :meth:`torch.nn.SyncBatchNorm.convert_sync_batchnorm`. That function replaces every
``torch.nn.modules.batchnorm._BatchNorm``; σBN layers are not ``_BatchNorm`` subclasses (they hold
M sets of statistics), so it leaves them as they are and each process would normalise with its
own share of the batch. :class:`SigmaNormSyncBatchNorm` converts plain BatchNorm exactly as
Lightning does and switches every σBN layer to synchronised statistics: each member's mean and
variance are combined over all processes, with gradients flowing through the combination as in
``SyncBatchNorm``. The ``torch-uncertainty`` command installs it whenever the recipe sets
``trainer.sync_batchnorm: true``; in Python::

    Trainer(strategy="ddp", devices=4, sync_batchnorm=True, plugins=[SigmaNormSyncBatchNorm()])
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist
from lightning.pytorch.plugins.layer_sync import LayerSync, TorchSyncBatchNorm
from torch import Tensor, nn

from .layers.signorm import _SigmaBatchNorm

__all__ = [
    "SigmaNormSyncBatchNorm",
    "convert_sync_signorm",
    "gather_member_moments",
    "revert_sync_signorm",
    "signorm_sync_batchnorm_plugins",
    "synchronized_batch_norm",
]


def _world_size(group: Any) -> int:
    if not (dist.is_available() and dist.is_initialized()):
        return 1
    return dist.get_world_size(group)


def gather_member_moments(
    mean: Tensor, var: Tensor, count: int, group: Any = None
) -> tuple[Tensor, Tensor, Tensor]:
    r"""Combine every process's per-member moments into those of the whole batch.

    With process :math:`r` holding :math:`n_r` values per channel and member, mean
    :math:`\mu_r` and biased variance :math:`v_r`, the batch of :math:`N = \sum_r n_r` values has

    .. math::
        \mu = \frac{1}{N} \sum_r n_r \mu_r, \qquad
        v = \frac{1}{N} \sum_r n_r \big(v_r + (\mu_r - \mu)^2\big),

    the pairwise combination of Chan et al., free of the cancellation of
    :math:`E[x^2] - \mu^2`. One differentiable ``all_gather`` exchanges the moments, so the
    gradient reaches every process's inputs, as in :class:`torch.nn.SyncBatchNorm`.

    Args:
        mean: This process's per-member means, shape ``(M, C)``.
        var: This process's per-member biased variances, shape ``(M, C)``.
        count: Values per channel and member in this process's batch (may differ by process).
        group: Process group; all processes when ``None``.

    Returns:
        ``(mean, var, total_count)``, each ``(M, C)``; the inputs when running alone.
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


def synchronized_batch_norm(layer: _SigmaBatchNorm, x: Tensor) -> Tensor:
    """Training forward of ``layer`` with each member's statistics taken over all processes.

    Called by σBN's ``forward`` in training mode when ``layer.sync_statistics`` is set. The
    running statistics are updated with the global moments (unbiased variance over the
    global count), so every process holds identical buffers.
    """
    members = layer.split_members(x)  # (M, B, C, *)
    reduce_dims = [1, *range(3, members.dim())]
    count = members.numel() // (layer.num_estimators * layer.num_features)
    if count < 1:
        raise ValueError(
            f"{type(layer).__name__} received an empty batch (input shape {tuple(x.shape)})."
        )
    stats_input = members.float() if members.dtype in (torch.float16, torch.bfloat16) else members
    var, mean = torch.var_mean(stats_input, dim=reduce_dims, correction=0)
    mean, var, total = gather_member_moments(mean, var, count, layer.process_group)
    if layer.track_running_stats:
        with torch.no_grad():
            layer.num_batches_tracked.add_(1)
            factor = layer.momentum
            if factor is None:  # cumulative moving average, as torch's BatchNorm
                factor = 1.0 / float(layer.num_batches_tracked)
            unbiased = var * (total / (total - 1).clamp(min=1))
            layer.running_mean.lerp_(mean.to(layer.running_mean.dtype), factor)
            layer.running_var.lerp_(unbiased.to(layer.running_var.dtype), factor)
    gain = layer.member_scale() * torch.rsqrt(var + layer.eps)
    offset = -mean * gain
    if layer.shift is not None:
        offset = offset + layer.shift
    shape = [layer.num_estimators, 1, layer.num_features] + [1] * (members.dim() - 3)
    out = torch.addcmul(offset.to(x.dtype).view(shape), members, gain.to(x.dtype).view(shape))
    return out.flatten(0, 1)


def convert_sync_signorm(module: nn.Module, process_group: Any = None) -> nn.Module:
    """Switch every σBN layer of ``module`` to synchronised statistics, in place.

    Unlike :meth:`torch.nn.SyncBatchNorm.convert_sync_batchnorm`, no module is replaced: the
    layers keep their parameters, buffers and hooks (the ensemble's member expansion is a hook
    on a σBN layer of ResNets), and their ``state_dict`` is unchanged.

    Args:
        module: Any module holding σBN layers.
        process_group: The group to synchronise over; all processes when ``None``.

    Returns:
        ``module``.
    """
    for layer in module.modules():
        if isinstance(layer, _SigmaBatchNorm):
            layer.sync_statistics = True
            layer.process_group = process_group
    return module


def revert_sync_signorm(module: nn.Module) -> nn.Module:
    """Undo :func:`convert_sync_signorm`: every σBN layer uses its process's batch again."""
    for layer in module.modules():
        if isinstance(layer, _SigmaBatchNorm):
            layer.sync_statistics = False
            layer.process_group = None
    return module


class SigmaNormSyncBatchNorm(TorchSyncBatchNorm):
    """Lightning layer-sync plugin: ``SyncBatchNorm`` for BatchNorm, synchronised σBN for σBN.

    A subclass of Lightning's :class:`~lightning.pytorch.plugins.TorchSyncBatchNorm`, so it is
    accepted together with ``Trainer(sync_batchnorm=True)``. Lightning applies it when fitting
    with a multi-process strategy (DDP, FSDP) and reverts it at the end of ``fit``.

    Args:
        process_group: The group to synchronise over; all processes when ``None``.
    """

    def __init__(self, process_group: Any = None) -> None:
        self.process_group = process_group

    def apply(self, model: nn.Module) -> nn.Module:
        convert_sync_signorm(model, self.process_group)
        return nn.SyncBatchNorm.convert_sync_batchnorm(model, self.process_group)

    def revert(self, model: nn.Module) -> nn.Module:
        return super().revert(revert_sync_signorm(model))


def signorm_sync_batchnorm_plugins(trainer_config: Mapping[str, Any]) -> list | None:
    """The ``plugins`` a trainer built from ``trainer_config`` needs for σNorm-aware syncing.

    With ``sync_batchnorm: true`` and no layer-sync plugin of the user's, the configured
    plugins plus :class:`SigmaNormSyncBatchNorm`; otherwise ``None`` (leave them as they are).
    """
    if not trainer_config.get("sync_batchnorm"):
        return None
    plugins = trainer_config.get("plugins") or []
    plugins = list(plugins) if isinstance(plugins, (list, tuple)) else [plugins]
    if any(isinstance(plugin, LayerSync) for plugin in plugins):
        return None
    return [*plugins, SigmaNormSyncBatchNorm()]
