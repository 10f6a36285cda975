"""Each private internal of another library that the method's ``utils/_compat`` reaches still
exists and behaves as the method relies on; a release that changes one fails here, by name (the
lab's own: lab/tests/test_compat.py).

Checked on lightning 2.6.6, torch 2.14.1 and torch-uncertainty 0.13.0.
"""

from __future__ import annotations

import copy
import inspect

import pytest
import torch
from lightning.pytorch import LightningModule
from lightning.pytorch.demos.boring_classes import BoringModel
from torch import nn

from torch_uncertainty_signorm.utils import _compat


def _torch_subclasses(base: type) -> list[type]:
    """Every class in ``torch.nn`` that subclasses ``base`` (the classes torch ships)."""
    return [
        value
        for value in vars(nn).values()
        if isinstance(value, type) and issubclass(value, base) and value is not base
    ]


# ----------------------------------------------------------------------------- torch


def test_convolutions_cover_every_conv_torch_ships():
    convolutions = _torch_subclasses(nn.modules.conv._ConvNd)
    assert nn.Conv2d in convolutions
    for conv in convolutions:
        assert issubclass(conv, _compat.CONVOLUTIONS), conv
    assert not issubclass(nn.Linear, _compat.CONVOLUTIONS)


def test_batch_norms_cover_every_batch_norm_torch_ships():
    batch_norms = _torch_subclasses(nn.modules.batchnorm._BatchNorm)
    assert nn.SyncBatchNorm in batch_norms
    for batch_norm in batch_norms:
        assert issubclass(batch_norm, _compat.BATCH_NORMS), batch_norm
    for other in (nn.InstanceNorm2d, nn.LayerNorm, nn.GroupNorm):
        assert not issubclass(other, _compat.BATCH_NORMS)


def test_unsafe_view_is_a_reshape_autograd_does_not_see_as_a_view():
    x = torch.randn(4, 6, requires_grad=True)
    out = x * 2
    reshaped = _compat.unsafe_view(out, (2, 2, 6))
    assert reshaped.shape == (2, 2, 6)
    assert reshaped.data_ptr() == out.data_ptr()  # same storage, no copy
    assert reshaped._base is None  # not a view: in-place ops stay plain in-place ops
    assert out.view(2, 2, 6)._base is out
    reshaped.relu_()
    reshaped.sum().backward()
    assert torch.equal(x.grad, 2 * (x > 0).float())


def test_sync_batch_norm_function_takes_the_arguments_passed():
    function = _compat.sync_batch_norm_function()
    assert issubclass(function, torch.autograd.Function)
    names = list(inspect.signature(function.forward).parameters)
    assert names[:10] == [
        "self",
        "input",
        "weight",
        "bias",
        "running_mean",
        "running_var",
        "eps",
        "momentum",
        "process_group",
        "world_size",
    ]


def test_forward_pre_hooks_removes_a_hook_from_a_copy():
    calls = []
    module = nn.Linear(2, 2)
    handle = module.register_forward_pre_hook(lambda m, args: calls.append(m))
    copied = copy.deepcopy(module)
    handle.remove()  # the handle reaches the original's hooks only
    copied(torch.zeros(1, 2))
    assert len(calls) == 1
    hooks = _compat.forward_pre_hooks(copied)
    assert len(hooks) == 1
    for key in list(hooks):
        del hooks[key]
    copied(torch.zeros(1, 2))
    assert len(calls) == 1


# ----------------------------------------------------------------------------- Lightning


class _Recording(LightningModule):
    """Records what Lightning's CLI hands it while it is built."""

    def __init__(self, width: int = 1) -> None:
        super().__init__()
        self.given = _compat.given_hyperparameters()
        self.layer = nn.Linear(width, 1)


def test_given_hyperparameters_and_the_instantiator_key():
    from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters_context

    assert _compat.given_hyperparameters() is None
    with _given_hyperparameters_context({"width": 3}, "some.instantiator"):
        given = _compat.given_hyperparameters()
    assert given == {"width": 3, _compat.INSTANTIATOR_KEY: "some.instantiator"}


def test_instantiator_keyword_switches_the_checkpoint_instantiator_off(tmp_path):
    model = _Recording(width=2)
    path = tmp_path / "model.ckpt"
    torch.save(
        {
            "state_dict": model.state_dict(),
            "pytorch-lightning_version": "2.6.6",
            "hyper_parameters": {"width": 2, _compat.INSTANTIATOR_KEY: "not.trusted"},
        },
        path,
    )
    with pytest.raises(ValueError, match="instantiator"):
        _Recording.load_from_checkpoint(path, weights_only=True)
    loaded = _Recording.load_from_checkpoint(
        path, weights_only=True, **{_compat.INSTANTIATOR_KEY: None}
    )
    assert loaded.layer.in_features == 2


def test_the_class_path_key_is_the_one_lightning_reads_a_class_from():
    """A checkpoint's hyper-parameters name the routine's class under ``CLASS_PATH_KEY``: what
    Lightning's own ``instantiate_module`` builds from."""
    from lightning.pytorch.cli import instantiate_module

    config = {_compat.CLASS_PATH_KEY: f"{BoringModel.__module__}.BoringModel"}
    assert type(instantiate_module(LightningModule, config)) is BoringModel
