r"""The member heads' normalization: an ordinary BatchNorm or LayerNorm per member, free affine.

The paper's heads place "an additional normalization layer (BN or LN) before [the]
randomly-initialised linear layer": member :math:`m` computes
:math:`w_m \odot \mathrm{norm}_m(x) + b_m` with its own statistics and its own affine, trained at
the base learning rate like any head weight (not in the σNorm scale-logit group).

A normalization divides its input by the input's scale, and its backward pass multiplies the
gradient reaching the shared backbone by the same factor. A pretrained backbone's penultimate
features can be small (the BERT pooler's tanh outputs have a per-input standard deviation of
0.067 on the packaged MiniLM): a unit-scale norm then multiplies what the fresh linear layer reads,
and the gradient the backbone receives, by ~15, which drove every converted MiniLM run of our
tweets schedule into one-class predictions (docs/reliability.md). ``scale_init="features"``
sets the norm's scale, on its first training batch, to the scale of its input (BatchNorm: each
feature's batch standard deviation; LayerNorm: the mean per-input standard deviation), so the
head starts reading features of the backbone's own scale and the backbone starts receiving a
single model's gradient; the converted σN-Ens (``pretrained=True``) uses it.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from .norm import MemberBatchNorm, MemberNorm

__all__ = ["HEAD_SCALE_INITS", "HeadBatchNorm", "HeadLayerNorm", "HeadNorm"]

#: How a head norm's scale starts: 1 (the paper's), or the scale of its first training batch.
HEAD_SCALE_INITS = ("unit", "features")


def _mean_over_processes(value: Tensor) -> Tensor:
    """``value`` averaged over the processes of a distributed run (itself otherwise), so every
    process starts the head from the same scale."""
    if dist.is_available() and dist.is_initialized():
        value = value.clone()
        dist.all_reduce(value)
        value /= dist.get_world_size()
    return value


class HeadNorm(MemberNorm):
    """Per-member normalization with a free affine ``weight``, ``bias`` ``(M, F)`` (ones and
    zeros), optionally scaled to its input on the first training batch (:data:`HEAD_SCALE_INITS`).

    ``scale_initialised`` (a saved buffer) records that this happened, so a resumed or reloaded
    model never re-measures; the forward pass reads a Python copy of it (no device read, one
    graph under ``torch.compile``).
    """

    def init_affine(self, scale_init: str, device=None, dtype=None) -> None:
        if scale_init not in HEAD_SCALE_INITS:
            raise ValueError(
                f"head scale_init must be one of {HEAD_SCALE_INITS}, got {scale_init!r}."
            )
        shape = (self.num_estimators, self.num_features)
        self.weight = nn.Parameter(torch.ones(shape, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(shape, device=device, dtype=dtype))
        self.scale_init = scale_init
        self.register_buffer("scale_initialised", torch.tensor(scale_init == "unit", device=device))
        self._scale_pending = scale_init == "features"

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if not self.scale_initialised.is_meta:  # once, at load time
            self._scale_pending = not bool(self.scale_initialised)

    def affine(self) -> tuple[Tensor, Tensor]:
        """Members' free scales and shifts, both ``(M, F)``."""
        return self.weight, self.bias

    def input_scale(self, x: Tensor) -> Tensor:
        """The scale the norm divides ``x`` by, as ``(M, F)`` or broadcastable to it."""
        raise NotImplementedError

    def initialise_scale(self, x: Tensor) -> None:
        """On the first training batch with ``scale_init="features"``: ``weight`` := the input's
        scale, so the norm's output starts at the scale of its input."""
        if not self.training or not self._scale_pending:
            return
        with torch.no_grad():
            scale = _mean_over_processes(self.input_scale(x.detach()).float())
            self.weight.copy_(
                scale.clamp_min(torch.finfo(torch.float32).tiny).expand_as(self.weight)
            )
            self.scale_initialised.fill_(True)
        self._scale_pending = False

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, scale_init={self.scale_init!r}"


class HeadBatchNorm(HeadNorm, MemberBatchNorm):
    """Per-member :class:`torch.nn.BatchNorm1d` over ``(B·M, F)`` head features (convolutional
    backbones)."""

    _input_dims = (2,)
    plain_type = nn.BatchNorm1d

    def __init__(
        self,
        num_features: int,
        num_estimators: int,
        scale_init: Literal["unit", "features"] = "unit",
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        device=None,
        dtype=None,
    ) -> None:
        MemberNorm.__init__(self, num_features, num_estimators)
        self.init_affine(scale_init, device, dtype)
        self.init_statistics(eps, momentum, True, device, dtype)

    def input_scale(self, x: Tensor) -> Tensor:
        members = x.unflatten(0, (-1, self.num_estimators))  # (B, M, F)
        return members.var(dim=0, unbiased=False).add(self.eps).sqrt()

    def forward(self, x: Tensor) -> Tensor:
        self.initialise_scale(x)
        return MemberBatchNorm.forward(self, x)


class HeadLayerNorm(HeadNorm):
    """Per-member :class:`torch.nn.LayerNorm` over the last axis of ``(B·M, ..., F)`` head
    features (transformer backbones)."""

    def __init__(
        self,
        num_features: int,
        num_estimators: int,
        scale_init: Literal["unit", "features"] = "unit",
        eps: float = 1e-5,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(num_features, num_estimators)
        self.eps = eps
        self.init_affine(scale_init, device, dtype)

    def empty_plain(self, device: torch.device, dtype: torch.dtype) -> nn.Module:
        return nn.LayerNorm(self.num_features, eps=self.eps, device=device, dtype=dtype)

    def input_scale(self, x: Tensor) -> Tensor:
        return x.var(dim=-1, unbiased=False).add(self.eps).sqrt().mean()

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() < 2 or x.shape[-1] != self.num_features:
            raise ValueError(
                f"{type(self).__name__} expects (B·M, ..., {self.num_features}) "
                f"inputs, got shape {tuple(x.shape)}."
            )
        self.check_rows(x)
        self.initialise_scale(x)
        normed = F.layer_norm(x, (self.num_features,), None, None, self.eps)
        rows = normed.unflatten(0, (-1, self.num_estimators))  # (B, M, ..., F)
        view = (1, self.num_estimators) + (1,) * (x.dim() - 2) + (self.num_features,)
        out = rows * self.weight.view(view).to(x.dtype) + self.bias.view(view).to(x.dtype)
        return out.flatten(0, 1)
