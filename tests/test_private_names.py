"""A ``_``-prefixed name stays in its module: no module of the package imports or reads one from
another (a name a sibling uses is public, even inside a private module such as ``_compat``)."""

import ast
from pathlib import Path

import torch_uncertainty_signorm

SOURCE = Path(torch_uncertainty_signorm.__file__).parent
PACKAGE = SOURCE.name


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    path = SOURCE.parent.joinpath(*dotted.split("."))
    return path.with_suffix(".py").exists() or path.is_dir()


def _imported_from(node: ast.ImportFrom, path: Path) -> str:
    """The absolute module name of ``from <module> import ...`` in ``path``."""
    if not node.level:
        return node.module or ""
    base = _module_name(path).split(".")
    base = base[: len(base) - node.level + (path.name == "__init__.py")]
    return ".".join([*base, node.module] if node.module else base)


def private_names_taken(path: Path, source: str) -> list[str]:
    """``line: module.name`` for each ``_``-prefixed name the module at ``path`` (its text
    ``source``) takes from another module of the package, imported (``from .x import _name``)
    or read (``x._name``)."""
    tree = ast.parse(source)
    found, modules = [], {}  # modules: local name -> the package's module it is
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            origin = _imported_from(node, path)
            if origin.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                dotted = f"{origin}.{alias.name}"
                if _is_module(dotted):
                    modules[alias.asname or alias.name] = dotted
                elif _is_private(alias.name):
                    found.append(f"{node.lineno}: {dotted}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    local = alias.asname or PACKAGE
                    modules[local] = alias.name if alias.asname else PACKAGE
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            owner = node.value
            while isinstance(owner, ast.Attribute):
                owner = owner.value
            if isinstance(owner, ast.Name) and owner.id in modules:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_takes_a_private_name_from_another():
    taken = {
        str(path.relative_to(SOURCE)): names
        for path in sorted(SOURCE.rglob("*.py"))
        if (names := private_names_taken(path, path.read_text(encoding="utf-8")))
    }
    assert not taken, taken


def test_the_check_sees_imports_and_reads():
    source = (
        "from ..utils.checks import (\n    check_positive_number,\n    _hidden,\n)\n"
        "from ..utils import _compat\nimport torch_uncertainty_signorm.members.norm as norm\n"
        "_compat._private_helper\nnorm._rows\n_compat.public_name\n"
    )
    # A module beside members/norm.py, only parsed.
    assert private_names_taken(SOURCE / "members" / "probe.py", source) == [
        "1: torch_uncertainty_signorm.utils.checks._hidden",
        "7: _compat._private_helper",
        "8: norm._rows",
    ]
