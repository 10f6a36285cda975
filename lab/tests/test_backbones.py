"""Pretrained transformer factories: local weights round trip, σN-Ens conversion, TU wrappers."""

from __future__ import annotations

import pytest
import torch
from torch_uncertainty.methods import deep_ensembles

from fixtures.backbones import bert_inputs, randomize_norms, relative_error, tiny_bert
from signorm_lab.models.backbones import SequenceClassifier, bert_classifier, timm_vit
from torch_uncertainty_signorm import signorm_ensemble

M = 3


def _features_without_head(model: torch.nn.Module, inputs) -> torch.Tensor:
    """What precedes the classifier: the reference each converted member must reproduce."""
    if isinstance(model, SequenceClassifier):
        model.model.classifier = torch.nn.Identity()
    else:
        model.reset_classifier(0)
    return model(inputs)


def _assert_members_reproduce(ensemble, reference: torch.Tensor, inputs) -> None:
    with torch.no_grad():
        members = ensemble.forward_features(inputs).unflatten(0, (M, -1))
    for member in members:
        assert relative_error(member, reference) <= 1e-5


@pytest.fixture
def vit_weights(tmp_path):
    """A timm test_vit with pretrained-like norms (scales of both signs, zeros), saved to a file."""
    import timm
    from safetensors.torch import save_file

    model = randomize_norms(timm.create_model("test_vit", img_size=32, num_classes=10))
    path = tmp_path / "test_vit.safetensors"
    save_file(model.state_dict(), str(path))
    return model.eval(), path


def test_timm_vit_loads_a_local_file_and_its_conversion_preserves_every_member(vit_weights):
    saved, path = vit_weights
    loaded = timm_vit("test_vit", num_classes=10, img_size=32, pretrained_path=path).eval()
    saved_state, loaded_state = saved.state_dict(), loaded.state_dict()
    assert all(torch.equal(saved_state[k], v) for k, v in loaded_state.items() if "head" not in k)
    assert not torch.equal(saved_state["head.weight"], loaded_state["head.weight"])  # fresh head
    assert all(m.p == 0 for m in loaded.modules() if isinstance(m, torch.nn.Dropout))

    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        reference = _features_without_head(
            timm_vit("test_vit", num_classes=10, img_size=32, pretrained_path=path).eval(), images
        )
    ensemble = signorm_ensemble(loaded, M, pretrained=True, regularized_layers="transformer")
    assert ensemble.regularized_layer_names == [
        "blocks.0.norm2",
        "blocks.1.norm2",
        "blocks.2.norm2",
        "blocks.3.norm2",
        "blocks.4.norm2",
        "blocks.5.norm2",
    ]
    _assert_members_reproduce(ensemble.eval(), reference, images)


@pytest.fixture
def bert_directory(tmp_path):
    """A tiny BERT classifier with pretrained-like norms, saved with save_pretrained."""
    model = randomize_norms(tiny_bert())
    model.save_pretrained(tmp_path / "bert")
    return model.eval(), tmp_path / "bert"


def test_bert_classifier_loads_a_local_directory_and_its_conversion_preserves_every_member(
    bert_directory,
):
    saved, directory = bert_directory
    loaded = bert_classifier(pretrained_path=directory).eval()
    saved_state, loaded_state = saved.state_dict(), loaded.model.state_dict()
    assert all(
        torch.equal(saved_state[k], v)
        for k, v in loaded_state.items()
        if not k.startswith("classifier")
    )
    assert not torch.equal(saved_state["classifier.weight"], loaded_state["classifier.weight"])
    assert loaded.model.config.hidden_dropout_prob == 0

    inputs = bert_inputs()
    with torch.no_grad():
        reference = _features_without_head(
            bert_classifier(pretrained_path=directory).eval(), inputs
        )
    # The classifier inside the wrapper is found without head=.
    ensemble = signorm_ensemble(loaded, M, pretrained=True, regularized_layers="transformer")
    assert ensemble.regularized_layer_names == [
        "model.bert.encoder.layer.0.output.LayerNorm",
        "model.bert.encoder.layer.1.output.LayerNorm",
    ]
    _assert_members_reproduce(ensemble.eval(), reference, inputs)
    assert ensemble(inputs).shape == (M * 3, 2)


def test_bert_random_init_from_a_local_config_is_random_and_refused_as_pretrained(bert_directory):
    saved, directory = bert_directory
    random = bert_classifier(pretrained=False, pretrained_path=directory).eval()
    other = bert_classifier(pretrained=False, pretrained_path=directory).eval()
    embeddings = "bert.embeddings.word_embeddings.weight"
    weights = [m.state_dict()[embeddings] for m in (saved, random.model, other.model)]
    assert not torch.equal(weights[0], weights[1]) and not torch.equal(weights[1], weights[2])
    with pytest.raises(ValueError, match=r"initial state .*no pretrained weights were loaded"):
        signorm_ensemble(random, M, pretrained=True)
    assert signorm_ensemble(random, M)(bert_inputs()).shape == (M * 3, 2)


def test_sequence_classifier_takes_the_mapping_positionally_or_as_keywords(bert_directory):
    _, directory = bert_directory
    model = bert_classifier(pretrained_path=directory).eval()
    inputs = bert_inputs()
    with torch.no_grad():
        expected = model.model(**inputs).logits
        assert torch.equal(model(inputs), expected)
        assert torch.equal(model(**inputs), expected)
        ids_only = model.model(input_ids=inputs["input_ids"]).logits
        assert torch.equal(model(inputs["input_ids"]), ids_only)
    with pytest.raises(TypeError, match="tokenizer's mapping"):
        model([1, 2, 3])


def test_torch_uncertainty_deep_ensembles_of_bert_take_tokenizer_inputs(bert_directory):
    _, directory = bert_directory
    members = [bert_classifier(pretrained_path=directory) for _ in range(M)]
    ensemble = deep_ensembles(members, task="classification", reset_model_parameters=False).eval()
    inputs = bert_inputs()
    with torch.no_grad():
        logits = ensemble(inputs)
        expected = torch.cat([member(inputs) for member in members])
    assert logits.shape == (M * 3, 2) and torch.equal(logits, expected)
    assert not torch.allclose(logits[:3], logits[3:6])  # members differ by their fresh heads


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda p: timm_vit("not_a_timm_model"), ValueError, "not_a_timm_model.*is not a timm"),
        (
            lambda p: timm_vit("test_vit", pretrained_path=p / "missing.safetensors"),
            FileNotFoundError,
            "missing.safetensors.*is not a file",
        ),
        (lambda p: timm_vit("test_vit", num_classes=0), ValueError, "num_classes.*got 0"),
        (lambda p: bert_classifier(pretrained_path=p), FileNotFoundError, "config.json"),
        (lambda p: bert_classifier(pretrained_path=p / "absent"), FileNotFoundError, "absent"),
        (
            lambda p: bert_classifier(str(p / "nowhere"), pretrained=False),
            ValueError,
            "nowhere.*could not be resolved",
        ),
        (lambda p: bert_classifier(num_classes=True), ValueError, "num_classes.*True"),
    ],
)
def test_bad_inputs_name_the_value(tmp_path, build, error, message):
    with pytest.raises(error, match=message):
        build(tmp_path)


def test_a_pretrained_bert_classifier_comes_in_training_mode(bert_directory):
    """Hugging Face's from_pretrained returns eval mode, which Lightning would keep when
    training."""
    _, directory = bert_directory
    model = bert_classifier(pretrained_path=directory)
    assert all(module.training for module in model.modules())


def test_wideresnet28_is_torch_uncertaintys_at_widen_10_and_narrows_for_a_laptop():
    from torch_uncertainty.models.classification import wideresnet28x10
    from torch_uncertainty.models.classification.resnet.utils import ResNetStyle

    from signorm_lab.models.backbones import wideresnet28
    from signorm_lab.safety.allowlist import MODEL_CLASS_PATHS

    wide = wideresnet28(3, 100, style="CIFAR", dropout_rate=0.0)
    theirs = wideresnet28x10(3, 100, style=ResNetStyle.CIFAR, dropout_rate=0.0)
    assert {k: v.shape for k, v in wide.state_dict().items()} == {
        k: v.shape for k, v in theirs.state_dict().items()
    }
    narrow = wideresnet28(3, 100, widen_factor=1, style="CIFAR", dropout_rate=0.0)

    def norms(model):
        return [name for name, m in model.named_modules() if isinstance(m, torch.nn.BatchNorm2d)]

    assert norms(narrow) == norms(wide)  # the same normalization layers, a tenth of the width
    assert sum(p.numel() for p in narrow.parameters()) < 0.4e6
    assert "signorm_lab.models.backbones.wideresnet28" in MODEL_CLASS_PATHS
    with pytest.raises(ValueError, match="widen_factor"):
        wideresnet28(3, 10, widen_factor=0)
