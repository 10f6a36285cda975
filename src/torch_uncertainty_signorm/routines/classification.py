"""TorchUncertainty's classification routine with the σNorm diversity regularizer."""

from __future__ import annotations

from typing import Any

import torch
from lightning.pytorch import Callback
from torch import Tensor, nn
from torch_uncertainty.routines import ClassificationRoutine
from torchmetrics import MeanMetric, MetricCollection

from ..callbacks.identical_members import IdenticalMembersWarning
from ..callbacks.logits_tap import LogitsTap
from ..callbacks.tau_control import DiversityTargetCallback
from ..evaluation.diversity import geometric_ambiguity, jensen_gap, signorm_cosine
from ..evaluation.prediction import EnsemblePrediction, ensemble_prediction, member_probabilities
from ..signorm.checkpoint_tau import CHECKPOINT_TAU, checkpoint_tau
from ..signorm.diversity_target import DiversityTarget, check_controlled_tau
from ..signorm.ensemble import SigmaNormEnsemble
from ..signorm.optim import signorm_param_groups
from ..utils import _compat
from ..utils.checks import check_fraction, check_positive_number
from .arguments import agree_with_model, check_objects, saved_hyperparameters
from .grouping_loss import evaluate_grouping_loss
from .health_warnings import HealthWarnings
from .member_health import MemberHealth, diagnose, health_counts
from .numerics import check_finite_inputs, check_finite_losses
from .optimizer_groups import routine_optimizer, warn_shared_scale_group

__all__ = ["SigmaNormClassificationRoutine"]

#: Per-input diversity of the members' outputs, logged as ``{val,test}/div/<name>``. The
#: mutual information is TorchUncertainty's (``test/ens_MI``), not repeated here.
_OUTPUT_MEASURES = {"jensen_gap": jensen_gap, "geometric_ambiguity": geometric_ambiguity}


class SigmaNormClassificationRoutine(ClassificationRoutine):
    r"""Classification with a σNorm-Ensemble: task loss plus :math:`\lambda \mathcal{L}_{div}`.

    Keeps every argument and metric of TorchUncertainty's
    :class:`~torch_uncertainty.routines.ClassificationRoutine` and adds:

    - training: ``train_loss`` stays the task loss; ``train/diversity_loss`` (the
      regularizer :math:`\lambda \mathcal{L}_{div}`, with τ and λ set on the model),
      ``train/total_loss`` (what is optimised), ``train/signorm_cos`` (all layers),
      ``train/signorm_cos_regularized`` and ``train/tau``, every ``log_every_n_steps``
      (from the weights alone: no extra forward); σNorm-cos on the progress bar, and with
      ``target_diversity`` τ and the regularized layers' σNorm-cos (the one the target is
      about) too;
    - a warning, at a validation during ``fit`` and when ``fit`` ends, while the regularized
      layers' σNorm-cos is still >=
      :data:`~torch_uncertainty_signorm.callbacks.identical_members.IDENTICAL_MEMBERS_COSINE`
      (the members are one model), naming the value, τ, λ, the steps run and the remedies
      (:class:`~torch_uncertainty_signorm.callbacks.identical_members.IdenticalMembersWarning`,
      from :meth:`configure_callbacks`);
    - ``target_diversity``: τ adjusted every optimisation step so that the regularized
      layers' σNorm-cos settles at the target
      (:class:`~torch_uncertainty_signorm.signorm.diversity_target.DiversityTarget`, run by
      :class:`~torch_uncertainty_signorm.callbacks.tau_control.DiversityTargetCallback`
      from :meth:`configure_callbacks`); its state is saved in checkpoints (τ once, as
      ``signorm_tau``), and a run ending away from the target says so, once, with the reason.
      A ``test`` reads the checkpoint it is given: after ``fit``, the command's
      ``eval_after_fit`` tests the one best by validation accuracy, which may be saved before
      the target is reached; a test of weights away from the target warns, naming it. When the
      ensemble's validation accuracy is
      :data:`~torch_uncertainty_signorm.signorm.diversity_target.ACCURACY_DROP` below its best
      at two validations in a row, the controller stops strengthening the push and warns what
      the target costs at this budget, instead of trading the accuracy away silently (never
      holding τ at its upper bound, where the push is off);
    - validation and test: ``{val,test}/div/signorm_cos`` (all layers),
      ``.../signorm_cos_regularized``, ``.../jensen_gap`` and ``.../geometric_ambiguity``
      on the in-distribution set (the mutual information, i.e. the modulation uncertainty,
      is TorchUncertainty's ``test/ens_MI``), logged as metrics;
    - member health (:mod:`~torch_uncertainty_signorm.routines.member_health`), from the same logits
      on the in-distribution set: ``{val,test}/health/{one_class,constant_output,
      chance_accuracy,non_finite}`` (0/1, the ensemble) and ``.../health/dead_members`` (members
      with a constant output or chance accuracy), and a one-line warning per condition and
      member, once per run, with what to try: during ``fit`` when found at two validations in
      a row or at the last one (the first epoch's transients stay silent), and after testing
      (:class:`~torch_uncertainty_signorm.routines.health_warnings.HealthWarnings`);
    - test: each member's ``test/member_{m}/Acc`` (a fraction) and ``test/member_{m}/NLL``,
      logged with the health counts;
    - :meth:`optimizer_param_groups`: the σNorm scale logits in their own group at
      ``scale_lr_multiplier`` × the learning rate with no weight decay, and every per-member
      parameter at ``member_lr_multiplier`` × its rate, whatever builds the optimizer: the
      ``torch-uncertainty`` command builds the recipe's ``optimizer:`` from these groups, and
      an ``optim_recipe`` given in Python (TorchUncertainty's, one of
      :mod:`torch_uncertainty_signorm.optim_recipes`,
      :func:`~torch_uncertainty_signorm.signorm.optim.signorm_optim_recipe`, a user's own such
      as ``lambda m: torch.optim.SGD(m.parameters(), lr=0.05)``) is built on them, called
      twice (:func:`~torch_uncertainty_signorm.routines.optimizer_groups.routine_optimizer`).
      The multipliers are set here and nowhere else.

    The test values above are logged (``self.log``): ``trainer.test`` returns them and a
    Lightning ``Trainer`` prints them (TorchUncertainty's ``TUTrainer`` prints its own
    categories). The ``results.csv`` row (``save_to_csv``) is TorchUncertainty's, written by it
    as for its own routines; the ``torch-uncertainty`` command (``signorm-lab``) prints these
    values in tables of their own and adds them to that row.

    The routine saves as hyper-parameters the arguments that are data: a routine built in
    Python saves neither ``model`` nor ``loss``, so
    ``load_from_checkpoint(path, model=..., loss=...)`` takes them again; the command saves its
    ``routine:`` block, whose ``model:`` is a ``class_path`` block (``signorm_lab``'s
    ``load_routine(path)`` builds it through the lab's allow-list). A checkpoint never makes
    Lightning import a class it names (:meth:`load_from_checkpoint`).

    Args:
        model: The :class:`~torch_uncertainty_signorm.SigmaNormEnsemble` to train.
        num_classes: Number of classes; defaults to the model's heads', must match them.
        loss: The task loss, e.g. :class:`torch.nn.CrossEntropyLoss`.
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
        target_diversity: σNorm-cos of the regularized layers to reach and hold by adjusting
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
            both unset, so the model's ``num_estimators`` alone sets M. ``optim_recipe`` is a
            callable building the optimizer on ``model.parameters()`` (a built optimizer
            cannot take the routine's groups, and is refused).
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
        arguments = {
            "model": model,
            "num_classes": num_classes,
            "loss": loss,
            "scale_lr_multiplier": scale_lr_multiplier,
            "member_lr_multiplier": member_lr_multiplier,
            "target_diversity": target_diversity,
            "warn_identical_members": warn_identical_members,
            "check_finite_loss": check_finite_loss,
            **kwargs,
        }
        eval_grouping_loss = kwargs.pop("eval_grouping_loss", False)
        check_objects(model=model, loss=loss, format_batch_fn=kwargs.get("format_batch_fn"))
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
            check_controlled_tau(model.tau)  # refused now, not clamped at the first step
        if not isinstance(warn_identical_members, bool):
            raise ValueError(
                f"warn_identical_members must be True or False, got {warn_identical_members!r}."
            )
        num_classes = agree_with_model(model, num_classes, kwargs)
        optim_recipe = kwargs.pop("optim_recipe", None)  # built below, with the multipliers
        super().__init__(model, num_classes, loss, **kwargs)
        self.save_hyperparameters(saved_hyperparameters(type(self), arguments))
        self.scale_lr_multiplier = (
            None if scale_lr_multiplier is None else float(scale_lr_multiplier)
        )
        self.member_lr_multiplier = float(member_lr_multiplier)
        self.optim_recipe = routine_optimizer(self, optim_recipe)
        self.check_finite_loss = bool(check_finite_loss)
        self.target_diversity = target_diversity
        self.warn_identical_members = warn_identical_members
        self.target_callback = (
            None
            if target_diversity is None
            else DiversityTargetCallback(target_diversity, warn_identical_members)
        )
        self.identical_members_callback = (
            IdenticalMembersWarning(self.target_callback) if warn_identical_members else None
        )
        measures = MetricCollection({name: MeanMetric() for name in _OUTPUT_MEASURES})
        self.val_diversity = measures.clone(prefix="val/div/")
        self.test_diversity = measures.clone(prefix="test/div/")
        classes = 2 if self.binary_cls else num_classes
        self.val_health = MemberHealth(model.num_estimators, classes)
        self.test_health = MemberHealth(model.num_estimators, classes)
        self.health_warnings = HealthWarnings()
        self.logits_tap = LogitsTap(type(self).__name__)
        self.logits_tap.attach(self)
        if eval_grouping_loss:
            evaluate_grouping_loss(self)

    @classmethod
    def load_from_checkpoint(cls, checkpoint_path, *args, weights_only: bool = True, **kwargs):
        """As Lightning's (``weights_only`` by default), always through ``__init__``: a
        checkpoint's ``_instantiator`` is ignored, since Lightning's would let jsonargparse
        import the class paths the checkpoint names. A ``model`` (``loss``,
        ``format_batch_fn``) saved as a ``class_path`` block must be given as an object,
        ``load_from_checkpoint(path, model=...)``, or built by ``signorm_lab``'s
        ``load_routine(path)``; the block alone is refused, naming it."""
        return super().load_from_checkpoint(
            checkpoint_path,
            *args,
            weights_only=weights_only,
            **{_compat.INSTANTIATOR_KEY: None},
            **kwargs,
        )

    @property
    def diversity_target(self) -> DiversityTarget | None:
        """The τ controller of the current ``fit`` under ``target_diversity``, else ``None``."""
        return None if self.target_callback is None else self.target_callback.controller

    def configure_callbacks(self) -> list[Callback]:
        """The τ controller (``target_diversity``) and the identical-members warning
        (``warn_identical_members``), as callbacks: they act through Lightning's hooks. Those
        the trainer holds already (a ``test`` after ``fit``) are not returned again, which
        Lightning would announce as overriding them."""
        attached = self._trainer.callbacks if self._trainer is not None else []
        return [
            c
            for c in (self.target_callback, self.identical_members_callback)
            if c is not None and c not in attached
        ]

    def optimizer_param_groups(
        self, lr: float, weight_decay: float | None = None, adaptive: bool = False
    ) -> list[dict]:
        """Every parameter at ``lr``; the σNorm scale logits at ``lr * scale_lr_multiplier``
        (unset: :func:`~torch_uncertainty_signorm.signorm.optim.scale_rate`, lower for an
        ``adaptive``
        optimiser such as Adam) without weight decay;
        per-member parameters at ``member_lr_multiplier`` × their rate, the heads with
        ``weight_decay / member_lr_multiplier`` (the optimizer's weight decay and kind, which
        the ``torch-uncertainty`` command passes)."""
        return signorm_param_groups(
            self,
            lr,
            self.scale_lr_multiplier,
            self.member_lr_multiplier,
            weight_decay,
            adaptive=adaptive,
        )

    def on_fit_start(self) -> None:
        super().on_fit_start()
        self.health_warnings.start_fit()

    def on_train_start(self) -> None:
        super().on_train_start()
        warn_shared_scale_group(self.model, self.trainer.optimizers)

    def training_step(self, batch: tuple[Tensor, Tensor]) -> Tensor:
        task_loss = super().training_step(batch)
        with torch.no_grad():
            cosine = signorm_cosine(self.model.importances())
            cosine_regularized = signorm_cosine(self.model.importances(regularized_only=True))
        diversity_loss = self.model.diversity_loss()
        if self.check_finite_loss:
            check_finite_losses(
                self.global_step, task_loss=task_loss, diversity_loss=diversity_loss
            )
        loss = task_loss + diversity_loss
        self.log("train/diversity_loss", diversity_loss, logger=True)
        self.log("train/total_loss", loss, logger=True)
        self.log("train/signorm_cos", cosine, prog_bar=True)
        self.log(
            "train/signorm_cos_regularized",
            cosine_regularized,
            prog_bar=self.target_callback is not None,
        )  # what the target is about
        self.log("train/tau", self.model.tau, prog_bar=self.target_callback is not None)
        return loss

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """τ under one key, ``signorm_tau`` (the penalty's, wherever the controller moved it),
        and the τ controller's other state (here, to be in weights-only checkpoints too)."""
        super().on_save_checkpoint(checkpoint)
        if self.target_callback is not None:
            self.target_callback.save_state(checkpoint)
        checkpoint[CHECKPOINT_TAU] = self.model.tau

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """The checkpoint's τ back into the model (:func:`~torch_uncertainty_signorm.signorm.
        checkpoint_tau.checkpoint_tau`): what ``fit --ckpt_path`` resumes from (the controller
        reads it there), ``test`` evaluates and ``load_from_checkpoint`` returns."""
        super().on_load_checkpoint(checkpoint)
        if self.target_callback is not None:  # here, for load_from_checkpoint too
            self.target_callback.load_state(checkpoint)
        # the τ the run had reached, checked against this run's configuration
        controlled = self.target_callback is not None
        if (tau := checkpoint_tau(checkpoint, self.model.tau, controlled=controlled)) is not None:
            self.model.set_tau(tau)

    def on_train_end(self) -> None:
        super().on_train_end()
        self.health_warnings.end_fit()

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
        just ended; with ``warn``, its conditions go to :attr:`health_warnings`."""
        if health.update_count == 0:
            return {}
        stats = health.compute()
        health.reset()
        conditions = diagnose(stats)
        if warn and stage == "val":
            self.health_warnings.validated(conditions, self.global_step)
        elif warn:
            self.health_warnings.tested(conditions, self.global_step)
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
        results |= self._health_results(self.val_health, "val", warn=fitting)
        self.log_dict(results, sync_dist=True)

    def on_test_epoch_end(self) -> None:
        results = self._diversity_results(self.test_diversity, "test")
        results |= self._health_results(self.test_health, "test", warn=True)
        super().on_test_epoch_end()
        self.log_dict(results, sync_dist=True)
