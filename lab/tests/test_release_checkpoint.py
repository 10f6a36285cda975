"""Checkpoints written by release 0.1.0 load into the current code and give the same logits.

``tests/fixtures/data/signorm_resnet_v0_1_0.safetensors`` is the state dict of a tiny σN-Ens
(converted, so it also holds the frozen magnitude, sign and shift buffers) and
``signorm_resnet_v0_1_0_io.safetensors`` its inputs and eval-mode logits, both written by
0.1.0 (member-major σNorm layers, one kernel per member) with this script, run from the
repository root::

    import sys, torch
    from safetensors.torch import save_file
    from torch_uncertainty.models.classification import resnet
    from torch_uncertainty_signorm import signorm_ensemble
    sys.path.insert(0, "tests")
    from fixtures.backbones import randomize_norms, tiny_bert, tiny_signorm_spec

    torch.manual_seed(0)
    backbone = resnet(3, 5, 18, style="cifar", width_multiplier=0.0625)
    model = signorm_ensemble(randomize_norms(backbone), num_estimators=3, pretrained=True)
    with torch.no_grad():  # members differ: own scale logits and running statistics
        for name, tensor in model.state_dict().items():
            if name.endswith(("scale_logits", "running_mean")):
                tensor.add_(torch.randn_like(tensor))
            elif name.endswith("running_var"):
                tensor.mul_(torch.rand_like(tensor) + 0.5)
    inputs = torch.randn(2, 3, 32, 32)
    logits = model.eval()(inputs)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, "tests/fixtures/data/signorm_resnet_v0_1_0.safetensors")
    save_file({"inputs": inputs, "logits": logits},
              "tests/fixtures/data/signorm_resnet_v0_1_0_io.safetensors")
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file
from torch_uncertainty.models.classification import resnet

from fixtures.backbones import randomize_norms, tiny_bert, tiny_signorm_spec
from signorm_lab.export.format import member_record
from signorm_lab.export.spec import build_model
from torch_uncertainty_signorm import export, signorm_ensemble
from torch_uncertainty_signorm.members.heads import upgrade_legacy_heads
from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine

DATA = Path(__file__).parent / "fixtures" / "data"


def _release_model():
    # A converted model has the frozen magnitude, sign and shift buffers the file holds.
    backbone = randomize_norms(resnet(3, 5, 18, style="cifar", width_multiplier=0.0625), seed=1)
    model = signorm_ensemble(backbone, num_estimators=3, pretrained=True)
    state = load_file(DATA / "signorm_resnet_v0_1_0.safetensors")
    model.load_state_dict(state, strict=True)
    return model.eval(), state


def test_release_0_1_0_state_dict_loads_and_reproduces_logits():
    model, state = _release_model()
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == {
        k: tuple(v.shape) for k, v in upgrade_legacy_heads(dict(state)).items()
    }
    io = load_file(DATA / "signorm_resnet_v0_1_0_io.safetensors")
    with torch.no_grad():
        torch.testing.assert_close(model(io["inputs"]), io["logits"], rtol=1e-5, atol=1e-5)


def test_release_0_1_0_members_export_to_the_same_logits():
    model, _ = _release_model()
    io = load_file(DATA / "signorm_resnet_v0_1_0_io.safetensors")
    batch = io["inputs"].shape[0]
    with torch.no_grad():
        for m in range(model.num_estimators):
            member = export.member_model(model, m).eval()
            expected = io["logits"][m * batch : (m + 1) * batch]
            torch.testing.assert_close(member(io["inputs"]), expected, rtol=1e-5, atol=1e-5)


# Written by the package at commit d303e6e, whose member heads normalized with a from-scratch
# σNorm (scale logits, no shift), by tests/fixtures/make_release_d303e6e.py (run from that
# commit's checkout): a converted tiny BERT (LayerNorm heads) trained 3 steps, and a Lightning
# checkpoint of the routine (tiny ResNet, BatchNorm heads) with its export.
D303 = "d303e6e"


def test_earlier_layernorm_heads_load_and_reproduce_logits():
    model = signorm_ensemble(randomize_norms(tiny_bert(3)), num_estimators=3, pretrained=True)
    state = load_file(DATA / f"signorm_bert_{D303}.safetensors")
    assert "heads.norm.scale_logits" in state  # the earlier heads
    model.load_state_dict(state, strict=True)
    io = load_file(DATA / f"signorm_bert_{D303}_io.safetensors")
    inputs = {k.removeprefix("inputs."): v for k, v in io.items() if k.startswith("inputs.")}
    with torch.no_grad():
        torch.testing.assert_close(model.eval()(inputs), io["logits"], rtol=1e-5, atol=1e-5)
    assert bool(model.heads.norm.scale_initialised)  # never re-measured on a later fit


def test_earlier_lightning_checkpoint_and_export_predict_what_they_predicted():
    io = load_file(DATA / f"signorm_resnet_{D303}_io.safetensors")
    routine = SigmaNormClassificationRoutine.load_from_checkpoint(  # built in Python: the model
        DATA / f"signorm_resnet_{D303}.ckpt",
        map_location="cpu",  # object is passed again
        model=build_model(tiny_signorm_spec(3, style="cifar", tau=0.5)),
    )
    with torch.no_grad():
        torch.testing.assert_close(
            routine.model.eval()(io["inputs"]), io["logits"], rtol=1e-5, atol=1e-5
        )
        folder = DATA / f"signorm_resnet_{D303}_export"
        exported = export.load_ensemble(folder)
        torch.testing.assert_close(exported(io["inputs"]), io["logits"], rtol=1e-5, atol=1e-5)
        # written before member files recorded their ensemble: checked by folding it again
        assert member_record(folder / "member_1.safetensors") is None
        member = export.load_member(folder, 1)
        batch = io["inputs"].shape[0]
        torch.testing.assert_close(
            member(io["inputs"]), io["logits"][batch : 2 * batch], rtol=1e-5, atol=1e-5
        )
