"""A recipe written for a GPU, run on a machine without one: one line saying what to add.

Lightning's ``Trainer(accelerator="gpu")`` on a machine without a GPU raises
``MisconfigurationException: No supported gpu backend found!`` after the routine is built, at the
end of a long traceback. :func:`missing_accelerator` checks the parsed configuration first (before
anything is built) and returns the one line :class:`~signorm_lab.cli.TUSigmaNormCLI`
reports instead: the recipe's accelerator, ``--trainer.accelerator=cpu`` and the reduced-size
overrides of ``experiments/README.md`` ("On a laptop") for a run of about a minute.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["LAPTOP_OVERRIDES", "NoAcceleratorError", "laptop_overrides", "missing_accelerator"]

#: experiments/README.md's ``LAPTOP`` overrides (one epoch of 5 batches of 16, on CPU), but the
#: accelerator and precision, which :func:`missing_accelerator` names first.
LAPTOP_OVERRIDES = (
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=5",
    "--trainer.limit_val_batches=2",
    "--trainer.limit_test_batches=2",
    "--data.init_args.batch_size=16",
    "--data.init_args.num_workers=0",
    "--data.init_args.persistent_workers=false",
)
#: Backbones with a width argument: the override narrowing them (experiments/README.md).
_NARROWER = {
    "torch_uncertainty.models.classification.wideresnet28x10": (
        "class_path=signorm_lab.models.backbones.wideresnet28",
        "init_args.widen_factor=1",
    ),
    "torch_uncertainty.models.classification.resnet": ("init_args.width_multiplier=0.25",),
    "torch_uncertainty.models.classification.packed_resnet": ("init_args.width_multiplier=0.25",),
    "torch_uncertainty.models.classification.batched_resnet": ("init_args.width_multiplier=0.25",),
    "torch_uncertainty.models.classification.masked_resnet": ("init_args.width_multiplier=0.25",),
    "torch_uncertainty.models.classification.mimo_resnet": ("init_args.width_multiplier=0.25",),
}


class NoAcceleratorError(RuntimeError):
    """The recipe asks for an accelerator this machine does not have; the message says what to
    add to the command line."""


def _gpu_available(accelerator: str) -> bool:
    from lightning.pytorch.accelerators import CUDAAccelerator, MPSAccelerator

    if accelerator == "cuda":
        return CUDAAccelerator.is_available()
    if accelerator == "mps":
        return MPSAccelerator.is_available()
    return CUDAAccelerator.is_available() or MPSAccelerator.is_available()


def _backbone(block: Any, path: str) -> tuple[str, str] | None:
    """``(dotted path, class_path)`` of the first block under ``block`` whose class has a width
    override, ``path`` being ``block``'s own dotted path."""
    if isinstance(block, Mapping):
        if block.get("class_path") in _NARROWER:
            return path, block["class_path"]
        for key, value in block.items():
            if (found := _backbone(value, f"{path}.{key}")) is not None:
                return found
    elif isinstance(block, list):
        for value in block:
            if (found := _backbone(value, path)) is not None:
                return found
    return None


def laptop_overrides(config: Mapping[str, Any]) -> list[str]:
    """The command-line options running ``config`` (a parsed recipe as a dict) on a CPU for about
    a minute: CPU, float32, the reduced budget and, when its backbone has a width, a narrower
    one."""
    trainer = config.get("trainer") or {}
    options = ["--trainer.accelerator=cpu"]
    if str(trainer.get("precision", "32")) not in ("32", "32-true", "64", "64-true"):
        options.append("--trainer.precision=32")
    if not trainer.get("fast_dev_run"):
        options += LAPTOP_OVERRIDES[:4]
    options += LAPTOP_OVERRIDES[4:]
    if (found := _backbone(config.get("routine"), "routine")) is not None:
        path, class_path = found
        options += [f"--{path}.{override}" for override in _NARROWER[class_path]]
    return options


def missing_accelerator(config: Mapping[str, Any]) -> str | None:
    """The one-line message for a recipe whose ``trainer.accelerator`` (``gpu``, ``cuda`` or
    ``mps``) this machine lacks, ``None`` when it has it (or the recipe asks for none)."""
    trainer = config.get("trainer") or {}
    accelerator = trainer.get("accelerator")
    if not isinstance(accelerator, str) or accelerator.lower() not in ("gpu", "cuda", "mps"):
        return None
    if _gpu_available(accelerator.lower()):
        return None
    kind = "GPU" if accelerator.lower() != "mps" else "Apple MPS device"
    precision = trainer.get("precision")
    written = f"trainer.accelerator={accelerator}" + (
        f", precision={precision}" if precision not in (None, 32, "32", "32-true") else ""
    )
    return (
        f"no {kind} found: this recipe sets {written}; to run it on this machine's CPU add "
        f"{' '.join(laptop_overrides(config))} (a reduced size, about a minute; "
        "experiments/README.md, 'On a laptop'), or only --trainer.accelerator=cpu"
        + (
            " --trainer.precision=32"
            if "--trainer.precision=32" in laptop_overrides(config)
            else ""
        )
        + " for the full recipe on CPU."
    )
