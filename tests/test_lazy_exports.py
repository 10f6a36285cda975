"""The packages whose public names are listed in an ``__init__.pyi`` stub: what type checkers read
is what the package gives, one name at a time, on first use."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import torch_uncertainty_signorm

SOURCE = Path(torch_uncertainty_signorm.__file__).parent
STUBBED = sorted(
    ".".join(("torch_uncertainty_signorm", *stub.parent.relative_to(SOURCE).parts))
    for stub in SOURCE.rglob("__init__.pyi")
)


def test_the_lazy_packages_are_the_root_callbacks_datamodules_evaluation_and_signorm():
    assert STUBBED == [
        "torch_uncertainty_signorm",
        "torch_uncertainty_signorm.callbacks",
        "torch_uncertainty_signorm.datamodules",
        "torch_uncertainty_signorm.evaluation",
        "torch_uncertainty_signorm.signorm",
    ]


@pytest.mark.parametrize("name", STUBBED)
def test_every_stubbed_name_is_given_by_its_package(name):
    package = importlib.import_module(name)
    assert package.__all__ and set(package.__all__) <= set(dir(package))
    star: dict = {}
    exec(f"from {name} import *", star)
    assert sorted(key for key in star if key != "__builtins__") == sorted(package.__all__)
    for public in package.__all__:
        assert getattr(package, public) is star[public]
    with pytest.raises(AttributeError, match="not_a_name"):
        package.not_a_name  # noqa: B018


def test_the_version_is_a_release_number():
    assert torch_uncertainty_signorm.__version__.count(".") == 2


def test_the_results_commands_start_without_torch(tmp_path):
    """``signorm-results-table`` and ``signorm-regression`` read and write CSV and YAML files:
    the modules they import (the run label of the stand-in data, the atomic file writes) import
    neither torch nor Lightning, which cost seconds of every start."""
    probe = (
        "import sys; import torch_uncertainty_signorm.reproduction.results_table as t, "
        "torch_uncertainty_signorm.reproduction.regression, "
        "torch_uncertainty_signorm.reproduction.run_groups, "
        "torch_uncertainty_signorm.datamodules.stand_in_data; "
        "print(sorted({'torch', 'lightning'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
