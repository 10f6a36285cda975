r"""σNorm layers: one normalization layer holding M ensemble members.

Every layer here computes, for member :math:`m` of a batch-major batch ``(B·M, ...)``,

.. math::
    y_m = k\,s \odot \sigma(\gamma_m) \odot \mathrm{norm}_m(x_m) + \beta,

where :math:`\mathrm{norm}_m` uses member :math:`m`'s own statistics, :math:`\gamma_m` are
member :math:`m`'s scale logits and :math:`\sigma(\gamma_m) \in (0, 1)` its feature
importances. Trained from scratch, :math:`k = 1, s = 1, \beta = 0` and those buffers are
absent; a converted pretrained layer (:meth:`SigmaNorm.from_module` with
``pretrained=True``) holds frozen :math:`k, s, \beta` that reproduce its output
(see :func:`output_preserving_reparameterization`). The way back is each layer's
``to_plain(m)`` (:class:`~torch_uncertainty_signorm.members.norm.MemberNorm`): the plain
layer computing member :math:`m`.

Inside the backbone the rows are batch-major: row ``b·M + m`` is sample ``b`` of member
``m``, so the activations ``(B·M, C, ...)`` are a contiguous ``(B, M·C, ...)`` tensor whose
channels are the members' channels side by side. σBN and σGN therefore run torch's fused
kernel once on that view, with the members' affines flattened as its per-channel affine
(σBN also with the ``(M, C)`` running statistics flattened, updated in place): one kernel
per layer for any M. LayerNorm and RMSNorm statistics are per row, so σLN and σRMSNorm
normalize all rows in one call (no affine) and apply the members' affines in one fused
elementwise pass (:class:`_MemberAffine`). No layer loops over members.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..members.norm import MemberBatchNorm, MemberNorm
from ..members.statistics import rows_result
from ..utils.checks import check_positive_number
from .registry import NORM_REGISTRY, register_norm

__all__ = [
    "SigmaBatchNorm",
    "SigmaBatchNorm1d",
    "SigmaBatchNorm2d",
    "SigmaBatchNorm3d",
    "SigmaGroupNorm",
    "SigmaLayerNorm",
    "SigmaLayerNorm2d",
    "SigmaLayerNorm2dFp32",
    "SigmaLayerNormFp32",
    "SigmaNorm",
    "SigmaRMSNorm",
    "SigmaRMSNormFp32",
    "SigmaSyncBatchNorm",
    "output_preserving_reparameterization",
]

#: Largest reconstructed importance of a converted layer: keeps σ(γ) off its saturation wall.
MAX_CONVERTED_IMPORTANCE = 0.95
#: Smallest importance a converted layer starts from: keeps the logits at or above
#: σ⁻¹(1e-4) ≈ -9.2, where σ still responds to training (tiny and zero scales start here).
MIN_CONVERTED_IMPORTANCE = 1e-4


def output_preserving_reparameterization(
    weight: Tensor | None, bias: Tensor | None, num_features: int
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""Frozen magnitude, per-channel factor and shift, and logits reproducing a pretrained affine.

    Appendix "Adapting pretrained backbones": with :math:`k_\ell = \max_c |w_c| / 0.95`,
    :math:`\rho_c = |w_c| / k_\ell`, :math:`\gamma_c = \sigma^{-1}(\max(\rho_c, \rho_{min}))`,
    :math:`s_c = \mathrm{sign}(w_c) \, \rho_c / \sigma(\gamma_c)` and :math:`\beta = b`,
    the converted layer's :math:`k_\ell\, s \odot \sigma(\gamma) \odot \mathrm{norm}(x) +
    \beta` equals the pretrained :math:`w \odot \mathrm{norm}(x) + b` for every finite scale.

    The paper's :math:`\gamma_c = \sigma^{-1}(\rho_c)` holds for every channel with
    :math:`\rho_c \ge \rho_{min}` = ``MIN_CONVERTED_IMPORTANCE``, where the frozen factor is
    the sign, :math:`s_c = \pm 1`. A smaller scale (real checkpoints hold some down to
    1e-33) would need a logit far below σ's responsive range; its logit starts at
    :math:`\sigma^{-1}(\rho_{min})` instead and the rest of its magnitude moves into the
    frozen :math:`|s_c| = \rho_c / \rho_{min} < 1`. A zero scale gets :math:`s_c = 0` (the
    channel outputs :math:`\beta_c`, as the pretrained one did). An all-zero layer uses
    :math:`k_\ell = 1`; a layer without affine is treated as ``w = 1, b = 0``.

    Args:
        weight: The pretrained scale (any shape with ``num_features`` elements) or ``None``.
        bias: The pretrained shift or ``None``.
        num_features: Number of normalized features.

    Returns:
        ``(magnitude, sign, logits, shift)``: a 0-d tensor :math:`k_\ell`, and three
        ``(num_features,)`` tensors :math:`s, \gamma, \beta`, computed in float64 and
        returned in the floating dtype of ``weight`` (or ``bias``; float32 when both are
        ``None``).

    Raises:
        ValueError: If ``weight`` or ``bias`` holds a non-finite value.
    """
    dtype = next(
        (t.dtype for t in (weight, bias) if t is not None and t.is_floating_point()),
        torch.float32,
    )
    w, b = (
        torch.full((num_features,), fill, dtype=torch.float64, device="cpu")
        if t is None
        else t.detach().reshape(-1).to(device="cpu", dtype=torch.float64)
        for t, fill in ((weight, 1.0), (bias, 0.0))
    )
    for name, values in (("weight", w), ("bias", b)):
        if not torch.isfinite(values).all():
            bad = values[~torch.isfinite(values)][0].item()
            raise ValueError(
                f"The pretrained {name} holds a non-finite value ({bad}); only finite "
                f"scales and shifts can be reproduced."
            )
    largest = w.abs().max()
    magnitude = (
        largest / MAX_CONVERTED_IMPORTANCE
        if largest > 0
        else torch.ones((), dtype=w.dtype, device=w.device)
    )
    ratio = w.abs() / magnitude
    importance = ratio.clamp(min=MIN_CONVERTED_IMPORTANCE)
    logits = torch.logit(importance)
    tiny = ratio < MIN_CONVERTED_IMPORTANCE
    factor = torch.sign(w) * torch.where(tiny, ratio / torch.sigmoid(logits), 1.0)
    return tuple(t.to(dtype) for t in (magnitude, factor, logits, b))


class _MemberAffine(torch.autograd.Function):
    """Member m's scale, and the shared shift, on member m's batch-major rows.

    Each sample's ``M·R·F`` values (M members, R rows of F features) meet one ``(M·R·F,)``
    scale row, and the scale's gradient is two contiguous reductions (over samples, then
    over R), where autograd of the broadcast ``(B, M, R, F) ⊙ (M, 1, F)`` would reduce over
    two strided axes.
    """

    @staticmethod
    def forward(ctx, normed: Tensor, scale: Tensor, shift: Tensor | None) -> Tensor:
        members, features = scale.shape
        samples = normed.shape[0] // members
        flat = normed.reshape(samples, -1)
        repeats = flat.shape[1] // (members * features)
        scale_row = scale.unsqueeze(1).expand(members, repeats, features).reshape(1, -1)
        if shift is None:
            out = flat * scale_row
        else:
            out = torch.addcmul(shift.repeat(members * repeats).view(1, -1), flat, scale_row)
        ctx.save_for_backward(flat, scale_row)
        ctx.layout = (members, repeats, features, shift is not None, normed.shape)
        return rows_result(out, normed.shape)

    @staticmethod
    def backward(ctx, grad: Tensor):
        flat, scale_row = ctx.saved_tensors
        members, repeats, features, has_shift, shape = ctx.layout
        grad = grad.reshape(flat.shape)
        grad_normed = (grad * scale_row).view(shape) if ctx.needs_input_grad[0] else None
        grad_scale = (grad * flat).sum(0).view(members, repeats, features).sum(1)
        grad_shift = grad.sum(0).view(-1, features).sum(0) if has_shift else None
        return grad_normed, grad_scale, grad_shift


def _placement(module: nn.Module) -> dict:
    """Device and dtype of ``module``'s affine weight (defaults when it has none)."""
    weight = getattr(module, "weight", None)
    return {} if weight is None else {"device": weight.device, "dtype": weight.dtype}


class SigmaNorm(MemberNorm):
    """Base of every σNorm layer: per-member scale logits and an optional frozen reconstruction;
    :meth:`from_module` converts a plain layer in, :meth:`~MemberNorm.to_plain` folds a member
    back out."""

    def __init__(
        self,
        num_features: int,
        num_estimators: int,
        scale_init_std: float = 1.0,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(num_features, num_estimators)
        check_positive_number("scale_init_std", scale_init_std, allow_zero=True)
        self.scale_init_std = scale_init_std
        factory = {"device": device, "dtype": dtype}
        self.scale_logits = nn.Parameter(torch.empty(num_estimators, num_features, **factory))
        # Frozen reconstruction of a pretrained affine; None (absent) when trained from scratch.
        self.register_buffer("magnitude", None)
        self.register_buffer("sign", None)
        self.register_buffer("shift", None)
        self.reset_scale_logits()

    def reset_scale_logits(self) -> None:
        """Draw the scale logits from N(0, scale_init_std²), the from-scratch initialisation."""
        with torch.no_grad():
            self.scale_logits.normal_(0.0, self.scale_init_std)

    def importance(self) -> Tensor:
        """Members' feature importances σ(γ), shape ``(M, num_features)``."""
        return torch.sigmoid(self.scale_logits)

    def spread_members(self, spread: float) -> None:
        r"""Add zero-sum per-member offsets :math:`\varepsilon_m` to the scale logits.

        Members that start identical (an exact conversion) sit where the regularizer's
        gradient :math:`(1 - M p_j)/\tau` is exactly zero. The offsets move them off that
        point: per feature, :math:`\varepsilon \sim \mathcal{N}(0, \mathrm{spread}^2 I_M)`
        projected onto :math:`\sum_m \varepsilon_m = 0` and rescaled so that each member's
        offset keeps standard deviation ``spread``. The members' mean logit is unchanged, so
        their mean importance (and the ensemble's mean output) moves only at second order.
        Draws from torch's global generator (``seed_everything`` makes it reproducible); a
        single member, or ``spread = 0``, draws nothing and changes nothing.
        """
        spread = check_positive_number("member_spread", spread, allow_zero=True)
        if spread == 0 or self.num_estimators == 1:
            return
        with torch.no_grad():
            offsets = torch.randn_like(self.scale_logits)
            offsets -= offsets.mean(dim=0, keepdim=True)
            offsets *= spread * math.sqrt(self.num_estimators / (self.num_estimators - 1))
            self.scale_logits.add_(offsets)

    def member_scale(self) -> Tensor:
        """Per-member multiplicative scale ``k · s · σ(γ)``, shape ``(M, num_features)``."""
        scale = self.importance()
        if self.magnitude is not None:
            scale = scale * (self.magnitude * self.sign)
        return scale

    def affine(self) -> tuple[Tensor, Tensor | None]:
        """Members' scales ``k·s·σ(γ)`` ``(M, F)`` and their shared shift β ``(F,)`` (``None``
        from scratch)."""
        return self.member_scale(), self.shift

    def load_pretrained_affine(self, weight: Tensor | None, bias: Tensor | None) -> None:
        """Set every member so that the layer reproduces the affine ``weight, bias``."""
        magnitude, sign, logits, shift = output_preserving_reparameterization(
            weight, bias, self.num_features
        )
        ref = self.scale_logits
        self.magnitude = magnitude.to(device=ref.device, dtype=ref.dtype)
        self.sign = sign.to(device=ref.device, dtype=ref.dtype)
        self.shift = shift.to(device=ref.device, dtype=ref.dtype)
        with torch.no_grad():
            self.scale_logits.copy_(logits.expand_as(ref))

    def member_affine(self, normed: Tensor) -> Tensor:
        """``k·s·σ(γ_m) ⊙ normed + β`` on batch-major rows whose last axis holds the features.

        Args:
            normed: Normalized rows ``(B·M, ..., num_features)``.
        """
        shift = None if self.shift is None else self.shift.to(normed.dtype)
        return _MemberAffine.apply(normed, self.member_scale().to(normed.dtype), shift)

    def extra_repr(self) -> str:
        kind = "converted" if self.magnitude is not None else "from scratch"
        return f"{super().extra_repr()}, {kind}"

    @classmethod
    def from_module(
        cls,
        module: nn.Module,
        num_estimators: int,
        *,
        pretrained: bool = False,
        scale_init_std: float = 1.0,
    ) -> SigmaNorm:
        """Build the σNorm layer replacing ``module``.

        Args:
            module: The normalization layer to replace.
            num_estimators: Number of members M.
            pretrained: ``True`` reproduces ``module``'s output in every member (frozen
                magnitude, sign and shift, copied statistics); ``False`` draws the logits
                from N(0, scale_init_std²), without shift, with fresh statistics.
            scale_init_std: Standard deviation of the from-scratch logits.

        Raises:
            TypeError: If ``module`` is not a layer this class replaces (the registry's
                :data:`~torch_uncertainty_signorm.signorm.registry.NORM_REGISTRY` names
                which σNorm class replaces which layer).
        """
        replacing = NORM_REGISTRY.get(type(module))
        if replacing is not cls:
            plain = sorted({kind.__name__ for kind, c in NORM_REGISTRY.items() if c is cls})
            hint = f": use {replacing.__name__}" if replacing is not None else ""
            raise TypeError(
                f"{cls.__name__} replaces {' or '.join(plain) or 'no layer'}, got a "
                f"{type(module).__name__}{hint}."
            )
        layer = cls._empty_like(module, num_estimators, scale_init_std)
        if pretrained:
            layer.load_pretrained_affine(
                getattr(module, "weight", None), getattr(module, "bias", None)
            )
            layer.copy_statistics(module)
        return layer

    @classmethod
    def _empty_like(cls, module: nn.Module, num_estimators: int, scale_init_std: float):
        raise NotImplementedError


def _converter(plain: str) -> classmethod:
    """TorchUncertainty's ``from_<layer>`` converter (as ``BatchLinear.from_linear``) for the
    ``plain`` layer: :meth:`SigmaNorm.from_module`, under the name a TorchUncertainty user looks
    for."""

    def convert(
        cls,
        module: nn.Module,
        num_estimators: int,
        *,
        pretrained: bool = False,
        scale_init_std: float = 1.0,
    ) -> SigmaNorm:
        return cls.from_module(
            module, num_estimators, pretrained=pretrained, scale_init_std=scale_init_std
        )

    convert.__doc__ = (
        f"The σNorm layer of ``num_estimators`` members replacing the ``{plain}`` ``module``: "
        f":meth:`from_module` (``pretrained=True`` reproduces its output in every member)."
    )
    return classmethod(convert)


class SigmaBatchNorm(SigmaNorm, MemberBatchNorm):
    """Base of the σBN layers: a per-member BatchNorm (:class:`MemberBatchNorm`: ``(M, C)``
    running statistics, one kernel) whose members' scales are σNorm's sigmoid-bounded
    ``k·s·σ(γ_m)``, with no shift from scratch."""

    def __init__(
        self,
        num_features: int,
        num_estimators: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        track_running_stats: bool = True,
        scale_init_std: float = 1.0,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(num_features, num_estimators, scale_init_std, device, dtype)
        self.init_statistics(eps, momentum, track_running_stats, device, dtype)

    @classmethod
    def _empty_like(cls, module, num_estimators, scale_init_std):
        ref = next(module.parameters(), None)
        if ref is None:
            ref = module.running_mean if module.running_mean is not None else torch.empty(0)
        return cls(
            module.num_features,
            num_estimators,
            eps=module.eps,
            momentum=module.momentum,
            track_running_stats=module.track_running_stats,
            scale_init_std=scale_init_std,
            device=ref.device,
            dtype=ref.dtype if ref.is_floating_point() else None,
        )


class SigmaBatchNorm1d(SigmaBatchNorm):
    """σBN over :class:`torch.nn.BatchNorm1d` inputs, batch-major ``(B·M, C)`` or
    ``(B·M, C, L)``."""

    _input_dims = (2, 3)
    plain_type = nn.BatchNorm1d
    from_batch_norm1d = _converter("BatchNorm1d")


class SigmaBatchNorm2d(SigmaBatchNorm):
    """σBN over :class:`torch.nn.BatchNorm2d` inputs, batch-major ``(B·M, C, H, W)``."""

    _input_dims = (4,)
    plain_type = nn.BatchNorm2d
    from_batch_norm2d = _converter("BatchNorm2d")


class SigmaBatchNorm3d(SigmaBatchNorm):
    """σBN over :class:`torch.nn.BatchNorm3d` inputs, batch-major ``(B·M, C, D, H, W)``."""

    _input_dims = (5,)
    plain_type = nn.BatchNorm3d
    from_batch_norm3d = _converter("BatchNorm3d")


class SigmaSyncBatchNorm(SigmaBatchNorm):
    """σBN over :class:`torch.nn.SyncBatchNorm` inputs of any rank ``(B·M, C, ...)``.

    Its members fold back into ``SyncBatchNorm`` on export; the layer synchronises across
    processes like every σBN
    (:func:`~torch_uncertainty_signorm.members.distributed.convert_sync_member_norms`).
    """

    plain_type = nn.SyncBatchNorm
    from_sync_batch_norm = _converter("SyncBatchNorm")


class SigmaLayerNorm(SigmaNorm):
    """σLN: LayerNorm over the trailing ``normalized_shape`` with per-member scale logits.

    LayerNorm statistics are per sample, hence already per member; only the affine is
    member-specific. Covers :class:`torch.nn.LayerNorm` and the subclasses computing the
    same (timm's ``LayerNorm``, transformers' BERT ``LayerNorm``); a member folds back into
    :class:`torch.nn.LayerNorm`.
    """

    plain_type: type[nn.Module] = nn.LayerNorm
    from_layer_norm = _converter("LayerNorm")

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        num_estimators: int,
        eps: float = 1e-5,
        scale_init_std: float = 1.0,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        self.normalized_shape = tuple(shape)
        super().__init__(math.prod(shape), num_estimators, scale_init_std, device, dtype)
        self.eps = eps

    @classmethod
    def _empty_like(cls, module, num_estimators, scale_init_std):
        eps = module.eps if module.eps is not None else torch.finfo(torch.float32).eps
        return cls(
            tuple(module.normalized_shape),
            num_estimators,
            eps=eps,
            scale_init_std=scale_init_std,
            **_placement(module),
        )

    def empty_plain(self, device: torch.device, dtype: torch.dtype) -> nn.Module:
        return self.plain_type(self.normalized_shape, eps=self.eps, device=device, dtype=dtype)

    def _normalize(self, x: Tensor) -> Tensor:
        # A unit weight takes torch's faster CPU kernel; it needs no gradient.
        unit = torch.ones(self.normalized_shape, device=x.device, dtype=x.dtype)
        return F.layer_norm(x, self.normalized_shape, unit, None, self.eps)

    def forward(self, x: Tensor) -> Tensor:
        n = len(self.normalized_shape)
        if tuple(x.shape[-n:]) != self.normalized_shape:
            raise ValueError(
                f"{type(self).__name__} normalizes trailing shape {self.normalized_shape}, "
                f"got input shape {tuple(x.shape)}."
            )
        self.check_rows(x)
        return self.member_affine(self._normalize(x))


class SigmaRMSNorm(SigmaLayerNorm):
    """σRMSNorm: RMSNorm (no centring) with per-member scale logits; a member folds back into
    :class:`torch.nn.RMSNorm` (which has no shift)."""

    plain_type = nn.RMSNorm
    from_rms_norm = _converter("RMSNorm")

    def _normalize(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, None, self.eps)


class _TimmNorm:
    """A timm norm class as a σNorm layer's ``plain_type``, read when first used: timm is the
    method's ``timm`` extra, and a backbone holding timm's norms has it installed."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, instance: object, owner: type) -> type[nn.Module]:
        from timm.layers import norm

        return getattr(norm, self.name)


class SigmaLayerNorm2d(SigmaLayerNorm):
    """σLN over channels-first inputs, batch-major ``(B·M, C, H, W)``, as timm's
    ``LayerNorm2d`` (which a member folds back into)."""

    plain_type = _TimmNorm("LayerNorm2d")
    from_layer_norm2d = _converter("LayerNorm2d")

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.movedim(1, -1)).movedim(-1, 1)


class _Float32Compute:
    """Normalize and scale in float32, return the input's dtype: timm's ``*Fp32`` norms."""

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x.float()).to(x.dtype)


class SigmaLayerNormFp32(_Float32Compute, SigmaLayerNorm):
    """σLN computing in float32 whatever the input's dtype, as timm's ``LayerNormFp32``."""

    plain_type = _TimmNorm("LayerNormFp32")


class SigmaLayerNorm2dFp32(_Float32Compute, SigmaLayerNorm2d):
    """Channels-first σLN computing in float32, as timm's ``LayerNorm2dFp32``."""

    plain_type = _TimmNorm("LayerNorm2dFp32")


class SigmaRMSNormFp32(_Float32Compute, SigmaRMSNorm):
    """σRMSNorm computing in float32, as timm's ``RmsNormFp32``."""

    plain_type = _TimmNorm("RmsNormFp32")


class SigmaGroupNorm(SigmaNorm):
    """σGN: GroupNorm (per-sample group statistics) with per-member channel scale logits; a
    member folds back into :class:`torch.nn.GroupNorm`."""

    from_group_norm = _converter("GroupNorm")

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        num_estimators: int,
        eps: float = 1e-5,
        scale_init_std: float = 1.0,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__(num_channels, num_estimators, scale_init_std, device, dtype)
        self.num_groups = num_groups
        self.eps = eps

    @classmethod
    def _empty_like(cls, module, num_estimators, scale_init_std):
        return cls(
            module.num_groups,
            module.num_channels,
            num_estimators,
            eps=module.eps,
            scale_init_std=scale_init_std,
            **_placement(module),
        )

    def empty_plain(self, device: torch.device, dtype: torch.dtype) -> nn.Module:
        return nn.GroupNorm(
            self.num_groups, self.num_features, eps=self.eps, device=device, dtype=dtype
        )

    def forward(self, x: Tensor) -> Tensor:
        """One ``group_norm`` of the ``(B, M·C, ...)`` view: M·G groups, members' affines."""
        if x.dim() < 2 or x.shape[1] != self.num_features:
            raise ValueError(
                f"{type(self).__name__} expects (B·M, {self.num_features}, ...) inputs, got "
                f"shape {tuple(x.shape)}."
            )
        self.check_rows(x)
        m = self.num_estimators
        view = x.reshape(x.shape[0] // m, m * self.num_features, *x.shape[2:])
        shift = None if self.shift is None else self.shift.repeat(m)
        weight = self.member_scale().reshape(-1)
        out = F.group_norm(view, m * self.num_groups, weight, shift, self.eps)
        return rows_result(out, x.shape)


def _register_norms() -> None:
    """Which σNorm layer replaces which plain layer (:mod:`.registry`). timm's ``LayerNorm``,
    ``RmsNorm``, ``GroupNorm`` and ``GroupNorm1`` compute what torch's classes compute (their
    members fold back into torch's); its ``*Fp32`` norms have float32 σNorm counterparts. timm's
    are registered only where timm (the ``timm`` extra) is installed: no backbone holds them
    elsewhere."""
    replaced = {
        nn.BatchNorm1d: SigmaBatchNorm1d,
        nn.BatchNorm2d: SigmaBatchNorm2d,
        nn.BatchNorm3d: SigmaBatchNorm3d,
        nn.SyncBatchNorm: SigmaSyncBatchNorm,
        nn.LayerNorm: SigmaLayerNorm,
        nn.GroupNorm: SigmaGroupNorm,
        nn.RMSNorm: SigmaRMSNorm,
    }
    try:
        from timm.layers import norm as timm_norm
    except ImportError:
        timm_norm = None
    if timm_norm is not None:
        replaced |= {
            timm_norm.LayerNorm: SigmaLayerNorm,
            timm_norm.LayerNormFp32: SigmaLayerNormFp32,
            timm_norm.LayerNorm2d: SigmaLayerNorm2d,
            timm_norm.LayerNorm2dFp32: SigmaLayerNorm2dFp32,
            timm_norm.RmsNorm: SigmaRMSNorm,
            timm_norm.RmsNormFp32: SigmaRMSNormFp32,
            timm_norm.GroupNorm: SigmaGroupNorm,
            timm_norm.GroupNorm1: SigmaGroupNorm,
        }
    for plain, replacement in replaced.items():
        register_norm(plain, replacement)


_register_norms()
