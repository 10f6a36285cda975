"""LoRA-Ensemble: frozen backbone, per-member attention adapters and heads, one batched pass."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from fixtures.backbones import bert_inputs, tiny_bert, tiny_vit
from signorm_lab.baselines import LoRAEnsemble, MemberLoRALinear, lora_ensemble

M = 3


def _vit_case():
    vit = tiny_vit()
    reference = copy.deepcopy(vit)
    reference.reset_classifier(0)
    return vit, reference, torch.randn(2, 3, 32, 32), lambda model, x: model(x)


def _bert_case():
    bert = tiny_bert()
    reference = copy.deepcopy(bert)
    reference.classifier = nn.Identity()
    return bert, reference, bert_inputs(), lambda model, x: model(**x).logits


CASES = {"vit": _vit_case, "bert": _bert_case}


@pytest.mark.parametrize("case", CASES)
def test_every_member_starts_as_the_frozen_backbone(case):
    model, reference, x, features = CASES[case]()
    lora = lora_ensemble(model, M, num_classes=4).eval()
    expected = features(reference.eval(), x)
    for member in lora.forward_features(x).unflatten(0, (M, -1)):
        torch.testing.assert_close(member, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", CASES)
def test_one_step_changes_only_adapters_and_heads(case):
    model, _, x, _ = CASES[case]()
    lora = lora_ensemble(model, M, num_classes=4)
    before = {name: p.detach().clone() for name, p in lora.named_parameters()}
    optimizer = torch.optim.SGD(lora.parameters(), lr=0.5, momentum=0.9, weight_decay=1e-4)
    targets = torch.randint(0, 4, (2 if case == "vit" else 3,)).repeat(M)
    nn.functional.cross_entropy(lora(x), targets).backward()
    optimizer.step()
    changed = {n for n, p in lora.named_parameters() if not torch.equal(p, before[n])}
    trainable = {n for n, p in lora.named_parameters() if p.requires_grad}
    assert changed <= trainable
    assert trainable == {n for n in before if "lora_" in n or n.startswith("heads.")}
    assert {"heads.weight", "heads.bias"} <= changed
    assert any(n.endswith("lora_B") for n in changed)  # B moves first (A's gradient is B·… = 0)


@pytest.mark.parametrize("case", CASES)
def test_batched_pass_equals_each_member_merged_into_the_weights(case):
    model, reference, x, features = CASES[case]()
    lora = lora_ensemble(model, M, num_classes=4, alpha=16.0).eval()
    with torch.no_grad():
        for adapter in lora.adapters().values():
            adapter.lora_B.normal_(0, 0.05)
    logits = lora(x).unflatten(0, (M, -1))
    for m in range(M):
        merged = copy.deepcopy(reference).eval()
        with torch.no_grad():
            for name, adapter in lora.adapters().items():
                merged.get_submodule(name).weight += adapter.delta_weight(m)
        head = lora.heads
        expected = features(merged, x) @ head.weight[m].T + head.bias[m]
        torch.testing.assert_close(logits[m], expected, rtol=1e-4, atol=1e-5)
        assert (logits[m] - logits[(m + 1) % M]).abs().max() > 1e-4


def test_fused_qkv_gets_one_adapter_per_slice_with_high_variance_down_projection():
    lora = lora_ensemble(tiny_vit(), M, rank=4, alpha=4.0, init_gain=10.0)
    adapter = lora.adapters()["blocks.0.attn.qkv"]
    assert adapter.lora_A.shape == (M, 3, 4, 32) and adapter.lora_B.shape == (M, 3, 32, 4)
    assert adapter.scaling == 1.0
    bound = 10.0 * (6.0 / (32 + 4)) ** 0.5  # Xavier-uniform bound with gain 10
    assert bound * 0.9 < adapter.lora_A.abs().max() <= bound
    assert torch.count_nonzero(adapter.lora_B) == 0
    state = lora.state_dict()
    assert "backbone.blocks.0.attn.qkv.lora_A" in state  # adapters are saved with the model


def test_target_modules_use_the_layer_selection_grammar():
    """Preset, regex and suffix list select as for regularized_layers; the head is never a
    target."""
    vit_qkv = [f"blocks.{i}.attn.qkv" for i in range(2)]
    assert lora_ensemble(tiny_vit(), M).adapted_layer_names == vit_qkv
    assert lora_ensemble(tiny_vit(), M, target_modules="attention").adapted_layer_names == vit_qkv
    assert lora_ensemble(tiny_vit(), M, target_modules=r"blocks\.1\..*qkv").adapted_layer_names == [
        vit_qkv[1]
    ]
    bert = lora_ensemble(tiny_bert(), M, target_modules=["query", "value"])
    assert [n.rpartition(".")[2] for n in bert.adapted_layer_names] == ["query", "value"] * 2


def test_bad_inputs():
    with pytest.raises(ValueError, match="rank must be an integer >= 1, got 0"):
        lora_ensemble(tiny_vit(), M, rank=0)
    with pytest.raises(ValueError, match="alpha must be a finite number > 0, got -1"):
        lora_ensemble(tiny_vit(), M, alpha=-1)
    with pytest.raises(ValueError, match="num_estimators must be an integer >= 1, got 0"):
        lora_ensemble(tiny_vit(), 0)
    with pytest.raises(
        ValueError,
        match=r"target_modules entry 'out_proj' matches no nn.Linear"
        r"\. Available layers: blocks\.0\.attn\.qkv",
    ):
        lora_ensemble(tiny_vit(), M, target_modules=["qkv", "out_proj"])
    with pytest.raises(ValueError, match="target_modules must be a preset name, a regex or a"):
        lora_ensemble(tiny_vit(), M, target_modules=5)
    with pytest.raises(ValueError, match=r"target_modules pattern 'head' matches no nn.Linear"):
        lora_ensemble(tiny_vit(), M, target_modules="head")  # the replaced classifier
    with pytest.raises(ValueError, match="expand_at='stem' is not a module of VisionTransformer"):
        LoRAEnsemble(tiny_vit(), M, expand_at="stem")
    with pytest.raises(TypeError, match=r"adapts an nn.Linear, got Conv2d"):
        MemberLoRALinear(nn.Conv2d(2, 2, 1), M)
    with pytest.raises(ValueError, match="num_slices=3 does not divide the 4 output features"):
        MemberLoRALinear(nn.Linear(2, 4), M, num_slices=3)
    with pytest.raises(ValueError, match="num_estimators = 3, got 4 rows"):
        MemberLoRALinear(nn.Linear(2, 4), M)(torch.randn(4, 2))


@pytest.mark.parametrize("case", CASES)
def test_heads_follow_the_backbone_dtype_and_device(case):
    """The member heads replace the classifier where it was: a half-precision backbone gets
    half-precision heads, and a meta one meta heads (as σN-Ens's)."""
    model = CASES[case]()[0].to(torch.bfloat16)
    lora = lora_ensemble(model, M, num_classes=4)
    assert {p.dtype for p in lora.heads.parameters()} == {torch.bfloat16}
    with torch.device("meta"):
        meta = CASES[case]()[0]
    assert {p.device.type for p in lora_ensemble(meta, M, num_classes=4).heads.parameters()} == {
        "meta"
    }
