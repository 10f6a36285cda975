"""Console output comes from one layer: the lab's commands (``cli/`` and the three reproduction
commands) and the results tables a test prints (``evaluation/printing.py``). Everything else,
the whole method included, says what it has to say by a warning, an exception or a return
value."""

import ast
from pathlib import Path

import signorm_lab
import torch_uncertainty_signorm

#: The lab's and the method's source folders.
SOURCES = (
    Path(signorm_lab.__file__).parent,
    Path(torch_uncertainty_signorm.__file__).parent,
)
#: Where console output may be written, relative to the lab's package.
CONSOLE_WRITERS = (
    "cli/",
    "reproduction/comparison.py",  # signorm-compare
    "reproduction/comparison_figure.py",  # a stored comparison's figure, redrawn
    "reproduction/regression.py",  # signorm-regression
    "reproduction/results_table.py",  # signorm-results-table
    "evaluation/printing.py",  # the results tables after a test
)


def _writes_to_console(call: ast.Call) -> bool:
    """``print(...)``, ``sys.stdout.write(...)``, ``sys.stderr.write(...)``, ``<console>.print``."""
    function = call.func
    if isinstance(function, ast.Name):
        return function.id == "print"
    if isinstance(function, ast.Attribute):
        owner = ast.unparse(function.value)
        return (function.attr == "write" and owner in ("sys.stdout", "sys.stderr")) or (
            function.attr == "print" and "console" in owner.lower()
        )
    return False


def test_only_the_commands_and_the_results_tables_write_to_the_console():
    writers = set()
    for source, path in ((s, p) for s in SOURCES for p in s.rglob("*.py")):
        relative = path.relative_to(source).as_posix()
        if source != SOURCES[0]:
            relative = f"{source.name}/{relative}"  # the method's: never a console writer
        calls = [
            node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
        ]
        if any(map(_writes_to_console, calls)):
            writers.add(relative)
    outside = sorted(w for w in writers if not w.startswith(CONSOLE_WRITERS))
    assert not outside, f"modules writing to the console outside the commands: {outside}"
    # The check sees what it looks for: the command's module and the results tables print.
    assert {"cli/command.py", "cli/stand_in.py", "evaluation/printing.py"} <= writers
