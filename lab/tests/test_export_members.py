"""An export's members are its ensemble's, and its format version is one this release reads."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from fixtures.backbones import tiny_signorm_spec
from signorm_lab.export import build_model, export_ensemble, load_member
from signorm_lab.export.loading import SUPPORTED_VERSIONS, load_ensemble

SPEC = tiny_signorm_spec(2, style="cifar")


def _export(folder, seed: int):
    torch.manual_seed(seed)
    model = build_model(SPEC).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.01)
    return export_ensemble(model, SPEC, folder, members=True)


def test_a_member_file_of_another_export_is_refused(tmp_path):
    ours, theirs = _export(tmp_path / "ours", 0), _export(tmp_path / "theirs", 1)
    assert load_member(ours, 1).training is False
    (ours / "member_1.safetensors").unlink()
    shutil.copy(theirs / "member_1.safetensors", ours / "member_1.safetensors")
    with pytest.raises(
        ValueError,
        match=r"member_1.safetensors' is not member 1 of the "
        r"ensemble in .*a member file of another export",
    ) as e:
        load_member(ours, 1)
    assert "\n" not in str(e.value)
    assert load_member(ours, 0).training is False  # its own member still loads


@pytest.mark.parametrize("version", [999, 0, "2", None, True])
def test_an_unknown_format_version_is_refused_naming_the_supported_ones(version, tmp_path):
    out = _export(tmp_path / "out", 0)
    config = json.loads((out / "config.json").read_text())
    config["version"] = version
    (out / "config.json").write_text(json.dumps(config))
    supported = ", ".join(map(str, SUPPORTED_VERSIONS))
    with pytest.raises(
        ValueError,
        match=rf"has version .*; this release reads versions "
        rf"{supported}",
    ):
        load_ensemble(out)
