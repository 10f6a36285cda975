"""Rebuild a σN-Ens routine from a checkpoint file that may come from someone else.

The method's ``SigmaNormClassificationRoutine.load_from_checkpoint`` takes its model, loss and
batch format as objects. A checkpoint of the ``torch-uncertainty`` command saves them as the
recipe's ``class_path`` blocks; :func:`load_routine` builds those blocks through the allow-list
(:func:`~signorm_lab.safety.class_blocks.build_class_block`), after reading the file as every
checkpoint here is read: a local regular file, whole, finite, ``weights_only``
(:func:`~signorm_lab.safety.checkpoints.check_lightning_checkpoint`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import nn

from .allowlist import current_class_paths
from .checkpoints import check_lightning_checkpoint, opened_checkpoint
from .class_blocks import build_class_block
from .files import check_file_name

__all__ = ["load_routine"]

#: The routine class as recipes name it (a checkpoint's ``_class_path``).
_ROUTINE = "torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine"


def load_routine(checkpoint_path: str | Path, **kwargs: Any) -> Any:
    """The :class:`~torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine` saved in
    ``checkpoint_path``, its ``model``, ``loss`` and ``format_batch_fn`` built from the
    checkpoint's ``class_path`` blocks through the allow-list (those given in ``kwargs`` are
    taken as they are, as by ``load_from_checkpoint``).

    Args:
        checkpoint_path: A local checkpoint file (a URL is refused: download it first).
        **kwargs: Arguments of the routine, over the checkpoint's (e.g. ``model=`` for a routine
            built in Python, whose checkpoint holds no model block), and Lightning's
            ``map_location`` or ``strict``.

    Raises:
        ValueError: If the file is no whole Lightning checkpoint of this routine (naming the
            file and what is wrong), a block names a class outside the allow-list, or the
            saved ``csv_filename`` is not a plain file name.
        FileNotFoundError: If nothing is at ``checkpoint_path``.
    """
    from torch_uncertainty_signorm.routines import SigmaNormClassificationRoutine
    from torch_uncertainty_signorm.signorm.ensemble import SigmaNormEnsemble

    routine = SigmaNormClassificationRoutine
    names = {_ROUTINE, f"{routine.__module__}.{routine.__qualname__}"}
    bases = {"model": SigmaNormEnsemble, "loss": nn.Module, "format_batch_fn": nn.Module}
    with opened_checkpoint(checkpoint_path, "checkpoint_path") as (content, file):
        checkpoint = check_lightning_checkpoint(content, checkpoint_path, "checkpoint_path")
        saved = current_class_paths(dict(checkpoint.get("hyper_parameters") or {}))
        if saved.get("_class_path", _ROUTINE) not in names:
            raise ValueError(
                f"checkpoint_path='{checkpoint_path}' was saved by the routine "
                f"{saved['_class_path']!r}; load_routine rebuilds {_ROUTINE} only."
            )
        if "csv_filename" not in kwargs and "csv_filename" in saved:
            check_file_name(saved["csv_filename"], "the checkpoint's csv_filename")
        for name, base in bases.items():
            if name not in kwargs and isinstance(saved.get(name), Mapping):
                kwargs[name] = build_class_block(saved[name], base, where=name)
        return routine.load_from_checkpoint(file, **kwargs)
