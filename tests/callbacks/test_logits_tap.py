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
    with pytest.raises(TypeError, match="Writer reads the logits of `routine.model`; object"):
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
