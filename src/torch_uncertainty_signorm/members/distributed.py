r"""Multi-process training of σN-Ens and FiLM-Ensemble: per-member BatchNorm statistics
synchronised across processes.

Lightning's ``sync_batchnorm=True`` installs :class:`~lightning.pytorch.plugins.TorchSyncBatchNorm`,
which calls :meth:`torch.nn.SyncBatchNorm.convert_sync_batchnorm`. That function replaces every
``torch.nn.modules.batchnorm._BatchNorm``; σBN and FiLM's BatchNorm are not ``_BatchNorm``
subclasses (they hold M sets of statistics), so it leaves them as they are and each process
would normalize with its own share of the batch. :class:`MemberSyncBatchNorm` converts plain
BatchNorm exactly as Lightning does and switches every per-member BatchNorm
(:class:`~torch_uncertainty_signorm.members.norm.MemberBatchNorm`, the base of both) to synchronised
statistics: the layer's batch-major ``(B, M·C, ...)`` view goes through torch's own
synchronised batch-norm (``layers.member_statistics``), so each member's mean and variance
are taken over the global batch, gradients included. The ``torch-uncertainty`` command
installs it whenever the recipe sets ``trainer.sync_batchnorm: true``; in Python::

    Trainer(strategy="ddp", devices=4, sync_batchnorm=True, plugins=[MemberSyncBatchNorm()])

This module imports the layers; the layers never import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lightning.pytorch.plugins.layer_sync import LayerSync, TorchSyncBatchNorm
from torch import nn

from .norm import MemberBatchNorm
from .statistics import gather_member_moments

__all__ = [
    "MemberSyncBatchNorm",
    "convert_sync_member_norms",
    "gather_member_moments",
    "member_sync_batchnorm_plugins",
    "revert_sync_member_norms",
]


def convert_sync_member_norms(module: nn.Module, process_group: Any = None) -> nn.Module:
    """Switch every σBN and FiLM BatchNorm layer of ``module`` to synchronised statistics.

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
        if isinstance(layer, MemberBatchNorm):
            layer.sync_statistics = True
            layer.process_group = process_group
    return module


def revert_sync_member_norms(module: nn.Module) -> nn.Module:
    """Undo :func:`convert_sync_member_norms`: every layer uses its process's batch again."""
    for layer in module.modules():
        if isinstance(layer, MemberBatchNorm):
            layer.sync_statistics = False
            layer.process_group = None
    return module


class MemberSyncBatchNorm(TorchSyncBatchNorm):
    """Lightning layer-sync plugin: ``SyncBatchNorm`` for BatchNorm, synchronised per-member
    statistics for σBN and FiLM's BatchNorm.

    A subclass of Lightning's :class:`~lightning.pytorch.plugins.TorchSyncBatchNorm`, so it is
    accepted together with ``Trainer(sync_batchnorm=True)``. Lightning applies it when fitting
    with a multi-process strategy (DDP, FSDP) and reverts it at the end of ``fit``.

    Args:
        process_group: The group to synchronise over; all processes when ``None``.
    """

    def __init__(self, process_group: Any = None) -> None:
        self.process_group = process_group

    def apply(self, model: nn.Module) -> nn.Module:
        convert_sync_member_norms(model, self.process_group)
        return nn.SyncBatchNorm.convert_sync_batchnorm(model, self.process_group)

    def revert(self, model: nn.Module) -> nn.Module:
        return super().revert(revert_sync_member_norms(model))


def member_sync_batchnorm_plugins(trainer_config: Mapping[str, Any]) -> list | None:
    """The ``plugins`` a trainer built from ``trainer_config`` needs for σNorm-aware syncing.

    With ``sync_batchnorm: true`` and no layer-sync plugin of the user's, the configured
    plugins plus :class:`MemberSyncBatchNorm`; otherwise ``None`` (leave them as they are).
    """
    if not trainer_config.get("sync_batchnorm"):
        return None
    plugins = trainer_config.get("plugins") or []
    plugins = list(plugins) if isinstance(plugins, (list, tuple)) else [plugins]
    if any(isinstance(plugin, LayerSync) for plugin in plugins):
        return None
    return [*plugins, MemberSyncBatchNorm()]
