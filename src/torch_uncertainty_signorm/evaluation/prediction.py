r"""Inference: the ensemble's mean probabilities and modulation uncertainty per input.

A σN-Ens (or any TorchUncertainty ensemble) returns member-major logits ``(M·B, C)``; a
user wants, per input, the prediction :math:`\bar q(x) = \frac1M \sum_m q_m(x)` and how
much the members disagree, the modulation uncertainty
:math:`U_{mod}(x) = I[Y; M \mid x]` (:func:`~torch_uncertainty_signorm.mutual_information`),
with each member's probabilities beside them.
:func:`ensemble_prediction` turns logits into these; :func:`predict` runs a model on one
batch, on every batch of a loader, or on each loader of a TorchUncertainty datamodule's
``test_dataloader()``, without Lightning. The routine's ``predict_step`` calls
:func:`ensemble_prediction`, so ``trainer.predict`` returns the same
:class:`EnsemblePrediction` per batch (as does ``torch-uncertainty predict`` with a datamodule
that provides a ``predict_dataloader``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from ..utils.checks import check_integer
from .diversity import mutual_information

__all__ = ["EnsemblePrediction", "ensemble_prediction", "member_probabilities", "predict"]


class EnsemblePrediction(NamedTuple):
    """Per-input outputs of an ensemble.

    Attributes:
        probs: Mean member probabilities :math:`\\bar q`, shape ``(B, C)``; rows sum to 1.
        modulation_uncertainty: :math:`U_{mod}` (mutual information between the label and
            the member), shape ``(B,)``, in nats, between 0 and :math:`\\log M`.
        member_probs: Each member's probabilities :math:`q_m`, shape ``(M, B, C)``, member-major
            (``member_probs.mean(0)`` is ``probs``); ``None`` when built without them.
    """

    probs: Tensor
    modulation_uncertainty: Tensor
    member_probs: Tensor | None = None


def member_probabilities(logits: Tensor, num_estimators: int, binary: bool = False) -> Tensor:
    """Member probabilities ``(M, B, C)`` from member-major logits ``(M·B, C)``.

    Computed in float32 whatever the logits' precision (mixed-precision models return
    half-precision logits). A binary classifier's single logit column becomes two columns.
    """
    check_integer("num_estimators", num_estimators)
    if logits.dim() != 2 or logits.shape[0] % num_estimators != 0:
        raise ValueError(
            f"Expected member-major logits of shape (M·B, C) with M = {num_estimators}, got "
            f"shape {tuple(logits.shape)}."
        )
    logits = logits.float().unflatten(0, (num_estimators, -1))
    if binary:
        positive = torch.sigmoid(logits)
        return torch.cat([1 - positive, positive], dim=-1)
    return logits.softmax(dim=-1)


def ensemble_prediction(
    logits: Tensor, num_estimators: int, binary: bool = False
) -> EnsemblePrediction:
    """Mean probabilities, :math:`U_{mod}` and each member's probabilities per input from
    member-major logits ``(M·B, C)``."""
    probs = member_probabilities(logits, num_estimators, binary)
    return EnsemblePrediction(probs.mean(dim=0), mutual_information(probs), probs)


def _concatenated(parts: list[EnsemblePrediction]) -> EnsemblePrediction:
    """The batches' predictions as one, along the inputs (dim 1 of ``member_probs``)."""
    return EnsemblePrediction(
        torch.cat([part.probs for part in parts]),
        torch.cat([part.modulation_uncertainty for part in parts]),
        torch.cat([part.member_probs for part in parts], dim=1),
    )


def _inputs_of(batch: Any) -> Any:
    """The inputs of a loader batch: ``(inputs, targets)`` pairs give their first element."""
    return batch[0] if isinstance(batch, (tuple, list)) else batch


def _to_device(inputs: Any, device: torch.device) -> Any:
    if isinstance(inputs, Tensor):
        return inputs.to(device, non_blocking=True)
    if isinstance(inputs, Mapping):
        return {key: _to_device(value, device) for key, value in inputs.items()}
    return inputs


def predict(
    model: nn.Module,
    data: Tensor | Mapping[str, Tensor] | Iterable,
    num_estimators: int | None = None,
    *,
    binary: bool = False,
) -> EnsemblePrediction | list[EnsemblePrediction]:
    """Run ``model`` in evaluation mode and return the ensemble's per-input prediction.

    Args:
        model: A model mapping ``(B, ...)`` inputs to member-major logits ``(M·B, C)``:
            a :class:`~torch_uncertainty_signorm.SigmaNormEnsemble` or any TorchUncertainty
            ensemble.
        data: One batch (a tensor, or a mapping of tensors as tokenizers return), or an
            iterable of batches (a :class:`~torch.utils.data.DataLoader`; ``(inputs,
            targets)`` batches use their inputs), or a list of data loaders, as
            TorchUncertainty datamodules' ``test_dataloader()`` returns (the test set, then
            its OOD and shifted sets). Batches are moved to the model's device.
        num_estimators: M; defaults to ``model.num_estimators``.
        binary: ``True`` for a binary classifier with one logit column.

    Returns:
        An :class:`EnsemblePrediction` covering every input, in order; for a list of data
        loaders, one per loader, in the list's order (``predict(model,
        dm.test_dataloader())[0]`` is the test set's).

    Example:
        >>> prediction = predict(signorm_ensemble(resnet(3, 10, 18, style="cifar"), 4), x)
        >>> prediction.probs.shape, prediction.modulation_uncertainty.shape
        (torch.Size([B, 10]), torch.Size([B]))
        >>> prediction.member_probs.shape  # each member's probabilities
        torch.Size([4, B, 10])
    """
    if (
        isinstance(data, (list, tuple))
        and data
        and all(isinstance(loader, DataLoader) for loader in data)
    ):
        return [predict(model, loader, num_estimators, binary=binary) for loader in data]
    if num_estimators is None:
        num_estimators = getattr(model, "num_estimators", None)
        if num_estimators is None:
            raise ValueError(
                f"{type(model).__name__} has no num_estimators attribute; pass num_estimators=M."
            )
    batches = [data] if isinstance(data, (Tensor, Mapping)) else data
    reference = next(model.parameters(), None)
    device = reference.device if reference is not None else torch.device("cpu")
    was_training = model.training
    model.eval()
    outputs = []
    try:
        with torch.inference_mode():
            for batch in batches:
                inputs = _inputs_of(batch)
                if isinstance(inputs, DataLoader):
                    raise TypeError(
                        "predict received a batch that is a DataLoader: pass one loader, or a "
                        "list holding only data loaders (e.g. dm.test_dataloader())."
                    )
                logits = model(_to_device(inputs, device))
                outputs.append(ensemble_prediction(logits, num_estimators, binary))
    finally:
        model.train(was_training)
    if not outputs:
        raise ValueError("predict received no batch: the data iterable is empty.")
    return _concatenated(outputs)
