"""SigmaNormEnsemble: member-major contract, conversion, late expansion, bad inputs."""

import copy
import sys

import pytest
import torch
from torch import nn

from fixtures.backbones import (
    bert_inputs,
    randomize_norms,
    relative_error,
    tiny_bert,
    tiny_resnet,
    tiny_vit,
    tiny_wideresnet,
)
from torch_uncertainty_signorm import SigmaNormEnsemble, signorm_cosine, signorm_ensemble
from torch_uncertainty_signorm.signorm.layers import SigmaNorm

M = 4


def test_logits_are_member_major_and_members_are_independent():
    model = signorm_ensemble(tiny_resnet(), M).eval()
    x = torch.randn(3, 3, 32, 32)
    logits = model(x)
    assert logits.shape == (M * 3, 10)
    with torch.no_grad():
        model.backbone.layer2[0].bn1.scale_logits[2].add_(1.0)
        model.heads.weight[2].mul_(2.0)
    changed = (model(x) - logits).abs().amax(dim=1).view(M, 3).amax(dim=1)
    assert changed[2] > 1e-5
    assert torch.all(changed[[0, 1, 3]] == 0)


def test_every_norm_layer_is_replaced_and_features_are_member_major():
    model = signorm_ensemble(tiny_resnet(), M)
    plain = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    assert plain == []
    assert len(model.signorm_layers()) == 20  # stem + 16 block norms + 3 shortcut norms
    assert model.forward_features(torch.randn(2, 3, 32, 32)).shape == (M * 2, 64)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize(
    ("make_model", "shape", "point"),
    [
        (tiny_resnet, (3, 3, 32, 32), "bn1"),
        (lambda: tiny_resnet(50), (2, 3, 32, 32), "bn1"),
        (tiny_wideresnet, (3, 3, 32, 32), "bn1"),
        (tiny_vit, (3, 3, 32, 32), "blocks"),
    ],
)
def test_late_expansion_equals_expanding_at_the_input(make_model, shape, point, train):
    backbone = make_model()
    torch.manual_seed(1)
    late = signorm_ensemble(copy.deepcopy(backbone), M)
    torch.manual_seed(1)
    early = signorm_ensemble(copy.deepcopy(backbone), M, expand_at="input")
    assert late.expand_at == point and early.expand_at == "input"
    late.train(train)
    early.train(train)
    x = torch.randn(shape)
    torch.testing.assert_close(late(x), early(x), rtol=1e-5, atol=1e-5)


def test_wrong_expansion_point_is_caught_on_the_first_forward():
    model = signorm_ensemble(tiny_resnet(), M, expand_at="layer1")
    with pytest.raises(RuntimeError, match=r"'bn1' received 4 rows, expected M·B = 16"):
        model(torch.randn(4, 3, 32, 32))


def _assert_members_reproduce(original_features, ensemble, inputs):
    ensemble.eval()
    with torch.no_grad():
        features = ensemble.forward_features(inputs).unflatten(0, (M, -1))
    for member in features:
        assert relative_error(member, original_features) <= 1e-5


def test_conversion_preserves_a_torch_uncertainty_resnet_with_any_scale_sign():
    original = randomize_norms(tiny_resnet()).eval()
    assert any((m.weight <= 0).any() for m in original.modules() if isinstance(m, nn.BatchNorm2d))
    x = torch.randn(5, 3, 32, 32)
    with torch.no_grad():
        expected = original.feats_forward(x)
    ensemble = signorm_ensemble(copy.deepcopy(original), M, pretrained=True)
    _assert_members_reproduce(expected, ensemble, x)


def test_conversion_preserves_a_timm_vit():
    original = randomize_norms(tiny_vit()).eval()
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        expected = original.forward_head(original.forward_features(x), pre_logits=True)
    ensemble = signorm_ensemble(copy.deepcopy(original), M, pretrained=True)
    _assert_members_reproduce(expected, ensemble, x)


def test_conversion_preserves_a_bert_classifier_on_tokenizer_inputs():
    original = randomize_norms(tiny_bert()).eval()
    inputs = bert_inputs()
    with torch.no_grad():
        expected = original.bert(**inputs).pooler_output
    ensemble = signorm_ensemble(copy.deepcopy(original), M, pretrained=True)
    assert ensemble.expand_at == "input"
    _assert_members_reproduce(expected, ensemble, inputs)
    assert ensemble(inputs).shape == (M * 3, 2)


def test_from_scratch_members_differ_and_heads_are_fresh():
    model = signorm_ensemble(tiny_resnet(), M).eval()
    logits = model(torch.randn(2, 3, 32, 32)).view(M, 2, -1)
    assert (logits[0] - logits[1]).abs().max() > 1e-3
    assert signorm_cosine(model.importances()) < 0.95


def test_torchvision_resnet_and_nested_modules_with_a_shared_norm():
    from torchvision.models import resnet18

    model = signorm_ensemble(resnet18(num_classes=7), M)
    assert model.expand_at == "bn1" and model(torch.randn(2, 3, 32, 32)).shape == (M * 2, 7)

    shared = nn.BatchNorm1d(8)
    nested = nn.Sequential(
        nn.Linear(4, 8),
        nn.ModuleList([nn.Sequential(shared, nn.ReLU()), nn.Sequential(shared)]),
        nn.ModuleDict({"inner": nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8))}),
    )

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body, self.fc = nested, nn.Linear(8, 3)

        def forward(self, x):
            x = self.body[0](x)
            x = self.body[1][1](self.body[1][0](x))
            return self.fc(self.body[2]["inner"](x))

    net = signorm_ensemble(Net(), M)
    assert net.backbone.body[1][0][0] is net.backbone.body[1][1][0]  # still shared
    assert not any(type(m) in (nn.BatchNorm1d, nn.LayerNorm) for m in net.modules())
    assert net(torch.randn(5, 4)).shape == (M * 5, 3)
    assert net.heads.norm.__class__.__name__ == "HeadLayerNorm"


def test_diversity_loss_and_scale_logit_accessor():
    model = signorm_ensemble(
        tiny_resnet(), M, regularized_layers="resnet18", tau=0.2, diversity_strength=0.5
    )
    from torch_uncertainty_signorm import sharing_penalty

    regularized = [
        model.backbone.get_submodule(n).importance() for n in model.regularized_layer_names
    ]
    expected = 0.5 * sum(sharing_penalty(imp, 0.2) for imp in regularized)
    torch.testing.assert_close(model.diversity_loss(), expected)
    logits = model.scale_logits()
    named = [p for n, p in model.named_parameters() if n.endswith("scale_logits")]
    assert len(logits) == len(named) == 20  # the 20 backbone σBN layers (heads: plain BN)
    assert {id(p) for p in logits} == {id(p) for p in named}
    model.diversity_loss().backward()
    assert model.backbone.layer1[0].bn2.scale_logits.grad.abs().sum() > 0
    assert model.backbone.layer1[0].bn1.scale_logits.grad is None  # not regularized


def test_state_dict_round_trip_keeps_every_member():
    model = signorm_ensemble(tiny_resnet(), M).eval()
    clone = signorm_ensemble(tiny_resnet(), M).eval()
    clone.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(clone(x), model(x))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_estimators": 0},
        {"regularized_layers": "resnet34"},
        {"expand_at": "stem"},
        {"head": "classifier"},
        {"pretrained": True},
    ],
    ids=lambda kwargs: next(iter(kwargs)),
)
def test_a_refused_setting_leaves_the_given_model_untouched(kwargs):
    """Refused before or after conversion has started, the caller's model keeps its layers
    (each error's message is in tests/test_bad_inputs.py's catalogue)."""
    model = tiny_resnet()
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(ValueError):
        SigmaNormEnsemble(model, **{"num_estimators": M, **kwargs})
    assert not any(isinstance(m, SigmaNorm) for m in model.modules())
    assert model.state_dict().keys() == before.keys()
    assert all(torch.equal(value, before[key]) for key, value in model.state_dict().items())


def test_inputs_of_the_wrong_type_are_rejected():
    model = signorm_ensemble(tiny_resnet(), M)
    with pytest.raises(TypeError, match=r"tensor or a mapping of tensors.*got list"):
        model([torch.randn(1, 3, 32, 32)])


def test_pretrained_is_refused_on_untrained_weights_but_taken_once_anything_was_learned():
    with pytest.raises(
        ValueError,
        match=r"pretrained=True but .*_ResNet .*Load them into the backbone first .*"
        r"signorm_lab\.models\.finetune\.finetune_ensemble",
    ):
        signorm_ensemble(tiny_resnet(), M, pretrained=True)
    seen_data = tiny_resnet().train()
    seen_data(torch.randn(4, 3, 32, 32))  # BatchNorm statistics move; scales are still 1
    assert signorm_ensemble(seen_data, M, pretrained=True).backbone.bn1.magnitude is not None
    with pytest.raises(ValueError, match=r"SequenceClassifier|BertForSequenceClassification"):
        signorm_ensemble(tiny_bert(), M, pretrained=True)  # LayerNorm at 1 / 0: random BERT


def test_the_deprecated_checkpoint_argument_warns_and_needs_the_lab(monkeypatch):
    """The method reads no file: ``checkpoint=`` (0.1.0) is handed to the lab, imported only
    then; without the lab it says what to install, leaving the model untouched."""
    with pytest.raises(ValueError, match=r"checkpoint='single.ckpt' needs pretrained=True"):
        signorm_ensemble(tiny_resnet(), M, checkpoint="single.ckpt")
    monkeypatch.setitem(sys.modules, "signorm_lab.models.finetune", None)  # not installed
    model = randomize_norms(tiny_resnet())
    with (
        pytest.warns(FutureWarning, match=r"removed in 0\.3\.0: the lab's signorm_lab\.models"),
        pytest.raises(ImportError, match=r"is read by the lab: pip install signorm-lab"),
    ):
        signorm_ensemble(model, M, pretrained=True, checkpoint="single.ckpt")
    assert not any(isinstance(m, SigmaNorm) for m in model.modules())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_heads_follow_the_backbone_dtype(dtype):
    model = signorm_ensemble(tiny_resnet().to(dtype), M)
    floats = [
        t for t in [*model.heads.parameters(), *model.heads.buffers()] if t.is_floating_point()
    ]
    assert {t.dtype for t in floats} == {dtype}
    assert model.heads(torch.randn(2 * M, 64, dtype=dtype)).dtype == dtype


def test_a_meta_backbone_gives_a_meta_ensemble():
    with torch.device("meta"):
        backbone = tiny_resnet()
    model = signorm_ensemble(backbone, M)
    assert {t.device.type for t in [*model.parameters(), *model.buffers()]} == {"meta"}


def test_integer_token_ids_are_taken_by_a_text_backbone():
    model = signorm_ensemble(tiny_bert(), M).eval()
    input_ids = bert_inputs()["input_ids"]
    assert model(input_ids).shape == (M * 3, 2)


def _backbone_passes(model, inputs):
    """Output of ``model(inputs)`` and the number of backbone passes it took."""
    calls = []
    handle = model.backbone.register_forward_pre_hook(lambda module, args: calls.append(1))
    try:
        output = model(inputs)
    finally:
        handle.remove()
    return output, len(calls)


@pytest.mark.parametrize(("chunk_rows", "passes"), [(2 * M, 4), (3 * M, 3), (1, 7), (None, 1)])
def test_evaluation_in_parts_gives_the_logits_and_features_of_one_pass(chunk_rows, passes):
    model = signorm_ensemble(randomize_norms(tiny_resnet()), M, eval_chunk_size=None)
    model.train()(torch.randn(8, 3, 32, 32))  # running statistics for evaluation
    model.eval()
    x = torch.randn(7, 3, 32, 32)
    with torch.no_grad():
        expected, features = model(x), model.forward_features(x)
        model.eval_chunk_size = chunk_rows
        actual, count = _backbone_passes(model, x)
        torch.testing.assert_close(actual, expected, rtol=0, atol=1e-6)
        torch.testing.assert_close(model.forward_features(x), features, rtol=0, atol=1e-6)
    assert count == passes


def test_evaluation_in_parts_splits_every_tensor_of_a_tokenizer_mapping():
    model = signorm_ensemble(tiny_bert(), M, eval_chunk_size=None).eval()
    inputs = bert_inputs(batch_size=5)
    with torch.no_grad():
        expected = model(inputs)
        model.eval_chunk_size = 2 * M
        actual, count = _backbone_passes(model, inputs)
    torch.testing.assert_close(actual, expected, rtol=0, atol=1e-6)
    assert count == 3


def test_training_and_batch_statistics_in_evaluation_run_in_one_pass():
    model = signorm_ensemble(tiny_resnet(), M, eval_chunk_size=M)
    x = torch.randn(5, 3, 32, 32)
    assert _backbone_passes(model.train(), x)[1] == 1
    assert model.eval().eval_inputs_per_pass(x) == 1
    model.backbone.bn1.track_running_stats = False  # statistics of whatever batch it sees
    assert model.eval_inputs_per_pass(x) is None
    assert _backbone_passes(model, x)[1] == 1


def test_auto_evaluation_parts_apply_on_cpu_only():
    from torch_uncertainty_signorm.signorm.ensemble import CPU_EVAL_CHUNK_ROWS

    model = signorm_ensemble(tiny_resnet(), M).eval()
    assert model.eval_chunk_size == "auto"
    assert model.eval_inputs_per_pass(torch.randn(2, 3, 32, 32)) == CPU_EVAL_CHUNK_ROWS // M
    assert model.eval_inputs_per_pass(torch.empty(2, 3, 32, 32, device="meta")) is None


@pytest.mark.parametrize("value", [0, -4, True, 2.5, "all"])
def test_eval_chunk_size_must_be_auto_none_or_a_positive_integer(value):
    with pytest.raises(
        ValueError, match=f"eval_chunk_size must be 'auto', None or an integer >= 1.*got {value!r}"
    ):
        signorm_ensemble(tiny_resnet(), M, eval_chunk_size=value)


def test_the_factory_has_the_classs_arguments_and_a_short_help():
    """help(signorm_ensemble) was 1,263 lines (the class with every nn.Module method): the
    factory shows its signature and a few lines of what and why."""
    import inspect
    import pydoc

    assert (
        inspect.signature(signorm_ensemble).parameters
        == inspect.signature(SigmaNormEnsemble).parameters
    )
    assert len(pydoc.render_doc(signorm_ensemble, renderer=pydoc.plaintext).splitlines()) < 40
    assert type(signorm_ensemble(tiny_resnet(), 2, tau=0.5)) is SigmaNormEnsemble
