"""The packages whose public names are listed in an ``__init__.pyi`` stub: what type checkers read
is what the package gives, one name at a time, on first use."""

import ast
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


#: Folders that hold modules but give no names of their own (their modules are imported by path).
NO_PUBLIC_NAMES = {
    "signorm_lab.reproduction",
    "signorm_lab.safety",
    "torch_uncertainty_signorm.utils",
}
#: A package whose ``__init__.py`` is data itself (the paper's published tables), not a face.
DATA_PACKAGES = {"signorm_lab.reproduction.published"}


def _package_name(init: Path) -> str:
    return ".".join(("torch_uncertainty_signorm", *init.parent.relative_to(SOURCE).parts))


@pytest.mark.parametrize("init", sorted(SOURCE.rglob("__init__.py")), ids=_package_name)
def test_every_package_gives_its_public_names_one_way(init):
    """Public names are declared one way: a package with any lists them in ``__init__.pyi`` and
    its ``__init__.py`` only attaches that stub (no eager import, no ``__all__`` of its own)."""
    name = _package_name(init)
    if name in DATA_PACKAGES:
        return
    tree = ast.parse(init.read_text())
    body = [node for node in tree.body if not isinstance(node, ast.Expr)]  # the docstring
    code = "\n".join(ast.unparse(node) for node in body)
    if name in NO_PUBLIC_NAMES:
        assert code == "" and name not in STUBBED
        return
    assert name in STUBBED, f"{name} has public names but no __init__.pyi"
    attach = "__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)"
    lines = code.splitlines()
    assert "import lazy_loader" in lines and attach in lines
    eager = [
        node.module
        for node in body
        if isinstance(node, ast.ImportFrom)
        and node.level
        # the root installs the moved modules' finder, from the bottom folder
        and not (name == "torch_uncertainty_signorm" and node.module == "utils.moved_modules")
    ]
    assert not eager, f"{init}: imports {eager} eagerly (list the names in __init__.pyi)"


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
        "import sys; import signorm_lab.reproduction.results_table as t, "
        "signorm_lab.reproduction.regression, "
        "signorm_lab.reproduction.run_groups, "
        "signorm_lab.datamodules.stand_in_data; "
        "print(sorted({'torch', 'lightning'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
