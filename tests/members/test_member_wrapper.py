"""What a σN-Ens gets from ``MemberWrapper``: each member alone as a plain model, and
TorchUncertainty's feature protocol (``feats_forward``/``linear``). FiLM-Ensemble, LoRA-Ensemble
and the multi-head ensemble on the same base: the lab's lab/tests/members/test_member_wrapper.py.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fixtures.backbones import bert_inputs, randomize_norms, tiny_bert, tiny_resnet
from fixtures.contracts import check_feature_protocol, check_member_models
from torch_uncertainty_signorm import signorm_ensemble
from torch_uncertainty_signorm.members.heads import MemberHeads
from torch_uncertainty_signorm.members.norm import MemberNorm

M = 3
#: Layers holding M members, none of which a member model may keep.
PER_MEMBER = (MemberNorm, MemberHeads)


def _trained_like(model: nn.Module) -> nn.Module:
    """Members that differ: running statistics moved by two training passes."""
    with torch.no_grad():
        if any(
            isinstance(m, nn.BatchNorm2d) or "BatchNorm" in type(m).__name__
            for m in model.modules()
        ):
            model.train()
            for _ in range(2):
                model(torch.randn(4, 3, 32, 32) * 2 + 1)
    return model.eval()


WRAPPERS = {
    "signorm-resnet": (
        lambda: signorm_ensemble(
            randomize_norms(tiny_resnet()), M, pretrained=True, member_spread=0.5
        ),
        lambda: torch.randn(4, 3, 32, 32),
    ),
    "signorm-bert": (
        lambda: signorm_ensemble(
            randomize_norms(tiny_bert()), M, pretrained=True, member_spread=0.5, num_classes=4
        ),
        bert_inputs,
    ),
}


@pytest.mark.parametrize("case", WRAPPERS)
def test_member_model_is_plain_and_equals_the_members_rows(case):
    build, make_inputs = WRAPPERS[case]
    check_member_models(_trained_like(build()), make_inputs(), M, PER_MEMBER)


@pytest.mark.parametrize("case", WRAPPERS)
def test_member_layers_are_the_signorm_layers_by_name(case):
    ensemble = WRAPPERS[case][0]()
    own = ensemble.signorm_layers()
    layers = ensemble.member_layers()
    assert list(layers) == list(own) == ensemble.member_layer_names
    assert all(layers[name] is own[name] for name in own)
    assert all(isinstance(layer, PER_MEMBER) for layer in layers.values())
    first = ensemble.member_layer_names[:1]
    assert list(ensemble.member_layers(first)) == first


def test_a_norm_shared_under_two_names_folds_under_both():
    """A layer registered under two parents is replaced through each of them."""
    shared = nn.LayerNorm(8)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.blocks = nn.Linear(4, 8), nn.ModuleList([shared, nn.Linear(8, 8)])
            self.again, self.fc = shared, nn.Linear(8, 3)

        def forward(self, x):
            return self.fc(self.again(self.blocks[1](self.blocks[0](self.stem(x)))))

    ensemble = signorm_ensemble(randomize_norms(Net()), M, pretrained=True, member_spread=0.5)
    member = ensemble.member_model(1).eval()
    assert not any(isinstance(m, MemberNorm) for m in member.modules())
    assert member.backbone.blocks[0] is member.backbone.again  # still one layer, now plain
    x = torch.randn(5, 4)
    with torch.no_grad():
        torch.testing.assert_close(member(x), ensemble.eval()(x).unflatten(0, (M, -1))[1])


@pytest.mark.parametrize("case", WRAPPERS)
def test_feature_protocol_gives_one_row_per_input_and_the_models_logits(case):
    build, make_inputs = WRAPPERS[case]
    batch = 3 if case.endswith("bert") else 4
    check_feature_protocol(_trained_like(build()), make_inputs(), batch, M)


def test_member_model_keeps_the_ensembles_dtype():
    ensemble = signorm_ensemble(tiny_resnet(), M).double().eval()
    member = ensemble.member_model(2).eval()
    assert {p.dtype for p in member.parameters()} == {torch.float64}
    assert {b.dtype for b in member.buffers() if b.is_floating_point()} == {torch.float64}
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(member(x), ensemble(x).unflatten(0, (M, -1))[2])


def test_an_absurd_member_count_is_refused_before_anything_is_built():
    """M = 100000 would build for minutes and repeat every batch 100000 times: refused at once,
    naming the value and the range."""
    import time

    from torch_uncertainty_signorm.members.wrapper import MAX_NUM_ESTIMATORS

    start = time.perf_counter()
    with pytest.raises(
        ValueError,
        match=rf"num_estimators=100000 is more members than "
        rf"{MAX_NUM_ESTIMATORS} .*use 1\.\.{MAX_NUM_ESTIMATORS}",
    ):
        signorm_ensemble(tiny_resnet(), num_estimators=100_000)
    assert time.perf_counter() - start < 5
