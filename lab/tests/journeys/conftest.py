"""The journeys' shared CIFAR data root, console-command environment and trained σN-Ens run."""

from dataclasses import dataclass
from pathlib import Path

import pytest
from journey_commands import EXPERIMENTS, failure, tiny_args

from fixtures.cifar_files import (  # noqa: F401 (pytest fixtures)
    accepted_cifar_root,
    cifar_manifest,
    cifar_root,
    command_env,
    run_command,
)


@dataclass(frozen=True)
class Run:
    """A finished ``torch-uncertainty fit``: its logger folder and captured output."""

    log_dir: Path
    stdout: str
    stderr: str


@pytest.fixture(scope="session")
def signorm_run(cifar_root, command_env, tmp_path_factory) -> Run:  # noqa: F811
    """``fit`` of ``resnet18_c10_signorm.yaml`` (eval_after_fit on, SVHN OOD) at 1/8 width: two
    steps on the CIFAR-10 stand-in, then the test of its best checkpoint. Shared: do not modify
    its folder (copy it)."""
    work = tmp_path_factory.mktemp("signorm_run")
    done = run_command(
        [
            "fit",
            "--config",
            EXPERIMENTS / "resnet18_c10_signorm.yaml",
            *tiny_args(cifar_root, work / "logs"),
        ],
        cwd=work,
        env=command_env,
    )
    assert done.returncode == 0, failure(done)
    return Run(work / "logs", done.stdout, done.stderr)
