r"""The bases of the per-member normalization layers: M members in one layer, both directions.

:class:`MemberNorm` is the root of every layer holding one normalization per ensemble member
(the σNorm layers, FiLM-Ensemble's BatchNorm). It checks the batch-major rows and folds a
member back out: :meth:`MemberNorm.to_plain` returns the ordinary torch, timm or
transformers layer that computes member :math:`m`'s output, from the subclass's per-member
affine (:meth:`MemberNorm.affine`) and its empty plain counterpart.

:class:`MemberBatchNorm` adds what every per-member BatchNorm shares: ``(M, C)`` running
statistics, copied in from a plain BatchNorm and out into member :math:`m`'s, and the
forward pass, one call of torch's fused kernel for any M
(:func:`~torch_uncertainty_signorm.members.statistics.member_batch_norm`). A subclass
decides only the members' affine: σBN's sigmoid-bounded scale without shift, FiLM's free
scale and shift.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..utils.checks import check_integer
from .statistics import member_batch_norm

__all__ = ["MemberBatchNorm", "MemberNorm"]


class MemberNorm(nn.Module):
    """Base of the layers holding one normalization per member, on batch-major ``(B·M, ...)`` rows.

    A subclass gives every member's affine (:meth:`affine`) and its plain counterpart
    (:meth:`empty_plain`); this class checks the rows and folds a member back out
    (:meth:`to_plain`).

    Args:
        num_features: Number of normalized features (channels).
        num_estimators: Number of members M.
    """

    def __init__(self, num_features: int, num_estimators: int) -> None:
        super().__init__()
        self.num_features = check_integer("num_features", num_features)
        self.num_estimators = check_integer("num_estimators", num_estimators)

    def affine(self) -> tuple[Tensor, Tensor | None]:
        """Every member's effective affine: scales ``(M, F)`` and shifts ``(M, F)``, one shift
        ``(F,)`` shared by the members, or ``None`` (no shift)."""
        raise NotImplementedError

    def empty_plain(self, device: torch.device, dtype: torch.dtype) -> nn.Module:
        """The plain layer one member folds into, with this layer's hyper-parameters."""
        raise NotImplementedError

    def copy_statistics(self, source: nn.Module) -> None:
        """Give every member the running statistics of the plain layer ``source`` (only
        BatchNorm has any)."""

    def statistics_into(self, plain: nn.Module, member: int) -> None:
        """Copy member ``member``'s running statistics into ``plain`` (only BatchNorm has any)."""

    def check_rows(self, x: Tensor) -> None:
        """Batch-major input: its ``B·M`` rows must split evenly into the M members."""
        if x.dim() == 0 or x.shape[0] % self.num_estimators != 0:
            rows = x.shape[0] if x.dim() else "a scalar"
            raise ValueError(
                f"{type(self).__name__} expects a batch of B·M rows (batch-major) with "
                f"M = num_estimators = {self.num_estimators}, got {rows} rows "
                f"(shape {tuple(x.shape)}), which does not split evenly into "
                f"{self.num_estimators} members."
            )

    def to_plain(self, member: int) -> nn.Module:
        r"""The plain normalization layer computing member ``member``'s output of this layer.

        Its affine is the member's effective one (σNorm: :math:`w = k\,s \odot
        \sigma(\gamma_m)`, :math:`b = \beta`, 0 from scratch; FiLM: :math:`\gamma_m,
        \beta_m`), on this layer's device and dtype, and a BatchNorm member keeps its
        running statistics.

        Raises:
            ValueError: If ``member`` is not in ``0..M-1``, or the member has a nonzero shift
                that its plain counterpart (RMSNorm) cannot hold.
        """
        check_integer("member", member, low=0, high=self.num_estimators - 1)
        weights, shift = self.affine()
        weight = weights[member].detach()
        if shift is not None:
            shift = (shift[member] if shift.dim() == 2 else shift).detach()
        plain = self.empty_plain(device=weight.device, dtype=weight.dtype)
        with torch.no_grad():
            plain.weight.copy_(weight.view_as(plain.weight))
            if getattr(plain, "bias", None) is not None:
                plain.bias.copy_(
                    torch.zeros_like(plain.bias) if shift is None else shift.view_as(plain.bias)
                )
            elif shift is not None and bool(shift.any()):
                raise ValueError(
                    f"Member {member} of this {type(self).__name__} has a nonzero shift β, which "
                    f"its plain counterpart {type(plain).__name__} cannot hold (it has no bias)."
                )
        self.statistics_into(plain, member)
        return plain

    def extra_repr(self) -> str:
        return f"{self.num_features}, num_estimators={self.num_estimators}"


class MemberBatchNorm(MemberNorm):
    """Base of the per-member BatchNorm layers (σBN, FiLM-Ensemble's): ``(M, C)`` running
    statistics and one native kernel for every member, on batch-major ``(B·M, C, ...)`` rows.

    A subclass registers its parameters, then calls :meth:`init_statistics`; it gives the
    members' affine (:meth:`~MemberNorm.affine`) and sets :attr:`plain_type`, the BatchNorm
    class a member folds back into.
    """

    #: Input ranks the layer accepts (empty: any rank >= 2).
    _input_dims: tuple[int, ...] = ()
    #: The plain BatchNorm class one member folds back into (:meth:`~MemberNorm.to_plain`).
    plain_type: type[nn.Module] = nn.BatchNorm2d

    def init_statistics(
        self,
        eps: float,
        momentum: float | None,
        track_running_stats: bool,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        """Set BatchNorm's ``eps``, ``momentum``, ``track_running_stats`` and register
        ``running_mean``/``running_var`` ``(M, C)`` (on ``device``, in ``dtype``) and
        ``num_batches_tracked`` (``None`` buffers when ``track_running_stats`` is off, as
        torch's BatchNorm does). Synchronisation across processes starts off (set by
        :func:`~torch_uncertainty_signorm.members.distributed.convert_sync_member_norms`)."""
        self.eps = eps
        self.momentum = momentum
        self.track_running_stats = track_running_stats
        #: While training, take each member's batch statistics over ``process_group`` (all
        #: processes when ``None``) with torch's synchronised batch-norm.
        self.sync_statistics = False
        self.process_group = None
        if not track_running_stats:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
            return
        shape = (self.num_estimators, self.num_features)
        self.register_buffer("running_mean", torch.zeros(shape, device=device, dtype=dtype))
        self.register_buffer("running_var", torch.ones(shape, device=device, dtype=dtype))
        self.register_buffer(
            "num_batches_tracked", torch.tensor(0, dtype=torch.long, device=device)
        )

    @torch.no_grad()
    def copy_statistics(self, source: nn.Module) -> None:
        """Give every member the running statistics of the plain BatchNorm ``source``."""
        if self.track_running_stats and getattr(source, "running_mean", None) is not None:
            self.running_mean.copy_(source.running_mean.expand_as(self.running_mean))
            self.running_var.copy_(source.running_var.expand_as(self.running_var))
            self.num_batches_tracked.copy_(source.num_batches_tracked)

    @torch.no_grad()
    def statistics_into(self, plain: nn.Module, member: int) -> None:
        if self.track_running_stats:
            plain.running_mean.copy_(self.running_mean[member])
            plain.running_var.copy_(self.running_var[member])
            plain.num_batches_tracked.copy_(self.num_batches_tracked)

    def empty_plain(self, device: torch.device, dtype: torch.dtype) -> nn.Module:
        return self.plain_type(
            self.num_features,
            eps=self.eps,
            momentum=self.momentum,
            track_running_stats=self.track_running_stats,
            device=device,
            dtype=dtype,
        )

    def forward(self, x: Tensor) -> Tensor:
        """Every member's BatchNorm with its own statistics and affine, in one native call."""
        name = type(self).__name__
        if self._input_dims and x.dim() not in self._input_dims:
            raise ValueError(
                f"{name} expects a {' or '.join(map(str, self._input_dims))}-D input, got "
                f"shape {tuple(x.shape)}."
            )
        if x.dim() < 2 or x.shape[1] != self.num_features:
            raise ValueError(
                f"{name} expects (B·M, {self.num_features}, ...) inputs, got shape "
                f"{tuple(x.shape)}."
            )
        self.check_rows(x)
        return member_batch_norm(self, x, *self.affine())

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, eps={self.eps}, momentum={self.momentum}, "
            f"track_running_stats={self.track_running_stats}"
        )
