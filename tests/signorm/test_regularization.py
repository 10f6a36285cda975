"""The softmax-temperature penalty against the paper's Appendix "Temperature limits"."""

import math
from itertools import pairwise

import pytest
import torch

from torch_uncertainty_signorm import ImportanceSharingPenalty, sharing_penalty
from torch_uncertainty_signorm.signorm.regularization import TAU_RANGE


def penalty_gradient(s: torch.Tensor, tau: float) -> torch.Tensor:
    s = s.clone().requires_grad_(True)
    sharing_penalty(s, tau).backward()
    return s.grad


def shares_from_gradient(s: torch.Tensor, tau: float) -> torch.Tensor:
    """The softmax shares p the penalty acts on, read off its gradient (1 - M p) / tau."""
    return (1 - tau * penalty_gradient(s, tau)) / s.shape[-2]


@pytest.mark.parametrize("num_members", [2, 4, 16])
@pytest.mark.parametrize("tau", [1e-3, 0.1, 1.0, 1e3])
def test_gradient_equals_one_minus_m_p_over_tau(num_members, tau):
    s = torch.rand(num_members, 50, dtype=torch.float64)
    expected = (1 - num_members * torch.softmax(s / tau, dim=0)) / tau
    torch.testing.assert_close(penalty_gradient(s, tau), expected, rtol=1e-9, atol=1e-9)


def test_penalty_is_the_sum_of_log_softmax_over_members():
    s = torch.rand(4, 7, dtype=torch.float64)
    expected = torch.log_softmax(s / 0.3, dim=0).sum()
    torch.testing.assert_close(sharing_penalty(s, 0.3), expected)


def test_leading_dims_are_summed_each_at_its_own_temperature():
    s = torch.rand(3, 4, 7, dtype=torch.float64)
    taus = torch.tensor([0.01, 0.3, 10.0], dtype=torch.float64)
    expected = sum(torch.log_softmax(s[i] / tau, dim=0).sum() for i, tau in enumerate(taus))
    torch.testing.assert_close(sharing_penalty(s, taus.view(-1, 1, 1)), expected)


@pytest.mark.parametrize("num_members", [2, 4, 8])
@pytest.mark.parametrize("tau", [0.05, 0.5, 5.0])
def test_a_one_hot_feature_pulls_its_owner_hardest(num_members, tau):
    """Importances in [0, 1] cap the owner's share at the one-hot share b, so the penalty's
    gradient (1 - M p) / tau is never below (1 - M b) / tau, reached at a one-hot feature."""
    bound = math.exp(1 / tau) / (math.exp(1 / tau) + num_members - 1)
    steepest = (1 - num_members * bound) / tau
    one_hot = torch.zeros(num_members, 1, dtype=torch.float64)
    one_hot[0] = 1.0
    assert penalty_gradient(one_hot, tau).min().item() == pytest.approx(steepest, rel=1e-9)
    inside_box = torch.rand(num_members, 10_000, dtype=torch.float64)
    assert penalty_gradient(inside_box, tau).min().item() > steepest


@pytest.mark.parametrize("num_members", [2, 3, 4, 8])
@pytest.mark.parametrize("tau", [0.01, 0.1, 1.0, 10.0, 100.0])
def test_descent_points_into_every_k_owner_corner(num_members, tau):
    for k in range(1, num_members):
        corner = torch.zeros(num_members, 1, dtype=torch.float64)
        corner[:k] = 1.0
        descent = -penalty_gradient(corner, tau).squeeze(1)
        assert torch.all(descent[:k] > 0), f"owners must move up at k={k}"
        assert torch.all(descent[k:] < 0), f"non-owners must move down at k={k}"


def test_gradient_vanishes_as_tau_grows():
    s = torch.rand(4, 100, dtype=torch.float64)
    peaks = [penalty_gradient(s, tau).abs().max().item() for tau in (1.0, 10.0, 100.0, 1000.0)]
    assert all(later < earlier for earlier, later in pairwise(peaks))
    assert peaks[-1] < 1e-6


@pytest.mark.parametrize("tau", [1e-3, 1e-2, 1.0, 1e2, 1e3])
def test_stable_for_extreme_temperatures_in_float32(tau):
    logits = (torch.randn(16, 300) * 6).requires_grad_(True)
    loss = ImportanceSharingPenalty(tau=tau, diversity_strength=1.0)([torch.sigmoid(logits)])
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()


def test_layers_are_summed_in_one_pass_and_scaled_by_lambda():
    layers = [torch.rand(4, 5), torch.rand(4, 3)]
    penalty = ImportanceSharingPenalty(tau=0.2, diversity_strength=0.5)
    expected = 0.5 * sum(sharing_penalty(layer, 0.2) for layer in layers)
    torch.testing.assert_close(penalty(layers), expected)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tau": 0.0}, "tau must be a finite number > 0, got 0.0"),
        ({"tau": -1.0}, "tau must be a finite number > 0, got -1.0"),
        ({"tau": float("nan")}, "tau must be a finite number > 0, got nan"),
        (
            {"diversity_strength": -1e-3},
            r"diversity_strength \(lambda\) must be a finite number >= 0, got -0.001",
        ),
        ({"tau": True}, "tau must be a finite number > 0, got True"),
        (
            {"diversity_strength": False},
            r"diversity_strength \(lambda\) must be a finite number >= 0, got False",
        ),
        ({"tau": 1e9}, r"tau=1000000000.0 is outside \[0.001, 1000\]"),
        ({"tau": 1e-9}, r"tau=1e-09 is outside \[0.001, 1000\]"),
        ({"tau": 1.01e3}, r"tau=1010.0 is outside"),
    ],
)
def test_bad_temperature_or_strength_is_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ImportanceSharingPenalty(**kwargs)


def _logit_gradient(logits: torch.Tensor, tau: float) -> torch.Tensor:
    logits = logits.clone().requires_grad_(True)
    sharing_penalty(torch.sigmoid(logits), tau).backward()
    return logits.grad


def test_tau_range_upper_end_still_has_an_accurate_float32_gradient_that_vanishes_beyond():
    logits = torch.randn(4, 2000, dtype=torch.float64) * 2
    high = TAU_RANGE[1]
    exact, single = _logit_gradient(logits, high), _logit_gradient(logits.float(), high)
    assert (single == 0).float().mean() < 1e-3 and torch.isfinite(single).all()
    assert ((single.double() - exact).abs() / exact.abs()).median() < 1e-3
    assert exact.abs().max() < 1 / (4 * high**2)  # per unit of lambda: nearly off
    assert (_logit_gradient(logits.float(), 1e8) == 0).all()  # float32: exactly nothing left


def test_tau_range_lower_end_is_the_one_hot_limit_where_lower_tau_only_rescales():
    low = TAU_RANGE[0]
    apart = torch.tensor([[0.52], [0.50], [0.30], [0.10]])  # importances >= 0.02 apart
    assert shares_from_gradient(apart.double(), low)[1:].max() < torch.finfo(torch.float32).eps
    gradient = penalty_gradient(apart, low)
    torch.testing.assert_close(penalty_gradient(apart, low / 1e6), gradient * 1e6)
    assert ImportanceSharingPenalty(tau=low).tau == low
