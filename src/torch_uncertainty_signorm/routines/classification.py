"""TorchUncertainty's classification routine with the σNorm diversity regulariser."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor, nn
from torch_uncertainty.metrics import GroupingLoss
from torch_uncertainty.routines import ClassificationRoutine
from torch_uncertainty.transforms import RepeatTarget
from torch_uncertainty.utils import get_logger_dir
from torchmetrics import MeanMetric, MetricCollection

from .. import _compat
from ..callbacks.logits_tap import LogitsTap
from ..checks import check_fraction, check_positive_number
from ..diversity import geometric_ambiguity, jensen_gap, signorm_cosine
from ..evaluation.printing import use_results_tables
from ..evaluation.results_csv import append_to_last_row
from ..prediction import EnsemblePrediction, ensemble_prediction, member_probabilities
from ..safety.checkpoints import (
    CHECKPOINT_TAU,
    check_lightning_checkpoint,
    is_url,
    read_checkpoint,
)
from ..safety.class_blocks import build_class_block
from ..safety.files import check_file_name
from ..safety.plain_data import is_data
from ..signorm.diversity_target import (
    DiversityTarget,
    missed_target_message,
    optimizer_lookahead,
    target_cost_message,
)
from ..signorm.ensemble import SigmaNormEnsemble
from ..signorm.optim import signorm_param_groups
from .member_health import (
    IDENTICAL_MEMBERS_COSINE,
    MemberHealth,
    diagnose,
    health_counts,
    health_message,
    identical_members_message,
)
from .numerics import check_finite_inputs, check_finite_losses

__all__ = ["SigmaNormClassificationRoutine"]

_TARGET_STATE = "signorm_diversity_target"

#: Per-input diversity of the members' outputs, logged as ``{val,test}/div/<name>``. The
#: mutual information is TorchUncertainty's (``test/ens_MI``), not repeated here.
_OUTPUT_MEASURES = {"jensen_gap": jensen_gap, "geometric_ambiguity": geometric_ambiguity}


class SigmaNormClassificationRoutine(ClassificationRoutine):
    r"""Classification with a σNorm-Ensemble: task loss plus :math:`\lambda \mathcal{L}_{div}`.

    Keeps every argument and metric of TorchUncertainty's
    :class:`~torch_uncertainty.routines.ClassificationRoutine` and adds:

    - training: ``train_loss`` stays the task loss; ``train/diversity_loss`` (the
      regulariser :math:`\lambda \mathcal{L}_{div}`, with τ and λ set on the model),
      ``train/total_loss`` (what is optimised), ``train/signorm_cos`` (all layers),
      ``train/signorm_cos_regularized`` and ``train/tau``, every ``log_every_n_steps``
      (from the weights alone: no extra forward); σNorm-cos on the progress bar, and τ too
      with ``target_diversity``;
    - a warning, at a validation during ``fit`` and when ``fit`` ends, while the regularised
      layers' σNorm-cos is still >= :data:`IDENTICAL_MEMBERS_COSINE` (the members are one
      model), naming the value, τ, λ, the steps run and the remedies;
    - ``target_diversity``: τ adjusted every optimisation step so that the regularised
      layers' σNorm-cos settles at the target
      (:class:`~torch_uncertainty_signorm.signorm.diversity_target.DiversityTarget`); its state is
      saved
      in checkpoints, and a run ending away from the target says so. When the ensemble's
      validation accuracy is
      :data:`~torch_uncertainty_signorm.signorm.diversity_target.ACCURACY_DROP`
      below its best at two validations in a row, the controller stops strengthening the push and
      warns what the target
      costs at this budget, instead of trading the accuracy away silently;
    - validation and test: ``{val,test}/div/signorm_cos`` (all layers),
      ``.../signorm_cos_regularized``, ``.../jensen_gap`` and ``.../geometric_ambiguity``
      on the in-distribution set (the mutual information, i.e. the modulation uncertainty,
      is TorchUncertainty's ``test/ens_MI``); the test values are appended to
      TorchUncertainty's ``results.csv`` row;
    - member health (:mod:`~torch_uncertainty_signorm.routines.member_health`), from the same logits
      on the in-distribution set: ``{val,test}/health/{one_class,constant_output,
      chance_accuracy,non_finite}`` (0/1, the ensemble) and ``.../health/dead_members`` (members
      with a constant output or chance accuracy), and a one-line warning per condition and
      member, once per run, with what to try: during ``fit`` when found at two validations in
      a row or at the last one (the first epoch's transients stay silent), and after testing;
    - test: each member's ``test/member_{m}/Acc`` (a fraction) and ``test/member_{m}/NLL``,
      printed in a *Members* table and appended to ``results.csv`` with the health counts;
    - :meth:`optimizer_param_groups`: the σNorm scale logits in their own group at
      ``scale_lr_multiplier`` × the learning rate with no weight decay, and every per-member
      parameter at ``member_lr_multiplier`` × its rate. The ``torch-uncertainty`` command
      builds the recipe's ``optimizer:`` from these groups; in Python, pass a σN-Ens
      ``optim_recipe`` (:mod:`torch_uncertainty_signorm.optim_recipes`, or
      :func:`~torch_uncertainty_signorm.signorm.optim.signorm_optim_recipe`).

    ``SigmaNormClassificationRoutine.load_from_checkpoint(path)`` rebuilds the routine from the
    hyper-parameters it saves: the command's ``routine:`` block, or, built in Python, the
    arguments that are data. ``model``, ``loss`` and ``format_batch_fn`` given as
    ``class_path``/``init_args`` mappings are saved (and built only from
    :mod:`~torch_uncertainty_signorm.safety.allowlist` classes); objects are not, pass them to
    ``load_from_checkpoint`` as keyword arguments.

    Args:
        model: The :class:`~torch_uncertainty_signorm.SigmaNormEnsemble` to train, or its
            ``class_path``/``init_args`` mapping (a recipe's ``model:`` block).
        num_classes: Number of classes; defaults to the model's heads', must match them.
        loss: The task loss, e.g. :class:`torch.nn.CrossEntropyLoss`, or its mapping.
        scale_lr_multiplier: Learning-rate multiplier of the σNorm scale logits; ``None``
            (default): 100 (the paper's) under SGD-type optimisers, 3 under adaptive ones
            (Adam, AdamW, RMSprop, ...;
            :func:`~torch_uncertainty_signorm.signorm.optim.scale_rate`).
        member_lr_multiplier: Learning-rate multiplier of every per-member parameter (scale
            logits, member heads; the heads' weight decay is divided by it). The task loss
            averages over the M·B rows of the M members, so each member's own parameters get
            1/M of a single model's gradient; ``num_estimators`` gives them a single model's
            step. ``1`` (default) leaves them at the shared rate (the paper's recipes). See
            :func:`~torch_uncertainty_signorm.signorm.optim.signorm_param_groups`.
        target_diversity: σNorm-cos of the regularised layers to reach and hold by adjusting
            τ during training (in (0, 1); lower is more diverse). ``None`` (default) trains at
            the model's fixed τ.
        warn_identical_members: Warn when the members are still one model (set ``False`` to
            silence, e.g. for a deliberate λ = 0 control).
        check_finite_loss: Stop at the first non-finite task or diversity loss with an error
            naming the term
            (:func:`~torch_uncertainty_signorm.routines.numerics.check_finite_losses`).
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
        scale_lr_multiplier: float | None = None,
        member_lr_multiplier: float = 1.0,
        target_diversity: float | None = None,
        warn_identical_members: bool = True,
        check_finite_loss: bool = True,
        is_ensemble: bool | None = None,
        **kwargs,
    ) -> None:
        kwargs.pop(_compat.CLASS_PATH_KEY, None)  # a saved hyper-parameter, read by the command
        if is_ensemble is not None:  # None (a recipe leaving it out): derived from the model
            kwargs["is_ensemble"] = is_ensemble
        arguments = {"model": model, "num_classes": num_classes, "loss": loss,
                     "scale_lr_multiplier": scale_lr_multiplier,
                     "member_lr_multiplier": member_lr_multiplier,
                     "target_diversity": target_diversity,
                     "warn_identical_members": warn_identical_members,
                     "check_finite_loss": check_finite_loss, **kwargs}
        eval_grouping_loss = kwargs.pop("eval_grouping_loss", False)
        check_file_name(kwargs.get("csv_filename", "results.csv"), "csv_filename")
        model = _built(model, SigmaNormEnsemble, "model")
        loss = _built(loss, nn.Module, "loss")
        batch_format = kwargs.get("format_batch_fn")
        kwargs["format_batch_fn"] = _built(batch_format, nn.Module, "format_batch_fn")
        if not isinstance(model, SigmaNormEnsemble):
            raise TypeError(
                f"SigmaNormClassificationRoutine trains a SigmaNormEnsemble (build one with "
                f"torch_uncertainty_signorm.signorm_ensemble), got {type(model).__name__}."
            )
        if scale_lr_multiplier is not None:
            check_positive_number("scale_lr_multiplier", scale_lr_multiplier)
        check_positive_number("member_lr_multiplier", member_lr_multiplier)
        if target_diversity is not None:
            check_fraction("target_diversity", target_diversity)
        if not isinstance(warn_identical_members, bool):
            raise ValueError(
                f"warn_identical_members must be True or False, got {warn_identical_members!r}."
            )
        num_classes = _agree_with_model(model, num_classes, kwargs)
        super().__init__(model, num_classes, loss, **kwargs)
        self.save_hyperparameters(_saved_hyperparameters(type(self), arguments))
        self.scale_lr_multiplier = (None if scale_lr_multiplier is None
                                    else float(scale_lr_multiplier))
        self.member_lr_multiplier = float(member_lr_multiplier)
        self.check_finite_loss = bool(check_finite_loss)
        self.target_diversity = target_diversity
        self.warn_identical_members = warn_identical_members
        self.diversity_target: DiversityTarget | None = None
        self._loaded_target_state: dict | None = None
        self._warned_identical = False
        measures = MetricCollection({name: MeanMetric() for name in _OUTPUT_MEASURES})
        self.val_diversity = measures.clone(prefix="val/div/")
        self.test_diversity = measures.clone(prefix="test/div/")
        classes = 2 if self.binary_cls else num_classes
        self.val_health = MemberHealth(model.num_estimators, classes)
        self.test_health = MemberHealth(model.num_estimators, classes)
        self._health_warned: set[tuple[str, int | None]] = set()
        self._health_last: dict[tuple[str, int | None], str] = {}  # the last validation's
        self._val_accuracy: float | None = None  # the ensemble's, at the last validation
        self.logits_tap = LogitsTap(type(self).__name__)
        self.logits_tap.attach(self)
        if eval_grouping_loss:
            self._evaluate_grouping_loss()

    def _evaluate_grouping_loss(self) -> None:
        """TorchUncertainty's grouping loss of the ensemble's mean probabilities, on every
        member's features of each input (the wrapper's ``feats_forward``, ``(B, M·D)``).

        TorchUncertainty 0.13 refuses ``eval_grouping_loss`` for ensembles, whose features it
        expects as ``M·B`` rows; σN-Ens gives one row per input, so the routine sets up the
        metrics TorchUncertainty's steps update and log.
        """
        self.eval_grouping_loss = True
        grouping_loss = MetricCollection({"cls/grouping_loss": GroupingLoss()})
        self.val_grouping_loss = grouping_loss.clone(prefix="val/")
        self.test_grouping_loss = grouping_loss.clone(prefix="test/")

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path, *args, weights_only: bool = True, **kwargs):
        """As Lightning's, always through ``__init__`` (so the model is built only from
        allow-listed classes): a checkpoint's ``_instantiator`` is ignored, since Lightning's
        would let jsonargparse import any class path the checkpoint names.

        A local checkpoint that fails to load (empty, truncated, ``hyper_parameters`` that are
        not a mapping, a negative ``global_step``) is read again to say which file and what is
        wrong with it."""
        try:
            return super().load_from_checkpoint(
                checkpoint_path, *args, weights_only=weights_only,
                **{_compat.INSTANTIATOR_KEY: None}, **kwargs,
            )
        except Exception as error:
            if isinstance(checkpoint_path, str | Path) and not is_url(checkpoint_path):
                try:
                    check_lightning_checkpoint(
                        read_checkpoint(checkpoint_path, "checkpoint_path"), checkpoint_path,
                        "checkpoint_path",
                    )
                except (ValueError, FileNotFoundError) as clear:
                    raise clear from error
            raise

    def optimizer_param_groups(self, lr: float, weight_decay: float | None = None,
                               adaptive: bool = False) -> list[dict]:
        """Every parameter at ``lr``; the σNorm scale logits at ``lr * scale_lr_multiplier``
        (unset: :func:`~torch_uncertainty_signorm.signorm.optim.scale_rate`, lower for an
        ``adaptive``
        optimiser such as Adam) without weight decay;
        per-member parameters at ``member_lr_multiplier`` × their rate, the heads with
        ``weight_decay / member_lr_multiplier`` (the optimizer's weight decay and kind, which
        the ``torch-uncertainty`` command passes)."""
        return signorm_param_groups(
            self, lr, self.scale_lr_multiplier, self.member_lr_multiplier, weight_decay,
            adaptive=adaptive,
        )

    def on_fit_start(self) -> None:
        super().on_fit_start()
        self._health_warned.clear()  # warn again in a new run
        self._health_last = {}

    def on_train_start(self) -> None:
        super().on_train_start()
        self._warned_identical = False
        if self.target_diversity is not None:
            optimizer = self.trainer.optimizers[0] if self.trainer.optimizers else None
            lookahead = 1.0 if optimizer is None else optimizer_lookahead(
                optimizer, self.model.scale_logits()
            )
            self.diversity_target = DiversityTarget(
                self.target_diversity, self.model.tau,
                self.trainer.estimated_stepping_batches, lookahead=lookahead,
            )
            if self._loaded_target_state is not None:
                self.diversity_target.load_state_dict(self._loaded_target_state)
                self._loaded_target_state = None
            elif self._members_identical(cosine := self._regularized_cosine()):
                rank_zero_warn(
                    f"target_diversity={self.target_diversity:g} starts from identical members "
                    f"(the regularised layers' σNorm-cos is {cosine:.5f}): the controller has "
                    f"nothing to steer until the heads' small asymmetry grows, so tau falls to "
                    f"its bound and the members may then overshoot the target. Give the model "
                    f"member_spread (e.g. 0.3) for a controlled approach."
                )
            self.model.set_tau(self.diversity_target.tau)
        scale_ids = {id(p) for p in self.model.scale_logits()}
        for optimizer in self.trainer.optimizers:
            for group in optimizer.param_groups:
                if any(id(p) in scale_ids for p in group["params"]) and any(
                    id(p) not in scale_ids for p in group["params"]
                ):
                    rank_zero_warn(
                        "The σNorm scale logits share an optimizer group with the other "
                        "parameters, so they train without their learning-rate multiplier. "
                        "Pass a σN-Ens optim_recipe: one of torch_uncertainty_signorm."
                        "optim_recipes (e.g. optim_cifar10_resnet18), or your own wrapped in "
                        "torch_uncertainty_signorm.signorm.optim.signorm_optim_recipe (the "
                        "torch-uncertainty command does this for the YAML `optimizer:`)."
                    )
                    return

    def training_step(self, batch: tuple[Tensor, Tensor]) -> Tensor:
        task_loss = super().training_step(batch)
        with torch.no_grad():
            cosine = signorm_cosine(self.model.importances())
            cosine_regularized = signorm_cosine(self.model.importances(regularized_only=True))
        target = self.diversity_target
        if target is not None and target.step != self.global_step:  # once per optimiser step
            self.model.set_tau(target.update(float(cosine_regularized), self.global_step))
        diversity_loss = self.model.diversity_loss()
        if self.check_finite_loss:
            check_finite_losses(
                self.global_step, task_loss=task_loss, diversity_loss=diversity_loss
            )
        loss = task_loss + diversity_loss
        self.log("train/diversity_loss", diversity_loss, logger=True)
        self.log("train/total_loss", loss, logger=True)
        self.log("train/signorm_cos", cosine, prog_bar=True)
        self.log("train/signorm_cos_regularized", cosine_regularized)
        self.log("train/tau", self.model.tau, prog_bar=target is not None)
        return loss

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        if self.diversity_target is not None:
            checkpoint[_TARGET_STATE] = self.diversity_target.state_dict()
        checkpoint[CHECKPOINT_TAU] = self.model.tau

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        self._loaded_target_state = checkpoint.get(_TARGET_STATE)
        if isinstance(checkpoint.get(CHECKPOINT_TAU), float):  # the τ the run had reached
            self.model.set_tau(checkpoint[CHECKPOINT_TAU])

    def on_train_end(self) -> None:
        super().on_train_end()
        self._warn_health(self._health_last)  # the state fit ends in, even if seen once
        cosine = self._regularized_cosine()
        if self.diversity_target is not None and not self.diversity_target.reached(cosine):
            rank_zero_warn(missed_target_message(self.diversity_target, cosine, self.global_step,
                                                 getattr(self.model, "member_spread", 0.0)))
        elif (self._members_identical(cosine)
              and getattr(self, "_identical_warned_at", None) != self.global_step):
            # (not again when a validation at this very step already said it)
            rank_zero_warn(self._identical_members_message(cosine, "at the end of fit"))

    def _regularized_cosine(self) -> float:
        with torch.no_grad():
            return float(signorm_cosine(self.model.importances(regularized_only=True)))

    def _members_identical(self, cosine: float) -> bool:
        return (self.warn_identical_members and self.model.num_estimators > 1
                and cosine >= IDENTICAL_MEMBERS_COSINE)

    def _identical_members_message(self, cosine: float, when: str) -> str:
        return identical_members_message(cosine, when, self.global_step, self.model.tau,
                                         self.model.config.diversity_strength)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int = 0) -> None:
        check_finite_inputs(batch[0], f"validation batch {batch_idx}")
        super().validation_step(batch)
        targets = batch[1][:: self.num_tta]
        self._update_output_measures(self.val_diversity, self.val_health, targets)

    def test_step(
        self, batch: tuple[Tensor, Tensor], batch_idx: int, dataloader_idx: int = 0
    ) -> None:
        check_finite_inputs(batch[0], f"test batch {batch_idx} of loader {dataloader_idx}")
        super().test_step(batch, batch_idx, dataloader_idx)
        if dataloader_idx == 0:
            self._update_output_measures(
                self.test_diversity, self.test_health, batch[1][:: self.num_tta]
            )

    def predict_step(
        self, batch: Tensor | tuple[Tensor, Tensor], batch_idx: int = 0, dataloader_idx: int = 0
    ) -> EnsemblePrediction:
        """Mean probabilities, modulation uncertainty U_mod and each member's probabilities per
        input (``trainer.predict``)."""
        inputs = batch[0] if isinstance(batch, (tuple, list)) else batch
        logits = self.forward(inputs)
        return ensemble_prediction(logits, self.model.num_estimators, self.binary_cls)

    def _update_output_measures(
        self, measures: MetricCollection, health: MemberHealth, targets: Tensor
    ) -> None:
        """Per-input Jensen gap and geometric ambiguity of the last evaluated batch, and its
        member health sums (each member's probabilities averaged over the TTA views)."""
        logits, rows_per_input = self.logits_tap.take(targets.size(0))  # M × the TTA views
        probs = member_probabilities(logits, rows_per_input, self.binary_cls)  # (M·TTA, B, C)
        for name, measure in _OUTPUT_MEASURES.items():
            value = measure(probs, targets) if name == "jensen_gap" else measure(probs)
            measures[name].update(value)
        members = self.model.num_estimators  # a member's rows: its B inputs' views, in order
        per_input = probs.reshape(members, targets.size(0), -1, probs.shape[-1]).mean(dim=2)
        health.update(per_input, targets, logits.unflatten(0, (members, -1)))

    def _health_results(
        self, health: MemberHealth, stage: str, warn: bool
    ) -> dict[str, Tensor | float]:
        """``{stage}/health/*`` (and, at test, ``test/member_{m}/{Acc,NLL}``) of the evaluation
        just ended; with ``warn``, its conditions are warned about (:meth:`_warn_health`):
        during ``fit``, those also found at the previous validation, so that the first epoch's
        transients (BatchNorm running statistics still catching up) stay silent."""
        if health.update_count == 0:
            return {}
        stats = health.compute()
        health.reset()
        if stage == "val":
            self._val_accuracy = float(stats.accuracy()[-1])
        conditions = diagnose(stats)
        if warn:
            messages = {(c.condition, c.member): health_message(c, self.global_step, stage)
                        for c in conditions}
            if stage == "val":  # fit: what persists since the previous validation
                previous, self._health_last = self._health_last, messages
                messages = {k: v for k, v in messages.items() if k in previous}
            self._warn_health(messages)
        counts = health_counts(conditions)
        results: dict[str, Tensor | float] = {
            f"{stage}/health/{name}": float(count) for name, count in counts.items()
        }
        if stage == "test":
            accuracy, nll = stats.accuracy(), stats.nll()
            for member in range(health.num_estimators):
                results[f"test/member_{member}/Acc"] = accuracy[member].float()
                results[f"test/member_{member}/NLL"] = nll[member].float()
        return results

    def _warn_health(self, messages: dict[tuple[str, int | None], str]) -> None:
        """Warn each (condition, member) once per run."""
        for key, message in messages.items():
            if key not in self._health_warned:
                self._health_warned.add(key)
                rank_zero_warn(message)

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
        results = self._diversity_results(self.val_diversity, "val")
        fitting = self.trainer.state.fn == "fit" and not self.trainer.sanity_checking
        self._val_accuracy = None
        results |= self._health_results(self.val_health, "val", warn=fitting)
        self.log_dict(results, sync_dist=True)
        cosine = float(results["val/div/signorm_cos_regularized"])
        target = self.diversity_target
        if fitting and target is not None and self._val_accuracy is not None:
            best = target.best_accuracy
            if target.validated(self._val_accuracy):
                rank_zero_warn(target_cost_message(target, best, self._val_accuracy, cosine,
                                                   self.global_step))
        if fitting and not self._warned_identical and self._members_identical(cosine):
            self._warned_identical = True
            self._identical_warned_at = self.global_step
            rank_zero_warn(self._identical_members_message(cosine, "at this validation"))

    def on_test_epoch_end(self) -> None:
        use_results_tables(self.trainer)  # print the diversity measures too, names unabridged
        results = self._diversity_results(self.test_diversity, "test")
        results |= self._health_results(self.test_health, "test", warn=True)
        super().on_test_epoch_end()
        self.log_dict(results, sync_dist=True)
        if self.save_to_csv and self.logger is not None and self.trainer.is_global_zero:
            log_dir = get_logger_dir(self.logger)
            if log_dir is not None:
                append_to_last_row(log_dir / self.csv_filename, results, run_dir=log_dir)


def _built(value: Any, base: type, name: str) -> Any:
    """``value``, built first when it is a ``class_path``/``init_args`` mapping; a value that is
    neither a module nor such a mapping (a string) is refused."""
    if isinstance(value, Mapping):
        return build_class_block(value, base, where=name)
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


def _saved_hyperparameters(cls: type, arguments: dict[str, Any]) -> dict[str, Any]:
    """What ``load_from_checkpoint`` and ``--ckpt_path`` read back: the command's ``routine:``
    block (Lightning's CLI hands it over while building), else ``arguments`` that are data.

    Lightning's ``_instantiator`` is dropped so that loading goes through ``__init__``.
    """
    given = _compat.given_hyperparameters()
    if given is None:
        given = {_compat.CLASS_PATH_KEY: f"{cls.__module__}.{cls.__qualname__}", **arguments}
    return {k: v for k, v in given.items() if k != _compat.INSTANTIATOR_KEY and is_data(v)}

