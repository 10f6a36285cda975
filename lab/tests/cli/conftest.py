"""The command's tests run with an argv of their own."""

import sys

import pytest


@pytest.fixture(autouse=True)
def _clean_argv(monkeypatch):
    # LightningCLI warns when both `args` and sys.argv (here pytest's) are given.
    monkeypatch.setattr(sys, "argv", ["torch-uncertainty"])
