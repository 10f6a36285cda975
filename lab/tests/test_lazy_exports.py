"""The lab's packages whose public names are listed in an ``__init__.pyi`` stub give them one way,
as the method's do (tests/fixtures/public_names.py); the results commands start without torch."""

import ast
import subprocess
import sys

import pytest

import signorm_lab
from fixtures.public_names import (
    ATTACH,
    check_gives_its_stubs_names,
    eager_imports,
    init_code,
    package_inits,
    stubbed_packages,
)

PACKAGES = package_inits(signorm_lab)
STUBBED = stubbed_packages(signorm_lab)
#: Folders that hold modules but give no names of their own (their modules are imported by path).
NO_PUBLIC_NAMES = {"signorm_lab.reproduction", "signorm_lab.safety"}
#: The root gives no names either, but holds the lab's version and the `python -m` import-path
#: fix (code of its own, no stub, no eager import).
ROOT = "signorm_lab"
#: A package whose ``__init__.py`` is data itself (the paper's published tables), not a face.
DATA_PACKAGES = {"signorm_lab.reproduction.published"}


@pytest.mark.parametrize("name", sorted(set(PACKAGES) - DATA_PACKAGES))
def test_every_package_gives_its_public_names_one_way(name):
    """Public names are declared one way: a package with any lists them in ``__init__.pyi`` and
    its ``__init__.py`` only attaches that stub (no eager import, no ``__all__`` of its own)."""
    body = init_code(PACKAGES[name])
    if name == ROOT:
        assert name not in STUBBED and not eager_imports(body)
        return
    if name in NO_PUBLIC_NAMES:
        assert body == [] and name not in STUBBED
        return
    assert name in STUBBED, f"{name} has public names but no __init__.pyi"
    lines = "\n".join(ast.unparse(node) for node in body).splitlines()
    assert "import lazy_loader" in lines and ATTACH in lines
    eager = eager_imports(body)
    assert not eager, f"{name}: imports {eager} eagerly (list the names in __init__.pyi)"


@pytest.mark.parametrize("name", STUBBED)
def test_every_stubbed_name_is_given_by_its_package(name):
    check_gives_its_stubs_names(name)


def test_the_results_commands_start_without_torch(tmp_path):
    """``signorm-results-table``, ``signorm-regression`` and ``signorm-compare`` (up to its first
    line) read and write CSV and YAML files: the modules they import (the run label of the
    stand-in data, the atomic file writes) import neither torch nor Lightning, which cost
    seconds of every start."""
    probe = (
        "import sys; import signorm_lab.reproduction.results_table as t, "
        "signorm_lab.reproduction.regression, "
        "signorm_lab.reproduction.run_groups, "
        "signorm_lab.reproduction.comparison, "
        "signorm_lab.datamodules.stand_in_data; "
        "print(sorted({'torch', 'lightning'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout
