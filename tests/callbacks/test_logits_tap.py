"""The forward hook both test-time callbacks read the routine's logits through."""

import pytest
import torch
from torch import nn

from torch_uncertainty_signorm.callbacks.logits_tap import LogitsTap


class Routine(nn.Module):
    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model


class Tuple(nn.Module):
    def forward(self, x):
        return x, x


def test_tap_returns_the_step_logits_and_members_once_then_forgets_them():
    routine = Routine(nn.Linear(3, 5))
    tap = LogitsTap("Writer")
    tap.attach(routine)
    x = torch.randn(8, 3)  # M = 4 members of B = 2 inputs, member-major
    expected = routine.model(x)
    logits, members = tap.take(2)
    assert members == 4 and not logits.requires_grad
    torch.testing.assert_close(logits, expected.detach())
    with pytest.raises(ValueError, match=r"Writer: the model's test logits \(shape None\)"):
        tap.take(2)


def test_tap_refuses_logits_that_do_not_split_into_members_and_non_tensor_outputs():
    tap = LogitsTap("Writer")
    routine = Routine(nn.Linear(3, 5))
    tap.attach(routine)
    routine.model(torch.randn(5, 3))
    with pytest.raises(ValueError, match=r"not member-major \(M·B, C\) for a batch of B = 2"):
        tap.take(2)
    routine = Routine(Tuple())
    tap.attach(routine)
    with pytest.raises(TypeError, match="Writer expects the model to return logits, got tuple"):
        routine.model(torch.randn(2, 3))
    with pytest.raises(TypeError, match=r"Writer reads the logits of `routine.model`; object"):
        tap.attach(object())


def test_a_second_attach_replaces_the_first_hook():
    first, second = Routine(nn.Linear(3, 5)), Routine(nn.Linear(3, 5))
    tap = LogitsTap("Writer")
    tap.attach(first)
    tap.attach(second)
    first.model(torch.randn(4, 3))
    with pytest.raises(ValueError, match=r"shape None"):
        tap.take(2)
    expected = second.model(torch.randn(4, 3))
    torch.testing.assert_close(tap.take(2)[0], expected.detach())


def test_detached_tap_keeps_nothing():
    routine = Routine(nn.Linear(3, 5))
    tap = LogitsTap("Writer")
    tap.attach(routine)
    tap.detach()
    routine.model(torch.randn(4, 3))
    with pytest.raises(ValueError, match=r"shape None"):
        tap.take(2)


@pytest.mark.parametrize("ending", ["end", "exception"])
def test_a_test_logits_callback_reads_each_step_and_removes_its_hook_however_testing_ends(ending):
    """The base of OODShiftEvaluation and TestPredictionWriter hands each step's logits to the
    subclass, and leaves no hook on the model after the test ends or fails."""
    from torch_uncertainty_signorm.callbacks.logits_tap import TestLogitsCallback

    class Members(TestLogitsCallback):
        def __init__(self):
            super().__init__()
            self.seen = []

        def on_test_logits(self, pl_module, batch, dataloader_idx):
            self.seen.append((self.tap.take(batch[1].shape[0])[1], dataloader_idx))

    routine, callback = Routine(nn.Linear(3, 5)), Members()
    callback.on_test_start(None, routine)
    routine.model(torch.randn(6, 3))  # M = 3 members of B = 2 inputs
    callback.on_test_batch_end(None, routine, None, (None, torch.zeros(2)), 0, dataloader_idx=1)
    assert callback.seen == [(3, 1)] and routine.model._forward_hooks
    if ending == "end":
        callback.on_test_end(None, routine)
    else:
        callback.on_exception(None, routine, RuntimeError("interrupted"))
    assert not routine.model._forward_hooks
