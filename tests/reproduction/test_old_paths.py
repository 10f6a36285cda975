"""``torch_uncertainty_signorm.paper``, the old name of ``reproduction``, works for one release."""

import importlib
import subprocess
import sys

import pytest

import torch_uncertainty_signorm.reproduction as reproduction

MOVED = ("published", "regression", "results_table", "runs", "tables")


@pytest.mark.parametrize("name", MOVED)
def test_old_module_paths_are_the_new_modules(name):
    new = importlib.import_module(f"torch_uncertainty_signorm.reproduction.{name}")
    assert importlib.import_module(f"torch_uncertainty_signorm.paper.{name}") is new
    assert getattr(importlib.import_module("torch_uncertainty_signorm.paper"), name) is new
    assert getattr(reproduction, name) is new


def test_old_names_import_the_same_objects():
    from torch_uncertainty_signorm.paper.published import load_table
    from torch_uncertainty_signorm.paper.regression import check_reproduction, main
    from torch_uncertainty_signorm.paper.results_table import mean_std
    from torch_uncertainty_signorm.paper.runs import find_runs
    from torch_uncertainty_signorm.paper.tables import format_table
    from torch_uncertainty_signorm.reproduction import (
        published,
        regression,
        results_table,
        runs,
        tables,
    )

    assert load_table is published.load_table and main is regression.main
    assert check_reproduction is regression.check_reproduction
    assert mean_std is results_table.mean_std and find_runs is runs.find_runs
    assert format_table is tables.format_table
    assert load_table("main").label == "tab:main"  # the data files are found through the old name


def _run(*args):
    return subprocess.run([sys.executable, *args], check=False, capture_output=True, text=True)


def test_old_name_warns_naming_the_new_one():
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "import torch_uncertainty_signorm.paper.regression")
    result = _run("-c", code)
    assert result.returncode != 0
    assert "DeprecationWarning" in result.stderr
    assert "torch_uncertainty_signorm.reproduction" in result.stderr


@pytest.mark.parametrize(("module", "prog"), [
    ("torch_uncertainty_signorm.paper.regression", "signorm-regression"),
    ("torch_uncertainty_signorm.paper.results_table", "signorm-results-table"),
    ("torch_uncertainty_signorm.reproduction.regression", "signorm-regression"),
    ("torch_uncertainty_signorm.reproduction.results_table", "signorm-results-table"),
])
def test_old_and_new_module_commands_run(module, prog):
    result = _run("-m", module, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {prog}")
    assert "RuntimeWarning" not in result.stderr


def test_the_old_command_exits_with_the_check_status(tmp_path):
    """``python -m torch_uncertainty_signorm.paper.regression`` still gates a CI job (exit 2 on
    bad usage, as the new command)."""
    result = _run("-m", "torch_uncertainty_signorm.paper.regression", str(tmp_path))
    assert result.returncode == 2
    assert "signorm-regression: error" in result.stderr
