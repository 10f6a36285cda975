"""Every private internal of another library that the method relies on, in one place.

torch and Lightning keep some of what σN-Ens needs behind private names, which any release may
change without notice. Each such name is reached here, and only here, through a small named
function or constant that says what it reaches and why no public route exists;
``tests/test_compat.py`` checks, for each, that the internal still exists and behaves as relied
upon, so that an upgrade that changes one fails there, by name, rather than in a training run.

Public routes taken instead of a private name (nothing of theirs is here):
``torch.nn.modules.conv._ConvNd`` and ``torch.nn.modules.batchnorm._BatchNorm`` are replaced by
the tuples of torch's public convolution and BatchNorm classes (:data:`CONVOLUTIONS`,
:data:`BATCH_NORMS`; the tests check that they cover every subclass torch ships).

Lightning is imported only when a function needs it.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "BATCH_NORMS",
    "CLASS_PATH_KEY",
    "CONVOLUTIONS",
    "INSTANTIATOR_KEY",
    "forward_pre_hooks",
    "given_hyperparameters",
    "sync_batch_norm_function",
    "unsafe_view",
]

# ----------------------------------------------------------------------------- torch

#: torch's public convolution classes: every ``nn.modules.conv._ConvNd`` that torch ships is an
#: instance of one of them (public route for "is a convolution").
CONVOLUTIONS: tuple[type[nn.Module], ...] = (
    nn.Conv1d,
    nn.Conv2d,
    nn.Conv3d,
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
)

#: torch's public BatchNorm classes: every ``nn.modules.batchnorm._BatchNorm`` that torch ships
#: is an instance of one of them (public route for "is a BatchNorm"; InstanceNorm is not one).
BATCH_NORMS: tuple[type[nn.Module], ...] = (
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.SyncBatchNorm,
    nn.LazyBatchNorm1d,
    nn.LazyBatchNorm2d,
    nn.LazyBatchNorm3d,
)


def unsafe_view(tensor: Tensor, shape: torch.Size | tuple[int, ...]) -> Tensor:
    """``aten._unsafe_view``: a reshape that autograd treats as a fresh tensor, not a view of
    ``tensor`` (``view``/``reshape`` make a view, on which in-place ops rewrite the base)."""
    return torch.ops.aten._unsafe_view(tensor, shape)


def sync_batch_norm_function() -> type[torch.autograd.Function]:
    """``torch.nn.modules._functions.SyncBatchNorm``, the autograd function behind
    ``nn.SyncBatchNorm``: the module offers no call on an already-flattened ``(B, M·C)`` view
    with outside statistics."""
    from torch.nn.modules._functions import SyncBatchNorm

    return SyncBatchNorm


def forward_pre_hooks(module: nn.Module) -> MutableMapping[int, Callable]:
    """``module._forward_pre_hooks``, to list and remove hooks on a deep copy: the handle that
    ``register_forward_pre_hook`` returns removes the hook from the original module only."""
    return module._forward_pre_hooks


# ----------------------------------------------------------------------------- Lightning

#: Key of Lightning's CLI instantiator in saved hyper-parameters (``hparams_mixin``), which
#: ``load_from_checkpoint`` would hand class paths to; also its keyword to switch it off.
INSTANTIATOR_KEY = "_instantiator"
#: Key under which Lightning's CLI saves the routine's class path in its hyper-parameters.
CLASS_PATH_KEY = "_class_path"


def given_hyperparameters() -> dict[str, Any] | None:
    """The ``routine:`` block Lightning's CLI hands to the routine being built
    (``hparams_mixin._given_hyperparameters``); ``save_hyperparameters`` reads it, but
    without letting the routine keep only data, so there is no public route."""
    from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters

    return _given_hyperparameters.get()
