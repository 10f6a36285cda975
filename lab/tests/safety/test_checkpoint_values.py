"""A checkpoint's weights are checked before anything loads them (an export, a FineTune
backbone): the model's dtype kind, finite values, running variances >= 0."""

import pytest
import torch
from torch import nn

from signorm_lab.safety.checkpoints import backbone_state


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda s: s.__setitem__("0.weight", s["0.weight"].long()), r"'0.weight'\] as torch.int64"),
        (lambda s: s.__setitem__("0.bias", s["0.bias"] > 0), r"'0.bias'\] as torch.bool"),
        (
            lambda s: s["0.weight"].__setitem__((0, 0), float("nan")),
            r"non-finite values .* in state_dict\['0.weight'\]",
        ),
        (lambda s: s["1.running_var"].__setitem__(1, -0.5), r"negative values in .*running_var"),
    ],
)
def test_weights_no_trained_model_holds_are_refused_naming_the_entry(change, message):
    state = {key: value.clone() for key, value in _model().state_dict().items()}
    change(state)
    with pytest.raises(ValueError, match=message):
        backbone_state(_model(), state, "run.ckpt")


def test_a_trained_models_weights_pass_unchanged():
    model = _model()
    state = model.state_dict()
    loaded = backbone_state(_model(), state, "run.ckpt")
    assert all(torch.equal(loaded[key], state[key]) for key in state)
