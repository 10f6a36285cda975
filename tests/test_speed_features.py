"""Speed features on σN-Ens: torch.compile, mixed precision, channels_last, no host syncs."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from fixtures.backbones import relative_error, tiny_resnet
from torch_uncertainty_signorm import signorm_cosine, signorm_ensemble
from torch_uncertainty_signorm.signorm.layers import SigmaBatchNorm2d
from torch_uncertainty_signorm.signorm.optim import signorm_param_groups

M = 4


def _loss(model, x, y):
    return F.cross_entropy(model(x), y.repeat(M)) + model.diversity_loss()


def test_compiled_training_step_matches_eager_in_one_graph():
    """fullgraph=True also proves the step has no graph break: no .item(), no branch on data."""
    eager = signorm_ensemble(tiny_resnet(), M)
    x, y = torch.randn(4, 3, 32, 32), torch.randint(0, 10, (4,))
    _loss(eager, x, y)  # first call: the member-row check runs eagerly, once
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(_loss, fullgraph=True, backend="aot_eager")
    expected, actual = _loss(eager, x, y), compiled(compiled_model, x, y)
    expected.backward()
    actual.backward()
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)
    for (name, p), q in zip(eager.named_parameters(), compiled_model.parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=name)
    for (name, b), c in zip(eager.named_buffers(), compiled_model.buffers(), strict=True):
        torch.testing.assert_close(c, b, msg=name)  # running statistics updated alike


@pytest.mark.parametrize(
    ("dtype", "train", "tolerance"),
    [  # training mode normalizes each member over its own 6 rows, which amplifies rounding
        (torch.bfloat16, True, 8e-2),
        (torch.bfloat16, False, 1e-2),
        (torch.float16, True, 1.5e-2),
        (torch.float16, False, 2e-3),
    ],
)
def test_autocast_outputs_match_float32(dtype, train, tolerance):
    model = signorm_ensemble(tiny_resnet(), M)
    model.train()(torch.randn(8, 3, 32, 32))  # running statistics for eval
    model.train(train)
    x = torch.randn(6, 3, 32, 32)
    with torch.no_grad():
        reference = model(x)
        with torch.autocast("cpu", dtype=dtype):
            mixed = model(x)
    assert mixed.dtype == dtype
    assert relative_error(mixed.float(), reference) < tolerance


@pytest.mark.parametrize("train", [True, False])
def test_channels_last_matches_contiguous(train):
    model = signorm_ensemble(tiny_resnet(), M)
    model.train()(torch.randn(8, 3, 32, 32))
    fast = copy.deepcopy(model).to(memory_format=torch.channels_last)
    x = torch.randn(5, 3, 32, 32)
    with torch.no_grad():
        expected = model.train(train)(x)
        actual = fast.train(train)(x.contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)


class RecordHostSyncs(TorchFunctionMode):
    """Records every call that copies a tensor value to Python (a host-device sync on GPU)."""

    SYNCING = frozenset(
        {"item", "tolist", "__bool__", "__float__", "__int__", "__index__", "numpy"}
    )

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.SYNCING:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


def test_training_step_and_regularizer_read_no_tensor_value_on_the_host():
    """Forward, task loss, regularizer, σNorm-cos, backward and SGD step: no host read."""
    model = signorm_ensemble(tiny_resnet(), M)
    optimizer = torch.optim.SGD(
        signorm_param_groups(model, 0.05), lr=0.05, momentum=0.9, weight_decay=5e-4
    )
    x, y = torch.randn(6, 3, 32, 32), torch.randint(0, 10, (6,))
    _loss(model, x, y)  # first call: the one-off member-row check
    with RecordHostSyncs() as recorder:
        optimizer.zero_grad()
        _loss(model, x, y).backward()
        signorm_cosine(model.importances()).detach()  # what the routine logs each step
        optimizer.step()
    assert recorder.calls == []
    with RecordHostSyncs() as control:  # the recorder does see a sync when there is one
        SigmaBatchNorm2d(3, M, momentum=None).train()(torch.randn(8, 3, 2, 2))
    assert control.calls == ["__float__"]
