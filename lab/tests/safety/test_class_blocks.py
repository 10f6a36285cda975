"""The one builder of class blocks read from files: allow-listed before import, typed as a
recipe's block, for exports and checkpoints alike."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

from fixtures.backbones import tiny_signorm_spec
from fixtures.marker_module import assert_not_imported, marker_module
from signorm_lab.export import build_model, export_ensemble, load_ensemble
from signorm_lab.safety.class_blocks import build_class_block
from torch_uncertainty_signorm import SigmaNormEnsemble

SPEC = tiny_signorm_spec(2, style="cifar")


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("export") / "export"
    return export_ensemble(build_model(SPEC).eval(), SPEC, directory)


def _edited(export_dir: Path, folder: Path, edit) -> Path:
    shutil.copytree(export_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    edit(config["model"])
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _backbone(block: dict) -> dict:
    return block["init_args"]["model"]["init_args"]


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("in_channels", "three", "int"),
        ("width_multiplier", [0.125], "float"),
        ("style", "round", "ResNetStyle"),
    ],
)
def test_a_wrong_typed_value_in_an_export_is_refused_naming_key_and_type(
    export_dir, tmp_path, key, value, expected
):
    folder = _edited(export_dir, tmp_path / "export", lambda b: _backbone(b).update({key: value}))
    place = f"model.init_args.model.init_args.{key}={value!r}"
    with pytest.raises(ValueError, match=rf"{re.escape(place)} is refused: .*{expected}"):
        load_ensemble(folder)


def test_a_value_jsonargparse_reads_as_its_type_is_coerced(export_dir, tmp_path):
    """``"3"`` for an ``int`` is read as a recipe reads it; an enum by value as by name."""
    reference = load_ensemble(export_dir)
    folder = _edited(
        export_dir,
        tmp_path / "export",
        lambda b: _backbone(b).update({"in_channels": "3", "style": "cifar"}),
    )
    model = load_ensemble(folder)
    inputs = torch.randn(2, 3, 32, 32)
    assert torch.equal(model(inputs), reference(inputs))


def test_an_argument_the_class_does_not_take_is_refused_by_name(export_dir, tmp_path):
    folder = _edited(export_dir, tmp_path / "export", lambda b: _backbone(b).update(depth=3))
    with pytest.raises(
        ValueError,
        match=r"model\.init_args\.model\.init_args\.depth=3 is not "
        r"an argument of .*resnet; valid arguments: .*arch",
    ):
        load_ensemble(folder)


def test_a_nested_class_path_outside_the_list_is_refused_before_import(
    export_dir, tmp_path, monkeypatch
):
    name, marker = marker_module(tmp_path, monkeypatch, "class_block_marker")

    def nest(block):
        _backbone(block)["normalization_layer"] = {"class_path": f"{name}.Evil"}

    folder = _edited(export_dir, tmp_path / "export", nest)
    with pytest.raises(
        ValueError,
        match=rf"normalization_layer\.class_path='{name}\.Evil' is "
        r"not an allowed class path",
    ):
        load_ensemble(folder)
    with pytest.raises(ValueError, match=rf"'{name}\.Evil' is not an allowed class path"):
        build_class_block(json.loads((folder / "config.json").read_text())["model"], nn.Module)
    assert_not_imported(name, marker)


def test_checkpoints_and_exports_type_a_block_alike(tmp_path):
    """The routine's model block (a checkpoint's hyper-parameter, read by load_routine) and an
    export's model block go through the one builder: the same coercion, and the same refusal
    naming key and type."""
    from signorm_lab.export import build_model
    from signorm_lab.safety.routine_checkpoints import load_routine

    coerced = json.loads(json.dumps(SPEC))
    _backbone(coerced)["in_channels"] = "3"
    assert isinstance(build_class_block(coerced, SigmaNormEnsemble), SigmaNormEnsemble)
    assert isinstance(build_model(coerced), SigmaNormEnsemble)
    wrong = json.loads(json.dumps(SPEC))
    _backbone(wrong)["in_channels"] = "three"
    checkpoint = tmp_path / "wrong.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"model": wrong}}, checkpoint)
    messages = []
    for build in (lambda: load_routine(checkpoint), lambda: build_model(wrong)):
        with pytest.raises(ValueError, match=r"in_channels='three' is refused: .*int") as error:
            build()
        messages.append(str(error.value).split("in_channels=", 1)[1])
    assert messages[0] == messages[1]
