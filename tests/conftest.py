"""Suite-wide fixtures and the two test tiers (tests/tiers.py decides them); the shared offline
backbones and data live in tests/fixtures/."""

from __future__ import annotations

import pytest
import torch
from tiers import in_second_tier, second_tier_recipe


def pytest_collection_modifyitems(config, items):
    for item in items:
        callspec = getattr(item, "callspec", None)
        if in_second_tier(item.path) or (callspec is not None and second_tier_recipe(
                getattr(item, "originalname", item.name), callspec.params)):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _seed_and_threads():
    """Deterministic seeds; one intra-op thread so parallel CPU work does not thrash 2 cores."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
