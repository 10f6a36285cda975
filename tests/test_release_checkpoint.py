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
    from fixtures.backbones import randomize_norms

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

from torch_uncertainty_signorm import export, signorm_ensemble

from fixtures.backbones import randomize_norms

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
        k: tuple(v.shape) for k, v in state.items()
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
