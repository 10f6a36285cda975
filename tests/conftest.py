"""Suite-wide fixtures and the two test tiers; the shared offline backbones and data live in
tests/fixtures/.

The tiers: the fast tier (``python -m pytest -m "not slow"``) is what a change is checked with;
the second tier (``-m slow``) holds the journeys, the recipe runs, DDP, the tests that start
other processes, and every test marked ``slow`` where it stands (one that takes more than a few
seconds). The files and folders below are the second tier's by path: the one place that
assigns them, so a new test in one of them joins the second tier without a marker.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

TESTS = Path(__file__).parent

#: Second tier by path (relative to tests/): folders end with "/".
SECOND_TIER = (
    "journeys/",  # the user's journeys through the command, end to end
    # recipe runs: recipes trained through the command
    "test_recipes_run.py",
    "test_transformer_recipes_run.py",
    "test_real_minilm_recipes.py",
    "test_quickstart.py",
    "test_tu_format_recipes.py",
    "cli/test_recipe_fits.py",
    "test_distributed.py",  # DDP, in worker processes
    # tests that start other processes (the command, scripts, vermin)
    "test_console.py",
    "test_head_scale.py",
    "test_cpu_and_stand_in.py",
    "test_python_range.py",
    "test_downloaded_files.py",
    "reproduction/test_regression.py",
    "reproduction/test_run_groups.py",
    "reproduction/test_old_paths.py",
)


def in_second_tier(path: Path) -> bool:
    """Whether the test file at ``path`` belongs to the second tier by where it is."""
    relative = Path(path).resolve().relative_to(TESTS.resolve()).as_posix()
    return any(relative.startswith(entry) if entry.endswith("/") else relative == entry
               for entry in SECOND_TIER)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if in_second_tier(item.path):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _seed_and_threads():
    """Deterministic seeds; one intra-op thread so parallel CPU work does not thrash 2 cores."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
