"""The ``torch-uncertainty`` console script: ``--help`` answered before importing the world.

The command (:mod:`signorm_lab.cli`) is Lightning's CLI, which imports torch,
Lightning and TorchUncertainty (seconds) before it can parse anything. ``torch-uncertainty
--help`` lists the subcommands without them; ``torch-uncertainty fit --help`` and every run go
to :func:`signorm_lab.cli.main`.
"""

from __future__ import annotations

import sys
import time

#: ``time.perf_counter()`` when this module was imported: the first line of the package the console
#: script runs, before the imports of torch, Lightning and TorchUncertainty, which the printed wall
#: time includes. Not the process's start (``/proc/self/stat``): a shell ``exec``-ing the command
#: (``bash -c 'pip install ... && torch-uncertainty fit ...'`` does for its last command) hands it
#: a process whose clock started with whatever ran before. Python's own start-up before this
#: import (a few hundredths of a second) is not counted.
STARTED = time.perf_counter()

#: The subcommands and what they do (Lightning's ``Trainer`` methods).
SUBCOMMANDS = {
    "fit": "Train the routine (and, with --eval_after_fit, test its best checkpoint).",
    "validate": "Run one evaluation epoch over the validation set.",
    "test": "Run one evaluation epoch over the test set(s), e.g. of a --ckpt_path.",
    "predict": "Run inference over the datamodule's predict set.",
}

USAGE = f"""\
usage: torch-uncertainty [-h] [-c CONFIG] [--print_config[=flags]] {{{",".join(SUBCOMMANDS)}}} ...

TorchUncertainty's Lightning CLI for any routine and datamodule named by class_path in a recipe
(σNorm-Ensembles' recipes are in experiments/), and for TorchUncertainty's own recipes.

subcommands (`torch-uncertainty SUBCOMMAND --help` lists its options, which loads the
training libraries and takes seconds):
{chr(10).join(f"  {name:<10}{text}" for name, text in SUBCOMMANDS.items())}

options:
  -h, --help            Show this help message and exit.
  -c CONFIG, --config CONFIG
                        Path to a configuration file in json or yaml format.
  --print_config[=flags]
                        Print the configuration after applying all other arguments and exit.

examples:
  torch-uncertainty fit --config experiments/digits_signorm.yaml
  torch-uncertainty test --config RECIPE.yaml --ckpt_path logs/.../checkpoints/FILE.ckpt
  torch-uncertainty fit --config cifar10/configs/resnet18/packed.yaml --data CIFAR10DataModule
"""


def main() -> None:
    """Entry point of the ``torch-uncertainty`` console script."""
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(USAGE, end="")
        return
    try:
        from . import main as run
    except RuntimeError as error:
        if "torchvision::" not in str(error):
            raise
        raise SystemExit(build_mismatch(error)) from None
    run(started=STARTED)


def build_mismatch(error: BaseException) -> str:
    """The one line for torchvision failing to load its operators (``operator torchvision::nms
    does not exist``): a torchvision built for another torch than the installed one."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return (
        f"torch-uncertainty: torchvision {installed('torchvision')} does not match torch "
        f"{installed('torch')} ({error}): each torchvision release is built for one torch "
        "release; install the pair together from the same index, e.g. pip install --force-"
        "reinstall torch torchvision (or both from https://download.pytorch.org/whl/cpu)."
    )
