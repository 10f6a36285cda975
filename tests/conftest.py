"""Suite-wide fixtures; the shared offline backbones and data live in tests/fixtures/."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_and_threads():
    """Deterministic seeds; one intra-op thread so parallel CPU work does not thrash 2 cores."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
