"""The method imports nothing of the lab (``signorm_lab``), which is built on it: no module of the
package imports it, and importing every public name leaves it unimported. The old paths of what
moved there name it in strings only (the ``MOVED_*`` tables), imported when a user asks for one
(``utils/moved_modules.py``)."""

import ast
from pathlib import Path

import torch_uncertainty_signorm
from fixtures.imports import modules_imported_by
from fixtures.public_names import stubbed_packages

SOURCE = Path(torch_uncertainty_signorm.__file__).parent
LAB = "signorm_lab"
#: Calls that import the module their first argument names.
IMPORT_CALLS = {"import_module", "__import__"}


def _is_lab(name: str | None) -> bool:
    return bool(name) and name.split(".")[0] == LAB


def lab_imports(source: str) -> list[str]:
    """``line: statement`` for each import of the lab in ``source``: an import statement, or an
    ``import_module``/``__import__`` call with the lab's name written out."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            lab = any(_is_lab(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            lab = not node.level and _is_lab(node.module)
        elif isinstance(node, ast.Call) and node.args:
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            argument = node.args[0]
            lab = (
                name in IMPORT_CALLS
                and isinstance(argument, ast.Constant)
                and isinstance(argument.value, str)
                and _is_lab(argument.value)
            )
        else:
            lab = False
        if lab:
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_of_the_method_imports_the_lab():
    found = {
        str(path.relative_to(SOURCE)): imports
        for path in sorted(SOURCE.rglob("*.py"))
        if (imports := lab_imports(path.read_text(encoding="utf-8")))
    }
    assert not found, found


def test_the_check_sees_every_form_of_import():
    source = (
        "import signorm_lab\nfrom signorm_lab.safety import files\n"
        "import torch, signorm_lab.cli as cli\nimportlib.import_module('signorm_lab.export')\n"
        "__import__('signorm_lab')\n"
        # not imports of the lab: a string, a relative module, another package, a variable
        "MOVED = {'export': 'signorm_lab.export'}\nfrom .signorm_lab import x\n"
        "import signorm_labs\nimportlib.import_module(MOVED['export'])\n"
    )
    assert lab_imports(source) == [
        "1: import signorm_lab",
        "2: from signorm_lab.safety import files",
        "3: import torch, signorm_lab.cli as cli",
        "4: importlib.import_module('signorm_lab.export')",
        "5: __import__('signorm_lab')",
    ]


def test_importing_every_public_name_leaves_the_lab_unimported():
    """In a new process: every stubbed package's ``from ... import *``."""
    statement = "; ".join(
        f"from {name} import *" for name in stubbed_packages(torch_uncertainty_signorm)
    )
    assert modules_imported_by(statement, (LAB,)) == []
