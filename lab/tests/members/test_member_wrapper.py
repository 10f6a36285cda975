"""What FiLM-Ensemble, LoRA-Ensemble and the multi-head ensemble get from the method's
``MemberWrapper``, as σN-Ens does (the method's tests/members/test_member_wrapper.py): each member
alone as a plain model, and TorchUncertainty's feature protocol (``feats_forward``/``linear``)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch_uncertainty.routines import ClassificationRoutine
from torch_uncertainty.transforms import RepeatTarget

from fixtures.backbones import bert_inputs, tiny_bert, tiny_resnet, tiny_vit
from fixtures.contracts import check_feature_protocol, check_member_models
from signorm_lab.baselines import (
    MemberLinear,
    MemberLoRALinear,
    film_ensemble,
    lora_ensemble,
    multi_head_ensemble,
)
from torch_uncertainty_signorm.members.heads import MemberHeads
from torch_uncertainty_signorm.members.norm import MemberNorm

M = 3
#: Layers holding M members, none of which a member model may keep.
PER_MEMBER = (MemberNorm, MemberHeads, MemberLinear, MemberLoRALinear)


def _trained_like(model: nn.Module) -> nn.Module:
    """Members that differ: running statistics moved by two training passes, LoRA's ``B``
    (zero at initialisation) drawn."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("lora_B"):
                param.normal_(0.0, 0.1)
        if any(
            isinstance(m, nn.BatchNorm2d) or "BatchNorm" in type(m).__name__
            for m in model.modules()
        ):
            model.train()
            for _ in range(2):
                model(torch.randn(4, 3, 32, 32) * 2 + 1)
    return model.eval()


WRAPPERS = {
    "film-resnet": (
        lambda: film_ensemble(tiny_resnet(), M, gain=1.0),
        lambda: torch.randn(4, 3, 32, 32),
    ),
    "lora-vit": (
        lambda: lora_ensemble(tiny_vit(), M, num_classes=5),
        lambda: torch.randn(4, 3, 32, 32),
    ),
    "lora-bert": (lambda: lora_ensemble(tiny_bert(), M, num_classes=4), bert_inputs),
    "multi_head-resnet": (
        lambda: multi_head_ensemble(tiny_resnet(), M),
        lambda: torch.randn(4, 3, 32, 32),
    ),
    "multi_head-bert": (lambda: multi_head_ensemble(tiny_bert(), M, num_classes=4), bert_inputs),
}


@pytest.mark.parametrize("case", WRAPPERS)
def test_member_model_is_plain_and_equals_the_members_rows(case):
    build, make_inputs = WRAPPERS[case]
    check_member_models(_trained_like(build()), make_inputs(), M, PER_MEMBER)


@pytest.mark.parametrize("case", [case for case in WRAPPERS if "multi_head" not in case])
def test_member_layers_are_each_methods_per_member_layers_by_name(case):
    ensemble = WRAPPERS[case][0]()
    method = {"film": "film_layers", "lora": "adapters"}
    own = getattr(ensemble, method[case.split("-")[0]])()
    layers = ensemble.member_layers()
    assert list(layers) == list(own) == ensemble.member_layer_names
    assert all(layers[name] is own[name] for name in own)
    assert all(isinstance(layer, PER_MEMBER) for layer in layers.values())
    first = ensemble.member_layer_names[:1]
    assert list(ensemble.member_layers(first)) == first


@pytest.mark.parametrize("case", WRAPPERS)
def test_feature_protocol_gives_one_row_per_input_and_the_models_logits(case):
    build, make_inputs = WRAPPERS[case]
    batch = 3 if case.endswith("bert") else 4
    check_feature_protocol(_trained_like(build()), make_inputs(), batch, M)


@pytest.mark.parametrize("case", ["film-resnet", "lora-vit", "multi_head-resnet"])
def test_torch_uncertainty_routine_takes_the_features_of_the_baselines(case):
    """TorchUncertainty's routine (single-model metrics: it refuses grouping loss with
    ``is_ensemble``) accepts the baselines with ``eval_grouping_loss`` and gets their logits
    through ``feats_forward``/``linear``."""
    build, make_inputs = WRAPPERS[case]
    ensemble = _trained_like(build())
    classes = 5 if case == "lora-vit" else 10
    routine = ClassificationRoutine(
        ensemble,
        classes,
        nn.CrossEntropyLoss(),
        is_ensemble=False,
        format_batch_fn=RepeatTarget(M),
        eval_grouping_loss=True,
    )
    inputs = make_inputs()
    with torch.no_grad():
        expected = routine.forward(inputs)
        logits = routine.forward(inputs, save_feats=True)
    torch.testing.assert_close(logits, expected, rtol=0, atol=0)
    assert routine.features.shape[0] == inputs.shape[0]
