"""Names of the previous release that still work for one release, each to the same object."""

from __future__ import annotations

import importlib
import sys

import pytest

from torch_uncertainty_signorm import regularization_guard
from torch_uncertainty_signorm.regularization import ImportanceSharingPenalty


def test_regulariser_check_is_the_guard_module_with_a_warning():
    sys.modules.pop("torch_uncertainty_signorm.regulariser_check", None)
    with pytest.warns(DeprecationWarning,
                      match=r"now torch_uncertainty_signorm\.regularization_guard"):
        old = importlib.import_module("torch_uncertainty_signorm.regulariser_check")
    assert old.require_diversity_loss is regularization_guard.require_diversity_loss
    assert old.MissingRegulariserError is regularization_guard.MissingRegulariserError


def test_penalty_strength_reads_and_sets_diversity_strength():
    penalty = ImportanceSharingPenalty(tau=0.5, diversity_strength=0.01)
    assert penalty.strength == 0.01
    penalty.strength = 0.02
    assert penalty.diversity_strength == 0.02
