"""Stop a σNorm-Ensemble from training silently without its diversity regularizer.

TorchUncertainty's plain :class:`~torch_uncertainty.routines.ClassificationRoutine` (its
``main.py``, a notebook building ``ClassificationRoutine(model=signorm_ensemble(...))``) optimises
the task loss alone: no :math:`\\lambda \\mathcal{L}_{div}` and no scale-logit learning rate, i.e.
a different method. :func:`require_diversity_loss` makes the first training backward through
the ensemble fail unless its ``diversity_loss()`` has been computed with gradients, so such a run
stops before any optimisation step.
:class:`~torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine` and hand-written
loops adding ``model.diversity_loss()`` pass; evaluation (no gradients) is never checked.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["MissingRegularizerError", "require_diversity_loss"]

_SEEN = "_diversity_loss_seen"


class MissingRegularizerError(RuntimeError):
    """A σNorm-Ensemble was trained without its diversity regularizer."""


def require_diversity_loss(ensemble: nn.Module) -> None:
    """Make the first training backward through ``ensemble`` require its diversity loss.

    Idempotent. Once a training step has included ``ensemble.diversity_loss()`` the check is
    done (one attribute read per forward afterwards).

    Args:
        ensemble: A module with a ``penalty`` submodule (the regularizer ``diversity_loss()``
            calls), e.g. :class:`~torch_uncertainty_signorm.SigmaNormEnsemble`.
    """
    if hasattr(ensemble, _SEEN):
        return
    setattr(ensemble, _SEEN, False)
    ensemble.penalty.register_forward_hook(partial(_record_penalty, ensemble))
    ensemble.register_forward_hook(_check_on_backward)


def _record_penalty(ensemble: nn.Module, _module: nn.Module, _args: Any, _output: Any) -> None:
    if torch.is_grad_enabled():
        setattr(ensemble, _SEEN, True)


def _check_on_backward(ensemble: nn.Module, _args: Any, output: Any) -> None:
    if getattr(ensemble, _SEEN) or not ensemble.training:
        return
    if isinstance(output, Tensor) and output.requires_grad:
        output.register_hook(partial(_fail_without_penalty, ensemble))


def _fail_without_penalty(ensemble: nn.Module, grad: Tensor) -> None:
    if not getattr(ensemble, _SEEN):
        raise MissingRegularizerError(
            f"{type(ensemble).__name__} is being trained without its diversity regularizer "
            f"(model.diversity_loss() was never added to the loss), which is not σN-Ens: "
            f"train it with torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine "
            f"(it adds the regularizer and gives the σNorm scale logits their learning rate), "
            f"or add model.diversity_loss() to the loss yourself. Evaluating (test, validate, "
            f"predict) with TorchUncertainty's ClassificationRoutine is fine."
        )
