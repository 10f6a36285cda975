"""The method's suite: unit and property tests of the σNorm layers, the wrapper, the routine and
the method's callbacks, with nothing of the lab; the shared offline backbones and data live in
tests/fixtures/ (the lab's suite, lab/tests, reads them too)."""

from __future__ import annotations

import pytest
import torch

from fixtures import budget

#: The whole suite's budget on 2 cores (seconds): past it the run fails, so that it stays what
#: to run on every change of the method.
BUDGET = 180


def pytest_sessionstart(session):
    budget.start(session)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The whole suite prints its time against :data:`BUDGET` and fails over it."""
    if hasattr(config, "workerinput") or config.args_source != pytest.Config.ArgsSource.TESTPATHS:
        return
    budget.report(terminalreporter, config, "method suite", BUDGET, "tests/conftest.py")


@pytest.fixture(autouse=True)
def _seed_and_threads():
    """Deterministic seeds; one intra-op thread so parallel CPU work does not thrash 2 cores."""
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
