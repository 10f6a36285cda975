"""Loading an export runs no code: a config.json naming anything but allow-listed models is refused
before anything is imported or built, at any depth, and leaves every file as it was."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
import torch

from torch_uncertainty_signorm.export import (
    _build,
    build_model,
    export_ensemble,
    load_ensemble,
    load_member,
)

SPEC = {
    "class_path": "torch_uncertainty_signorm.signorm_ensemble",
    "init_args": {
        "model": {"class_path": "torch_uncertainty.models.classification.resnet",
                  "init_args": {"in_channels": 3, "num_classes": 10, "arch": 18,
                                "style": "cifar", "width_multiplier": 0.125}},
        "num_estimators": 2,
    },
}


class _PicklePayload:
    """Unpickling it runs ``code`` (what ``torch.load(..., weights_only=False)`` would do)."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self):
        return exec, (self.code,)


def _payloads(root: Path) -> dict[str, tuple[dict, Path]]:
    """Each malicious block with the file its side effect would create or overwrite."""
    pickle_marker, hub_marker, victim = (root / "pickle.ran", root / "hubconf.ran",
                                         root / "victim.txt")
    torch.save(_PicklePayload(f"open({str(pickle_marker)!r}, 'w').close()"), root / "payload.pt")
    (root / "hub").mkdir()
    (root / "hub" / "hubconf.py").write_text(
        f"open({str(hub_marker)!r}, 'w').close()\n\ndef payload():\n    return None\n"
    )
    victim.write_text("precious")
    return {
        "torch.load": ({"class_path": "torch.load",
                        "init_args": {"f": str(root / "payload.pt"), "weights_only": False}},
                       pickle_marker),
        "torch.hub.load": ({"class_path": "torch.hub.load",
                            "init_args": {"repo_or_dir": str(root / "hub"), "model": "payload",
                                          "source": "local", "trust_repo": True}},
                           hub_marker),
        "torch.save": ({"class_path": "torch.save",
                        "init_args": {"obj": "overwritten", "f": str(victim)}}, victim),
        # A trusted package is not enough: only the listed model factories are.
        "torch_uncertainty_signorm.export.export_ensemble": (
            {"class_path": "torch_uncertainty_signorm.export.export_ensemble",
             "init_args": {"model": None, "spec": {}, "directory": str(root / "written")}},
            root / "written"),
    }


def _digest(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("export")
    export_ensemble(build_model(SPEC).eval(), SPEC, directory, members=True)
    return directory


@pytest.mark.parametrize("loader", ["ensemble", "member"])
@pytest.mark.parametrize("where", ["model", "model.init_args.model"])
@pytest.mark.parametrize("payload", ["torch.load", "torch.hub.load", "torch.save",
                                     "torch_uncertainty_signorm.export.export_ensemble"])
def test_a_config_naming_code_is_refused_before_anything_runs(
    tmp_path, export_dir, payload, where, loader
):
    block, side_effect = _payloads(tmp_path)[payload]
    config = json.loads((export_dir / "config.json").read_text())
    if where == "model":
        config["model"] = block
    else:
        config["model"]["init_args"]["model"] = block
    bad = tmp_path / "bad_export"
    bad.mkdir()
    for name in ("ensemble.safetensors", "member_0.safetensors"):
        (bad / name).write_bytes((export_dir / name).read_bytes())
    (bad / "config.json").write_text(json.dumps(config))
    before = _digest(tmp_path)

    with pytest.raises(ValueError, match=rf"{where}\.class_path='{payload}'") as error:
        load_ensemble(bad) if loader == "ensemble" else load_member(bad, 0)

    assert "allowed: " in str(error.value)
    assert "torch_uncertainty_signorm.signorm_ensemble" in str(error.value)  # lists the allowed
    assert _digest(tmp_path) == before  # nothing created, nothing overwritten
    assert side_effect.exists() == (payload == "torch.save")  # only the victim existed before
    assert "hubconf" not in sys.modules


def test_the_payloads_are_live_without_the_allow_list(tmp_path):
    """The refusal above is what protects: built unchecked, each payload has its effect."""
    payloads = _payloads(tmp_path)
    for name in ("torch.load", "torch.hub.load", "torch.save"):
        block, side_effect = payloads[name]
        _build(block)
        assert side_effect.exists()
    assert (tmp_path / "victim.txt").read_bytes() != b"precious"


def test_a_nested_block_is_refused_even_inside_plain_mappings_and_lists(export_dir, tmp_path):
    config = json.loads((export_dir / "config.json").read_text())
    config["model"]["init_args"]["regularized_layers"] = [{"x": {"class_path": "os.system"}}]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError,
                       match=r"model\.init_args\.regularized_layers\[0\]\.x\.class_path='os"):
        load_ensemble(tmp_path)


def test_an_allowed_backbone_alone_is_no_export(export_dir, tmp_path):
    config = json.loads((export_dir / "config.json").read_text())
    config["model"] = config["model"]["init_args"]["model"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"model\.class_path='torch_uncertainty\.models\..*"
                                         r"resnet' is no σNorm-Ensemble"):
        load_ensemble(tmp_path)
