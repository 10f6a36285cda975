"""σNorm layers against their definition: M separate norm layers, one per member slice (FiLM's
BatchNorm under in-place ops: the lab's lab/tests/signorm/test_signorm.py)."""

import copy

import pytest
import torch
from torch import nn

from fixtures.members import batch_major, member_rows
from torch_uncertainty_signorm.signorm.conversion import signorm_class_for
from torch_uncertainty_signorm.signorm.layers import (
    SigmaBatchNorm1d,
    SigmaBatchNorm2d,
    SigmaGroupNorm,
    SigmaLayerNorm,
    SigmaLayerNorm2d,
    SigmaRMSNorm,
    output_preserving_reparameterization,
)

M = 4


def member_reference_bns(layer, template: nn.Module) -> list[nn.Module]:
    """M plain BatchNorms whose affine is member m's k·s·σ(γ_m), β, with member m's stats."""
    refs = []
    for m in range(M):
        ref = copy.deepcopy(template)
        with torch.no_grad():
            ref.weight.copy_(layer.member_scale()[m])
            ref.bias.copy_(layer.shift if layer.shift is not None else torch.zeros_like(ref.bias))
            ref.running_mean.copy_(layer.running_mean[m])
            ref.running_var.copy_(layer.running_var[m])
        refs.append(ref)
    return refs


@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("pretrained", [False, True])
@pytest.mark.parametrize(
    ("bn_cls", "shape"),
    [
        (nn.BatchNorm2d, (M * 5, 6, 4, 3)),
        (nn.BatchNorm1d, (M * 7, 6)),
        (nn.BatchNorm1d, (M * 3, 6, 5)),
    ],
)
def test_sigma_bn_equals_separate_batchnorms_per_member(bn_cls, shape, pretrained, momentum):
    template = bn_cls(6, momentum=momentum)
    with torch.no_grad():
        template.weight.copy_(torch.tensor([2.0, -0.5, 0.0, 0.3, 1.2, 0.9]))
        template.bias.normal_()
        template.running_mean.normal_()
        template.running_var.uniform_(0.5, 2.0)
    layer = signorm_class_for(template).from_module(template, M, pretrained=pretrained)
    refs = member_reference_bns(layer, template)
    for _ in range(3):  # several steps exercise the momentum / cumulative average
        x = torch.randn(shape) * 3 + 1
        out = layer.train()(x)
        expected = batch_major(
            [ref.train()(xm) for ref, xm in zip(refs, member_rows(x, M), strict=True)]
        )
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    for m, ref in enumerate(refs):
        torch.testing.assert_close(layer.running_mean[m], ref.running_mean, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(layer.running_var[m], ref.running_var, rtol=1e-5, atol=1e-6)
    assert int(layer.num_batches_tracked) == int(refs[0].num_batches_tracked)
    x = torch.randn(shape)
    expected = batch_major(
        [ref.eval()(xm) for ref, xm in zip(refs, member_rows(x, M), strict=True)]
    )
    torch.testing.assert_close(layer.eval()(x), expected, rtol=1e-5, atol=1e-5)


def test_sigma_bn_gradients_match_separate_batchnorms():
    template = nn.BatchNorm2d(3)
    layer = SigmaBatchNorm2d.from_module(template, M)
    refs = member_reference_bns(layer, template)
    x = torch.randn(M * 4, 3, 5, 5, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    grad_out = torch.randn_like(x)
    (layer(x) * grad_out).sum().backward()
    out_ref = batch_major([ref(xm) for ref, xm in zip(refs, member_rows(x_ref, M), strict=True)])
    (out_ref * grad_out).sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-4, atol=1e-5)


def test_sigma_bn_without_running_stats_uses_batch_statistics_in_eval():
    template = nn.BatchNorm2d(3, track_running_stats=False)
    layer = SigmaBatchNorm2d.from_module(template, M, pretrained=True).eval()
    x = torch.randn(M * 4, 3, 2, 2)
    expected = batch_major([template(xm) for xm in member_rows(x, M)])
    torch.testing.assert_close(layer(x), expected, rtol=1e-5, atol=1e-5)


def _per_member_reference(layer, template, x):
    """Apply ``template`` with member m's affine (k·s·σ(γ_m), β) to member m's slice."""
    outs = []
    for m, xm in enumerate(member_rows(x, M)):
        ref = copy.deepcopy(template)
        with torch.no_grad():
            ref.weight.copy_(layer.member_scale()[m].view_as(ref.weight))
            if getattr(ref, "bias", None) is not None:
                ref.bias.copy_(layer.shift.view_as(ref.bias) if layer.shift is not None else 0)
        outs.append(ref(xm))
    return batch_major(outs)


@pytest.mark.parametrize("pretrained", [False, True])
@pytest.mark.parametrize(
    ("template", "shape"),
    [
        (nn.LayerNorm(8), (M * 3, 5, 8)),
        (nn.LayerNorm((4, 8)), (M * 2, 4, 8)),
        (nn.GroupNorm(2, 6), (M * 3, 6, 4, 4)),
        (nn.RMSNorm(8, eps=1e-6), (M * 3, 5, 8)),
    ],
    ids=["layernorm", "layernorm-2d-shape", "groupnorm", "rmsnorm"],
)
def test_per_sample_norms_equal_one_plain_layer_per_member(template, shape, pretrained):
    with torch.no_grad():
        template.weight.normal_(0.5, 1.0)
        if getattr(template, "bias", None) is not None:
            template.bias.normal_()
    layer = signorm_class_for(template).from_module(template, M, pretrained=pretrained)
    x = torch.randn(shape) * 2 + 1
    torch.testing.assert_close(layer(x), _per_member_reference(layer, template, x))


def test_timm_layernorm_variants_map_to_their_sigma_layers():
    from timm.layers import LayerNorm, LayerNorm2d, RmsNorm

    assert signorm_class_for(LayerNorm(8)) is SigmaLayerNorm
    assert signorm_class_for(LayerNorm2d(8)) is SigmaLayerNorm2d
    assert signorm_class_for(RmsNorm(8)) is SigmaRMSNorm
    channels_first = LayerNorm2d(6)
    with torch.no_grad():
        channels_first.weight.normal_()
        channels_first.bias.normal_()
    layer = SigmaLayerNorm2d.from_module(channels_first, M, pretrained=True)
    x = torch.randn(M * 2, 6, 3, 3)
    torch.testing.assert_close(layer(x), channels_first(x), rtol=1e-5, atol=1e-5)


def test_pretrained_conversion_reproduces_scales_of_any_sign_exactly():
    weight = torch.tensor([3.0, -2.0, 0.0, 1e-3, 0.5, -0.0])
    bias = torch.randn(6)
    magnitude, sign, logits, shift = output_preserving_reparameterization(weight, bias, 6)
    assert magnitude == pytest.approx(3.0 / 0.95)
    torch.testing.assert_close(magnitude * sign * torch.sigmoid(logits), weight)
    assert torch.sigmoid(logits).max() == pytest.approx(0.95)  # off the saturation wall
    torch.testing.assert_close(shift, bias)
    all_zero = output_preserving_reparameterization(torch.zeros(3), None, 3)
    assert float(all_zero[0]) == 1.0 and torch.all(all_zero[1] == 0)


def test_from_scratch_layers_have_normal_logits_and_no_shift():
    layer = SigmaBatchNorm2d(4096, num_estimators=M)
    assert layer.shift is None and layer.magnitude is None
    assert layer.scale_logits.mean().abs() < 0.02
    assert layer.scale_logits.std().sub(1).abs() < 0.02
    importance = layer.importance()
    assert importance.min() > 0 and importance.max() < 1


def test_member_parameters_and_statistics_live_in_the_state_dict():
    layer = SigmaBatchNorm1d.from_module(nn.BatchNorm1d(5), M, pretrained=True)
    state = layer.state_dict()
    assert state["scale_logits"].shape == (M, 5)
    assert state["running_mean"].shape == (M, 5)
    assert {"magnitude", "sign", "shift"} <= set(state)
    fresh = SigmaBatchNorm1d.from_module(nn.BatchNorm1d(5), M, pretrained=True)
    with torch.no_grad():
        fresh.scale_logits.zero_()
    fresh.load_state_dict(state)
    x = torch.randn(M * 3, 5)
    torch.testing.assert_close(fresh.eval()(x), layer.eval()(x))


@pytest.mark.parametrize(
    "layer", [SigmaBatchNorm2d(3, M), SigmaLayerNorm(3, M), SigmaGroupNorm(1, 3, M)]
)
def test_batch_not_divisible_by_members_is_an_error(layer):
    x = (
        torch.randn(M * 2 + 1, 3, 2, 2)
        if not isinstance(layer, SigmaLayerNorm)
        else torch.randn(9, 3)
    )
    with pytest.raises(ValueError, match=r"num_estimators = 4, got 9 rows"):
        layer(x)


def test_bad_layer_arguments_name_the_value():
    with pytest.raises(ValueError, match="num_estimators must be an integer >= 1, got 0"):
        SigmaBatchNorm2d(3, 0)
    with pytest.raises(ValueError, match="scale_init_std must be a finite number >= 0, got -1"):
        SigmaLayerNorm(3, 2, scale_init_std=-1.0)
    with pytest.raises(ValueError, match=r"expects a 4-D input, got shape \(8, 3\)"):
        SigmaBatchNorm2d(3, 2)(torch.randn(8, 3))
    with pytest.raises(ValueError, match=r"trailing shape \(3,\), got input shape \(8, 4\)"):
        SigmaLayerNorm(3, 2)(torch.randn(8, 4))


@pytest.mark.parametrize(
    "template",
    [nn.LayerNorm((2, 4)), nn.RMSNorm(4), nn.GroupNorm(2, 4)],
    ids=["layernorm", "rmsnorm", "groupnorm"],
)
@pytest.mark.parametrize("pretrained", [False, True])
def test_per_sample_norm_gradients_pass_gradcheck(template, pretrained):
    """Input, scale-logit and shift gradients of the fused member affine, in float64."""
    layer = signorm_class_for(template).from_module(template, M, pretrained=pretrained).double()
    x = torch.randn(M * 2, 3, 2, 4, dtype=torch.float64, requires_grad=True)
    if isinstance(layer, SigmaGroupNorm):
        x = torch.randn(M * 2, 4, 3, dtype=torch.float64, requires_grad=True)
    logits = layer.scale_logits.detach().clone().requires_grad_(True)
    shift = () if layer.shift is None else (torch.randn_like(layer.shift, requires_grad=True),)

    def run(x, logits, *shift):
        tensors = {"scale_logits": logits, **({"shift": shift[0]} if shift else {})}
        return torch.func.functional_call(layer, tensors, (x,))

    assert torch.autograd.gradcheck(run, (x, logits, *shift))


@pytest.mark.parametrize(
    "make",
    [
        lambda: SigmaBatchNorm2d(4, M),
        lambda: SigmaGroupNorm(2, 4, M),
        lambda: SigmaLayerNorm.from_module(nn.LayerNorm(5), M),
        lambda: SigmaRMSNorm(5, M),
        lambda: SigmaLayerNorm2d(4, M),
    ],
    ids=["batchnorm", "groupnorm", "layernorm", "rmsnorm", "layernorm2d"],
)
def test_in_place_ops_on_a_norm_output_are_plain_and_exact(make):
    """A residual block's ``out += shortcut; out.relu_()`` on a norm output: allowed, with
    the gradients of the out-of-place ops, and no copy-on-write of a view's base."""
    layer = make().train()
    shape = (M * 3, 4, 3, 5) if not isinstance(layer, SigmaLayerNorm) else (M * 3, 2, 5)
    if isinstance(layer, SigmaLayerNorm2d):
        shape = (M * 3, 4, 3, 3)
    x = torch.randn(shape, requires_grad=True)
    shortcut, grad = torch.randn(shape), torch.randn(shape)

    reference = torch.relu(layer(x) + shortcut)
    expected = torch.autograd.grad(reference, (x, *layer.parameters()), grad)
    out = layer(x)
    out_is_a_view = isinstance(layer, SigmaLayerNorm2d)  # its channels-last round trip
    assert (out._base is not None) == out_is_a_view
    out += shortcut
    out.relu_()
    if not out_is_a_view:  # in place on the tensor itself, not through a view's base
        assert type(out.grad_fn).__name__ == "ReluBackward0"
    torch.testing.assert_close(out, reference)
    got = torch.autograd.grad(out, (x, *layer.parameters()), grad)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)
