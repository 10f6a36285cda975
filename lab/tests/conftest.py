"""Suite-wide fixtures and the two test tiers (tests/tiers.py decides them); the shared offline
backbones and data live in tests/fixtures/."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fixtures import budget
from tiers import TESTS, TIER_BUDGETS, in_second_tier, second_tier_recipe, whole_tier


def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        if in_second_tier(item.path) or (
            callspec is not None
            and second_tier_recipe(getattr(item, "originalname", item.name), callspec.params)
        ):
            item.add_marker(pytest.mark.slow)


def pytest_sessionstart(session):
    budget.start(session)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """A whole tier prints its time against its budget (tests/tiers.py) and fails over it."""
    if hasattr(config, "workerinput"):
        return
    # the whole suite: no paths (from lab/) or the suite's folder (from the repository's root)
    whole = config.args_source == pytest.Config.ArgsSource.TESTPATHS or [
        Path(arg).resolve() for arg in config.args
    ] == [TESTS]
    tier = whole_tier(config.option.markexpr, whole)
    if tier is not None:
        budget.report(
            terminalreporter, config, f"{tier} tier", TIER_BUDGETS[tier], "tests/tiers.py"
        )


@pytest.fixture(autouse=True)
def _seed_and_threads():
    """Deterministic seeds; one intra-op thread so parallel CPU work does not thrash 2 cores."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
