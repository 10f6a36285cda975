"""TorchUncertainty's classification routine with the σNorm diversity regulariser."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor, nn
from torch_uncertainty.routines import ClassificationRoutine
from torch_uncertainty.transforms import RepeatTarget
from torch_uncertainty.utils import get_logger_dir
from torchmetrics import MeanMetric, MetricCollection

from ..allowlist import instantiate_spec
from ..checks import check_positive_number
from ..diversity import geometric_ambiguity, jensen_gap, signorm_cosine
from ..ensemble import SigmaNormEnsemble
from ..evaluation.results_csv import append_to_last_row
from ..numerics import check_finite_inputs, check_finite_losses
from ..optim import DEFAULT_SCALE_LR_MULTIPLIER, signorm_param_groups
from ..prediction import EnsemblePrediction, ensemble_prediction, member_probabilities

__all__ = ["SigmaNormClassificationRoutine"]

#: Per-input diversity of the members' outputs, logged as ``{val,test}/div/<name>``. The
#: mutual information is TorchUncertainty's (``test/ens_MI``), not repeated here.
_OUTPUT_MEASURES = {"jensen_gap": jensen_gap, "geometric_ambiguity": geometric_ambiguity}


class SigmaNormClassificationRoutine(ClassificationRoutine):
    r"""Classification with a σNorm-Ensemble: task loss plus :math:`\lambda \mathcal{L}_{div}`.

    Keeps every argument and metric of TorchUncertainty's
    :class:`~torch_uncertainty.routines.ClassificationRoutine` and adds:

    - training: ``train_loss`` stays the task loss; ``train/diversity_loss`` (the
      regulariser :math:`\lambda \mathcal{L}_{div}`, with τ and λ set on the model),
      ``train/total_loss`` (what is optimised) and ``train/signorm_cos``;
    - validation and test: ``{val,test}/div/signorm_cos`` (all layers),
      ``.../signorm_cos_regularized``, ``.../jensen_gap`` and ``.../geometric_ambiguity``
      on the in-distribution set (the mutual information, i.e. the modulation uncertainty,
      is TorchUncertainty's ``test/ens_MI``); the test values are appended to
      TorchUncertainty's ``results.csv`` row;
    - :meth:`optimizer_param_groups`: the σNorm scale logits in their own group at
      ``scale_lr_multiplier`` × the learning rate with no weight decay. The
      ``torch-uncertainty`` command builds the recipe's ``optimizer:`` from these groups.

    ``SigmaNormClassificationRoutine.load_from_checkpoint(path)`` rebuilds the routine from the
    hyper-parameters it saves: the command's ``routine:`` block, or, built in Python, the
    arguments that are data. ``model``, ``loss`` and ``format_batch_fn`` given as
    ``class_path``/``init_args`` mappings are saved (and built only from
    :mod:`~torch_uncertainty_signorm.allowlist` classes); objects are not, pass them to
    ``load_from_checkpoint`` as keyword arguments.

    Args:
        model: The :class:`~torch_uncertainty_signorm.SigmaNormEnsemble` to train, or its
            ``class_path``/``init_args`` mapping (a recipe's ``model:`` block).
        num_classes: Number of classes; defaults to the model's heads', must match them.
        loss: The task loss, e.g. :class:`torch.nn.CrossEntropyLoss`, or its mapping.
        scale_lr_multiplier: Learning-rate multiplier of the σNorm scale logits.
        check_finite_loss: Stop at the first non-finite task or diversity loss with an error
            naming the term (:func:`~torch_uncertainty_signorm.numerics.check_finite_losses`).
            It reads one boolean back from the device per training step; turn it off for the
            last bit of GPU throughput.
        is_ensemble: ``None`` (default) for ``True``, the model being an ensemble; ``False``
            is an error.
        **kwargs: Every other argument of ``ClassificationRoutine``. ``format_batch_fn``
            defaults to ``RepeatTarget(M)``; another repeat count is an error. Recipes leave
            both unset, so the model's ``num_estimators`` alone sets M.
    """

    def __init__(
        self,
        model: SigmaNormEnsemble,
        num_classes: int | None = None,
        loss: nn.Module | None = None,
        *,
        scale_lr_multiplier: float = DEFAULT_SCALE_LR_MULTIPLIER,
        check_finite_loss: bool = True,
        is_ensemble: bool | None = None,
        **kwargs,
    ) -> None:
        kwargs.pop("_class_path", None)  # a saved hyper-parameter, read by the command
        if is_ensemble is not None:  # None (a recipe leaving it out): derived from the model
            kwargs["is_ensemble"] = is_ensemble
        arguments = {"model": model, "num_classes": num_classes, "loss": loss,
                     "scale_lr_multiplier": scale_lr_multiplier,
                     "check_finite_loss": check_finite_loss, **kwargs}
        model = _built(model, SigmaNormEnsemble, "model")
        loss = _built(loss, nn.Module, "loss")
        batch_format = kwargs.get("format_batch_fn")
        kwargs["format_batch_fn"] = _built(batch_format, nn.Module, "format_batch_fn")
        if not isinstance(model, SigmaNormEnsemble):
            raise TypeError(
                f"SigmaNormClassificationRoutine trains a SigmaNormEnsemble (build one with "
                f"torch_uncertainty_signorm.signorm_ensemble), got {type(model).__name__}."
            )
        check_positive_number("scale_lr_multiplier", scale_lr_multiplier)
        num_classes = _agree_with_model(model, num_classes, kwargs)
        super().__init__(model, num_classes, loss, **kwargs)
        self.save_hyperparameters(_saved_hyperparameters(type(self), arguments))
        self.scale_lr_multiplier = float(scale_lr_multiplier)
        self.check_finite_loss = bool(check_finite_loss)
        measures = MetricCollection({name: MeanMetric() for name in _OUTPUT_MEASURES})
        self.val_diversity = measures.clone(prefix="val/div/")
        self.test_diversity = measures.clone(prefix="test/div/")
        self._eval_logits: Tensor | None = None

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path, *args, weights_only: bool = True, **kwargs):
        """As Lightning's, always through ``__init__`` (so the model is built only from
        allow-listed classes): a checkpoint's ``_instantiator`` is ignored, since Lightning's
        would let jsonargparse import any class path the checkpoint names."""
        return super().load_from_checkpoint(
            checkpoint_path, *args, weights_only=weights_only, _instantiator=None, **kwargs
        )

    def optimizer_param_groups(self, lr: float) -> list[dict]:
        """Every parameter at ``lr``; the σNorm scale logits at ``lr * scale_lr_multiplier``
        without weight decay."""
        return signorm_param_groups(self, lr, self.scale_lr_multiplier)

    def on_train_start(self) -> None:
        super().on_train_start()
        scale_ids = {id(p) for p in self.model.scale_logits()}
        for optimizer in self.trainer.optimizers:
            for group in optimizer.param_groups:
                if any(id(p) in scale_ids for p in group["params"]) and any(
                    id(p) not in scale_ids for p in group["params"]
                ):
                    rank_zero_warn(
                        "The σNorm scale logits share an optimizer group with the other "
                        "parameters, so they train without their learning-rate multiplier. "
                        "Build the optimizer from routine.optimizer_param_groups(lr) (the "
                        "torch-uncertainty command does this for the YAML `optimizer:`)."
                    )
                    return

    def forward(self, inputs: Tensor, save_feats: bool = False) -> Tensor:
        logits = super().forward(inputs, save_feats=save_feats)
        self._eval_logits = None if self.training else logits.detach()
        return logits

    def training_step(self, batch: tuple[Tensor, Tensor]) -> Tensor:
        task_loss = super().training_step(batch)
        diversity_loss = self.model.diversity_loss()
        if self.check_finite_loss:
            check_finite_losses(
                self.global_step, task_loss=task_loss, diversity_loss=diversity_loss
            )
        loss = task_loss + diversity_loss
        self.log("train/diversity_loss", diversity_loss, logger=True)
        self.log("train/total_loss", loss, logger=True)
        self.log("train/signorm_cos", signorm_cosine(self.model.importances()).detach())
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int = 0) -> None:
        check_finite_inputs(batch[0], f"validation batch {batch_idx}")
        super().validation_step(batch)
        self._update_output_measures(self.val_diversity, batch[1][:: self.num_tta])

    def test_step(
        self, batch: tuple[Tensor, Tensor], batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        check_finite_inputs(batch[0], f"test batch {batch_idx} of loader {dataloader_idx}")
        super().test_step(batch, batch_idx, dataloader_idx)
        if dataloader_idx == 0:
            self._update_output_measures(self.test_diversity, batch[1][:: self.num_tta])

    def predict_step(
        self, batch: Tensor | tuple[Tensor, Tensor], batch_idx: int = 0, dataloader_idx: int = 0
    ) -> EnsemblePrediction:
        """Mean probabilities and modulation uncertainty U_mod per input (``trainer.predict``)."""
        inputs = batch[0] if isinstance(batch, (tuple, list)) else batch
        logits = self.forward(inputs)
        return ensemble_prediction(logits, self.model.num_estimators, self.binary_cls)

    def _update_output_measures(self, measures: MetricCollection, targets: Tensor) -> None:
        """Per-input Jensen gap and geometric ambiguity of the last evaluated batch."""
        members = self._eval_logits.size(0) // targets.size(0)  # M (times the TTA views)
        probs = member_probabilities(self._eval_logits, members, self.binary_cls)  # (M, B, C)
        for name, measure in _OUTPUT_MEASURES.items():
            value = measure(probs, targets) if name == "jensen_gap" else measure(probs)
            measures[name].update(value)

    def _diversity_results(self, measures: MetricCollection, stage: str) -> dict[str, Tensor]:
        results = measures.compute()
        measures.reset()
        with torch.no_grad():
            results[f"{stage}/div/signorm_cos"] = signorm_cosine(self.model.importances())
            results[f"{stage}/div/signorm_cos_regularized"] = signorm_cosine(
                self.model.importances(regularized_only=True)
            )
        return results

    def on_validation_epoch_end(self) -> None:
        super().on_validation_epoch_end()
        self.log_dict(self._diversity_results(self.val_diversity, "val"), sync_dist=True)

    def on_test_epoch_end(self) -> None:
        results = self._diversity_results(self.test_diversity, "test")
        super().on_test_epoch_end()
        self.log_dict(results, sync_dist=True)
        if self.save_to_csv and self.logger is not None and self.trainer.is_global_zero:
            log_dir = get_logger_dir(self.logger)
            if log_dir is not None and (log_dir / self.csv_filename).is_file():
                append_to_last_row(log_dir / self.csv_filename, results)


def _built(value: Any, base: type, name: str) -> Any:
    """``value``, built first when it is a ``class_path``/``init_args`` mapping; a value that is
    neither a module nor such a mapping (a string) is refused."""
    if isinstance(value, Mapping):
        return instantiate_spec(value, base, name)
    if value is not None and not isinstance(value, nn.Module):
        raise TypeError(f"{name} must be a {base.__name__} or its class_path/init_args mapping, "
                        f"got {type(value).__name__} {value!r:.200}.")
    return value


def _agree_with_model(model: SigmaNormEnsemble, num_classes: int | None, kwargs: dict) -> int:
    """The number of classes; ``is_ensemble`` and ``format_batch_fn`` filled in from the model.

    Values contradicting the model fail here rather than as a torchmetrics or cross-entropy
    shape error after the datamodule is set up.
    """
    members, classes = model.num_estimators, model.heads.weight.shape[1]
    if num_classes is None:
        num_classes = classes
    elif num_classes != classes:
        raise ValueError(
            f"num_classes={num_classes!r}, but the model's member heads predict {classes} "
            f"classes: give the model num_classes={num_classes!r} too, or leave the routine's "
            f"num_classes unset."
        )
    if not kwargs.setdefault("is_ensemble", True) and members > 1:
        raise ValueError(
            f"is_ensemble={kwargs['is_ensemble']!r}, but the model is an ensemble of "
            f"num_estimators={members} members, whose ensemble metrics this would drop: set "
            f"is_ensemble=True or leave it unset."
        )
    batch_format = kwargs.get("format_batch_fn")
    if batch_format is None:
        kwargs["format_batch_fn"] = RepeatTarget(num_repeats=members)
        return num_classes
    repeats = getattr(batch_format, "num_repeats", getattr(batch_format, "num_estimators", None))
    if repeats is not None and repeats != members:
        raise ValueError(
            f"format_batch_fn repeats the targets {repeats} times, but the model has "
            f"num_estimators={members} members: use RepeatTarget(num_repeats={members}) or "
            f"leave format_batch_fn unset."
        )
    return num_classes


def _is_data(value: Any) -> bool:
    """Whether ``value`` loads with ``torch.load(weights_only=True)`` and reads as YAML."""
    if isinstance(value, Mapping):
        return all(isinstance(key, str) and _is_data(item) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return all(_is_data(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, str))


def _saved_hyperparameters(cls: type, arguments: dict[str, Any]) -> dict[str, Any]:
    """What ``load_from_checkpoint`` and ``--ckpt_path`` read back: the command's ``routine:``
    block (Lightning's CLI hands it over while building), else ``arguments`` that are data.

    Lightning's ``_instantiator`` is dropped so that loading goes through ``__init__``.
    """
    given = _given_hyperparameters.get()
    if given is None:
        given = {"_class_path": f"{cls.__module__}.{cls.__qualname__}", **arguments}
    return {k: v for k, v in given.items() if k != "_instantiator" and _is_data(v)}

