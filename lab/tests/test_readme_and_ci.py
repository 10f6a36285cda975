"""The README's Python runs as written; CI runs the README's test command in an environment of its
own, with the TorchUncertainty recipes required."""

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).parents[2]


def _python_blocks(markdown: str, section: str) -> list[str]:
    text = markdown[markdown.index(section) :]
    text = text[: text.index("\n## ", 1)] if "\n## " in text[1:] else text
    return [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]


@pytest.mark.slow
def test_readme_python_snippet_runs_and_builds_the_optimizer_the_routine_uses():
    (snippet, _) = _python_blocks((ROOT / "README.md").read_text(), "## Use in Python")
    namespace: dict = {}
    exec(compile(snippet, "README.md", "exec"), namespace)
    assert torch.isfinite(namespace["loss"])
    recipe = namespace["routine"].configure_optimizers()
    base, scales = recipe["optimizer"].param_groups
    assert scales["lr"] == pytest.approx(100 * base["lr"]) and scales["weight_decay"] == 0
    assert namespace["prediction"].probs.shape == (8, 100)


def test_ci_runs_the_readme_test_command_in_its_own_environment(tmp_path):
    readme = (ROOT / "README.md").read_text()
    command = readme.split("# run the tests\n", 1)[1].splitlines()[0]
    assert command.startswith("python3 -m venv .venv && . .venv/bin/activate")
    # The script, on a README whose test command records the folder it was given.
    (tmp_path / ".ci").mkdir()
    shutil.copy(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    (tmp_path / "README.md").write_text(
        "```bash\n# run the tests\nmkdir -p .venv/made_by_ci && "
        'echo "required=$SIGNORM_REQUIRE_TU_RECIPES" > ran.txt\n```\n'
    )
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "users_packages").write_text("kept")
    done = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / ".venv" / "users_packages").read_text() == "kept"
    assert (tmp_path / ".ci-venv" / "made_by_ci").is_dir()
    # CI fails, not skips, the tests that need TorchUncertainty's recipes when they are missing.
    assert (tmp_path / "ran.txt").read_text() == "required=1\n"
    assert not (tmp_path / ".venv" / "made_by_ci").exists()
