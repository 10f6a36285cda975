"""The packages whose public names are listed in an ``__init__.pyi`` stub: what type checkers read
is what the package gives, one name at a time, on first use (the lab's packages: the lab's
lab/tests/test_lazy_exports.py)."""

import ast

import pytest

import torch_uncertainty_signorm
from fixtures.public_names import (
    ATTACH,
    check_gives_its_stubs_names,
    eager_imports,
    init_code,
    package_inits,
    stubbed_packages,
)

PACKAGES = package_inits(torch_uncertainty_signorm)
STUBBED = stubbed_packages(torch_uncertainty_signorm)
#: Folders that hold modules but give no names of their own (their modules are imported by path).
NO_PUBLIC_NAMES = {"torch_uncertainty_signorm.utils"}
#: What a package may import eagerly: the moved names' shim (``utils/moved_modules.py``) and the
#: root's tables of moved names (``from .. import MOVED_NAMES, MOVED_REMOVED_IN``).
SHIM_IMPORTS = {"utils.moved_modules", None}


@pytest.mark.parametrize("name", PACKAGES)
def test_every_package_gives_its_public_names_one_way(name):
    """Public names are declared one way: a package with any lists them in ``__init__.pyi`` and
    its ``__init__.py`` only attaches that stub (no eager import, no ``__all__`` of its own)."""
    body = init_code(PACKAGES[name])
    if name in NO_PUBLIC_NAMES:
        assert body == [] and name not in STUBBED
        return
    assert name in STUBBED, f"{name} has public names but no __init__.pyi"
    lines = "\n".join(ast.unparse(node) for node in body).splitlines()
    assert "import lazy_loader" in lines and ATTACH in lines
    eager = [module for module in eager_imports(body) if module not in SHIM_IMPORTS]
    assert not eager, f"{name}: imports {eager} eagerly (list the names in __init__.pyi)"
    for node in body:  # from the root: its tables of moved names only
        if isinstance(node, ast.ImportFrom) and node.level and node.module is None:
            assert all(alias.name.startswith("MOVED_") for alias in node.names), name


@pytest.mark.parametrize("name", STUBBED)
def test_every_stubbed_name_is_given_by_its_package(name):
    check_gives_its_stubs_names(name)


def test_the_version_is_a_release_number():
    assert torch_uncertainty_signorm.__version__.count(".") == 2
