"""The method and the lab import on every Python their ``pyproject.toml`` files declare (the same
range): vermin reads each module's syntax, standard-library names and annotations and finds none
newer than the declared floor."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_module_needs_a_newer_python_than_the_declared_floor(tmp_path):
    declared, lab = (
        re.search(r'^requires-python = "([^"]+)"', path.read_text(), re.MULTILINE).group(1)
        for path in (ROOT / "pyproject.toml", ROOT / "lab" / "pyproject.toml")
    )
    assert declared == lab
    floor = re.search(r">=\s*3\.(\d+)", declared).group(1)
    vermin = [
        str(Path(sys.executable).parent / "vermin"),
        f"--target=3.{floor}-",
        "--no-tips",
        "--violations",
        "--eval-annotations",
        "--no-parse-comments",
    ]
    sources = [str(ROOT / "src"), str(ROOT / "lab" / "src")]
    done = subprocess.run([*vermin, *sources], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    # The check can fail: a module using typing.Self (3.11) is caught at this floor.
    (tmp_path / "newer.py").write_text("from typing import Self\n")
    done = subprocess.run([*vermin, str(tmp_path)], capture_output=True, text=True, check=False)
    assert done.returncode != 0 and "typing.Self" in done.stdout, done.stdout
