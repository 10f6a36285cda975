"""Exports are self-contained: they reload offline, without the pretrained weights, the Hugging Face
model directory or the FineTune checkpoint they were built from."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from fixtures.backbones import bert_inputs, randomize_norms, tiny_bert, tiny_resnet
from signorm_lab.export import (
    export_ensemble,
    load_ensemble,
    load_member,
    member_model,
)
from signorm_lab.models.backbones import bert_classifier, timm_vit
from signorm_lab.models.finetune import finetune_ensemble
from torch_uncertainty_signorm import signorm_ensemble

M = 2
ENSEMBLE = "torch_uncertainty_signorm.signorm_ensemble"


def _no_download(*args, **kwargs):
    raise AssertionError(f"loading the export read a model from {args[0]!r}")


def _export_delete_reload(ensemble, spec, source, out, inputs, monkeypatch, forbid=()) -> None:
    """Export, delete ``source``, reload offline (``forbid``: loaders that must not be called);
    outputs must be bit-identical."""
    ensemble.eval()
    export_ensemble(ensemble, spec, out, members=True)
    shutil.rmtree(source) if source.is_dir() else source.unlink()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in forbid:
        monkeypatch.setattr(name, _no_download)
    assert str(source) not in (out / "config.json").read_text()

    reloaded = load_ensemble(out)
    with torch.no_grad():
        assert torch.equal(reloaded(inputs), ensemble(inputs))
        assert torch.equal(load_member(out, 1)(inputs), member_model(ensemble, 1).eval()(inputs))


@pytest.mark.slow
def test_bert_export_reloads_without_its_model_directory(tmp_path, monkeypatch):
    randomize_norms(tiny_bert()).save_pretrained(tmp_path / "bert")
    spec = {
        "class_path": ENSEMBLE,
        "init_args": {
            "model": {
                "class_path": "signorm_lab.models.backbones.bert_classifier",
                "init_args": {"pretrained_path": str(tmp_path / "bert")},
            },
            "num_estimators": M,
            "pretrained": True,
        },
    }
    ensemble = signorm_ensemble(
        bert_classifier(pretrained_path=tmp_path / "bert"), M, pretrained=True
    )
    loaders = ("AutoConfig", "AutoModelForSequenceClassification")
    _export_delete_reload(
        ensemble,
        spec,
        tmp_path / "bert",
        tmp_path / "export",
        bert_inputs(),
        monkeypatch,
        [f"transformers.{n}.from_pretrained" for n in loaders],
    )
    config = json.loads((tmp_path / "export" / "config.json").read_text())["model"]
    backbone = config["init_args"]["model"]["init_args"]
    assert backbone["pretrained"] is False and backbone["config"]["hidden_size"] == 32
    assert config["init_args"]["pretrained"] is True  # the conversion's layout is kept


def test_timm_vit_export_reloads_without_its_weights_file(tmp_path, monkeypatch):
    import timm
    from safetensors.torch import save_file

    weights = tmp_path / "test_vit.safetensors"
    model = randomize_norms(timm.create_model("test_vit", img_size=32, num_classes=10))
    save_file(model.state_dict(), str(weights))
    backbone = {
        "model_name": "test_vit",
        "num_classes": 10,
        "img_size": 32,
        "pretrained_path": str(weights),
    }
    spec = {
        "class_path": ENSEMBLE,
        "init_args": {
            "model": {
                "class_path": "signorm_lab.models.backbones.timm_vit",
                "init_args": backbone,
            },
            "num_estimators": M,
            "pretrained": True,
            "regularized_layers": "transformer",
        },
    }
    ensemble = signorm_ensemble(
        timm_vit(**backbone), M, pretrained=True, regularized_layers="transformer"
    )
    _export_delete_reload(
        ensemble,
        spec,
        weights,
        tmp_path / "export",
        torch.randn(3, 3, 32, 32),
        monkeypatch,
        forbid=["timm.models._builder.load_pretrained"],
    )


def test_finetune_export_reloads_without_the_single_models_checkpoint(tmp_path, monkeypatch):
    """A FineTune block is exported as the σN-Ens it built: signorm_ensemble, pretrained=True."""
    checkpoint = tmp_path / "single.pt"
    torch.save(randomize_norms(tiny_resnet()).state_dict(), checkpoint)
    backbone = {
        "class_path": "torch_uncertainty.models.classification.resnet",
        "init_args": {
            "in_channels": 3,
            "num_classes": 10,
            "arch": 18,
            "style": "cifar",
            "width_multiplier": 0.125,
        },
    }
    spec = {
        "class_path": "signorm_lab.models.finetune.finetune_ensemble",
        "init_args": {"model": backbone, "num_estimators": M, "checkpoint": str(checkpoint)},
    }
    ensemble = finetune_ensemble(tiny_resnet(), M, str(checkpoint))
    out = tmp_path / "export"
    _export_delete_reload(ensemble, spec, checkpoint, out, torch.randn(3, 3, 32, 32), monkeypatch)
    written = json.loads((out / "config.json").read_text())["model"]
    assert written["class_path"] == ENSEMBLE and written["init_args"]["pretrained"] is True


def test_bert_classifier_refuses_a_config_with_weights_or_remote_code(tmp_path):
    randomize_norms(tiny_bert()).save_pretrained(tmp_path / "bert")
    from signorm_lab.models.backbones import bert_config

    config = bert_config(pretrained_path=tmp_path / "bert")
    with pytest.raises(ValueError, match=r"pass pretrained=False .*got pretrained=True"):
        bert_classifier(config=config)
    with pytest.raises(ValueError, match=r"remote code \(auto_map="):
        bert_classifier(pretrained=False, config={**config, "auto_map": {"x": "evil.Model"}})
