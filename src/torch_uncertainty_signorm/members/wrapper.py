"""The base of the member wrappers (σN-Ens, FiLM-Ensemble, LoRA-Ensemble): one backbone pass
over all members.

Members split off at ``expand_at``: a forward pre-hook repeats that module's input M times, so
the work before it runs once per input (``"input"`` repeats the inputs). From there to the
member heads the rows are *batch-major*, row ``b·M + m`` being sample ``b`` of member ``m``:
then the activations ``(B·M, C, ...)`` are a contiguous ``(B, M·C, ...)`` tensor, which lets
every per-member normalization run as one native kernel (``layers.member_statistics``). The
wrappers' ``forward`` still returns TorchUncertainty's member-major logits ``(M·B, C)``, and
``forward_features`` member-major ``(M·B, D)``: one reorder at the very end.

Every wrapper also speaks TorchUncertainty's feature protocol (``feats_forward`` then
``linear``, what ``ClassificationRoutine(eval_grouping_loss=True)`` calls) and gives each
member alone as a plain model (:meth:`MemberWrapper.member_model`, a :class:`MemberModel`).
This module also holds what the three wrappers share to find and replace a classifier.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from ..utils import _compat
from ..utils.checks import check_integer
from .config import MethodConfig
from .replace import replace_modules

__all__ = [
    "MemberModel",
    "MemberWrapper",
    "auto_expansion_point",
    "batch_major_members",
    "classifier_module",
    "classifier_placement",
    "find_classifier",
    "member_major",
    "pooled_output",
    "remove_classifier",
    "remove_member_expansion",
]

#: Classifier attribute names tried, in order, when ``head`` is not given
#: (``model.classifier``: a transformers model inside ``models.backbones.SequenceClassifier``).
HEAD_NAMES = ("linear", "fc", "classifier", "head", "score", "model.classifier")
#: Most members a wrapper builds: every batch passes M times through the backbone, so a larger M
#: is a typo or a crafted file, and building it alone takes minutes.
MAX_NUM_ESTIMATORS = 1024


def check_member_count(name: str, value: Any) -> int:
    """``value`` as an int if it is a member count in ``1..MAX_NUM_ESTIMATORS``, else ValueError
    naming ``name``, the value and the range."""
    count = check_integer(name, value)
    if count > MAX_NUM_ESTIMATORS:
        raise ValueError(
            f"{name}={count} is more members than {MAX_NUM_ESTIMATORS} "
            f"(MAX_NUM_ESTIMATORS): each batch passes M times through the backbone; "
            f"use 1..{MAX_NUM_ESTIMATORS}."
        )
    return count


def batch_major_members(inputs: Any, num_estimators: int) -> Any:
    """Repeat a ``(B, ...)`` tensor, or every tensor of a mapping, into batch-major
    ``(B·M, ...)`` rows: row ``b·M + m`` is sample ``b`` for member ``m``."""
    if isinstance(inputs, Tensor):
        return inputs.repeat_interleave(num_estimators, dim=0)
    if isinstance(inputs, Mapping):
        return {k: batch_major_members(v, num_estimators) for k, v in inputs.items()}
    return inputs


def member_major(rows: Tensor, num_estimators: int) -> Tensor:
    """Batch-major rows ``(B·M, ...)`` in TorchUncertainty's member-major order ``(M·B, ...)``."""
    return rows.unflatten(0, (-1, num_estimators)).transpose(0, 1).flatten(0, 1)


def batch_size_of(inputs: Any, wrapper: str) -> int:
    """Rows of a tensor input, or of the first tensor of a mapping (a tokenizer's output)."""
    if isinstance(inputs, Tensor):
        return inputs.shape[0]
    if isinstance(inputs, Mapping):
        for value in inputs.values():
            if isinstance(value, Tensor):
                return value.shape[0]
    raise TypeError(
        f"{wrapper} takes a tensor or a mapping of tensors (as tokenizers return), "
        f"got {type(inputs).__name__}."
    )


def find_classifier(model: nn.Module, head: str | None) -> tuple[str | None, int, int]:
    """Locate the classifier to replace: ``(name or None for timm, in_features, classes)``."""
    if head is None and hasattr(model, "reset_classifier") and hasattr(model, "num_features"):
        in_features = getattr(model, "head_hidden_size", model.num_features)
        return None, in_features, model.num_classes  # timm: the model drops its own head
    names = (head,) if head is not None else HEAD_NAMES
    for name in names:
        try:
            classifier = model.get_submodule(name)
        except AttributeError:
            continue
        if isinstance(classifier, nn.Linear):
            return name, classifier.in_features, classifier.out_features
    tried = f"head={head!r}" if head is not None else f"any of {', '.join(HEAD_NAMES)}"
    raise ValueError(
        f"Cannot find the classifier of {type(model).__name__}: {tried} is not an nn.Linear "
        f"submodule. Pass head='<name of the final nn.Linear>'."
    )


def classifier_module(model: nn.Module, name: str | None) -> nn.Module:
    """The classifier that :func:`find_classifier` named (``None``: a timm model's own)."""
    return model.get_classifier() if name is None else model.get_submodule(name)


def classifier_placement(model: nn.Module, name: str | None) -> dict:
    """Device and dtype of the classifier :func:`find_classifier` named (else the backbone's
    first weight), for the member heads that replace it."""
    weight = getattr(classifier_module(model, name), "weight", None)
    if not isinstance(weight, Tensor):
        weight = next(model.parameters(), None)
    return {} if weight is None else {"device": weight.device, "dtype": weight.dtype}


def remove_classifier(model: nn.Module, name: str | None) -> None:
    """Replace the classifier by an identity so that the backbone returns its features."""
    if name is None:
        model.reset_classifier(0)
        return
    model.set_submodule(name, nn.Identity())


def pooled_output(output: Any) -> Any:
    """The tensor of a backbone output (tensor, HF ModelOutput or tuple)."""
    if hasattr(output, "logits"):
        return output.logits
    if isinstance(output, (tuple, list)):
        return output[0]
    return output


def auto_expansion_point(model: nn.Module, layer_names: Sequence[str]) -> str:
    """Where the members can be split off without a residual mixing shapes.

    ResNet stems (TorchUncertainty, torchvision) feed the stem convolution into ``bn1``
    only; a timm ViT's patch and position embeddings feed ``blocks`` only. Anything else
    expands at the input.
    """
    first = layer_names[0]
    if first == "bn1" and isinstance(getattr(model, "conv1", None), nn.Conv2d):
        return "bn1"
    if (
        first.startswith("blocks.")
        and hasattr(model, "patch_embed")
        and isinstance(getattr(model, "blocks", None), nn.Sequential)
    ):
        return "blocks"
    return "input"


def _first_convolution_dims(model: nn.Module) -> int | None:
    """Dimensions of a batch for the first convolution (4 for Conv2d), if the model has one."""
    for module in model.modules():
        if isinstance(module, _compat.CONVOLUTIONS):
            return len(module.kernel_size) + 2
    return None


def remove_member_expansion(backbone: nn.Module) -> None:
    """Remove, in place, the hooks repeating inputs M times from a (copied) wrapper backbone,
    so that it runs one member: what :meth:`MemberWrapper.member_model` builds on."""
    for module in backbone.modules():
        hooks = _compat.forward_pre_hooks(module)
        for key, hook in list(hooks.items()):
            if getattr(hook, "__func__", None) is MemberWrapper._expand_first_argument:
                del hooks[key]


class MemberModel(nn.Module):
    """One member of a member wrapper as a plain model: the backbone, then the member's head.

    Built by :meth:`MemberWrapper.member_model`; holds only ordinary layers, so it runs, trains
    and exports (ONNX, TorchScript) like the single model it came from.
    """

    def __init__(self, backbone: nn.Module, head: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head

    def forward(self, inputs: Tensor | Mapping[str, Tensor]) -> Tensor:
        """Logits ``(B, C)`` from inputs ``(B, ...)`` (or a tokenizer's mapping)."""
        output = self.backbone(**inputs) if isinstance(inputs, Mapping) else self.backbone(inputs)
        return self.head(pooled_output(output))


class MemberWrapper(nn.Module):
    """Base of the member wrappers: M members in one backbone pass over batch-major rows.

    A subclass calls ``super().__init__(num_estimators, config)`` (M validated here, the
    method's settings kept as :attr:`config`), resolves its expansion point with
    :meth:`expansion_point` *before* modifying the model, then hands the modified model to
    :meth:`set_backbone` with the names of its per-member layers (:meth:`member_layers`).
    :meth:`backbone_rows` then returns the backbone's batch-major output, checked.

    The members' heads read the backbone's batch-major features: by default ``self.heads``
    (σN-Ens, LoRA-Ensemble: per-member heads with ``to_plain``), which :meth:`forward` runs; a
    wrapper whose classifier is elsewhere overrides :meth:`forward`, :meth:`head_module`,
    :meth:`head_logits` and :meth:`plain_head`.

    Args:
        num_estimators: Number of members M, an integer >= 1.
        config: The method's settings (its
            :class:`~torch_uncertainty_signorm.members.config.MethodConfig`), which the routine
            and exports read back.
    """

    def __init__(self, num_estimators: int, config: MethodConfig | None = None) -> None:
        super().__init__()
        self.num_estimators = check_member_count("num_estimators", num_estimators)
        self.config = config

    @staticmethod
    def expansion_point(model: nn.Module, expand_at: str, layer_names: Sequence[str]) -> str:
        """``expand_at`` resolved (``"auto"``) and checked to name a module of ``model``."""
        if expand_at == "auto":
            return auto_expansion_point(model, layer_names)
        if expand_at != "input":
            try:
                model.get_submodule(expand_at)
            except AttributeError:
                raise ValueError(
                    f"expand_at={expand_at!r} is not a module of {type(model).__name__}; use "
                    f"'auto', 'input' or a module name such as {layer_names[0]!r}."
                ) from None
        return expand_at

    def set_backbone(self, model: nn.Module, expand_at: str, member_layers: Sequence[str]) -> None:
        """Hold ``model`` and expand the members at ``expand_at``.

        Args:
            model: The modified backbone.
            expand_at: A resolved expansion point (:meth:`expansion_point`).
            member_layers: Names of the per-member layers, which must all see the M·B rows
                (checked on the first call).
        """
        self.backbone = model
        self.expand_at = expand_at
        self.member_layer_names = list(member_layers)
        self._batch_dims = _first_convolution_dims(model)
        self._takes_token_ids = any(isinstance(m, nn.Embedding) for m in model.modules())
        self._rows_checked = False
        if expand_at != "input":
            model.get_submodule(expand_at).register_forward_pre_hook(self._expand_first_argument)

    def _expand_first_argument(self, module: nn.Module, args: tuple) -> tuple:
        return (batch_major_members(args[0], self.num_estimators), *args[1:])

    def check_inputs(self, inputs: Any) -> int:
        """The batch size B of ``inputs``, after checking them.

        Raises:
            TypeError: Neither a tensor nor a mapping, or integer images.
            ValueError: An input without its batch dimension.
        """
        wrapper = type(self).__name__
        batch_size = batch_size_of(inputs, wrapper)
        if not isinstance(inputs, Tensor):
            return batch_size
        if not (inputs.is_floating_point() or inputs.is_complex() or self._takes_token_ids):
            raise TypeError(
                f"{wrapper} takes floating-point inputs, got dtype {inputs.dtype} (shape "
                f"{tuple(inputs.shape)}): convert images to float first, e.g. with "
                f"torchvision.transforms.v2.ToDtype(torch.float32, scale=True) as "
                f"TorchUncertainty's datamodules do."
            )
        unbatched = self._batch_dims is not None and inputs.dim() == self._batch_dims - 1
        if inputs.dim() == 0 or unbatched:
            raise ValueError(
                f"{wrapper} takes inputs with a batch dimension (B, ...), got shape "
                f"{tuple(inputs.shape)}: add one, e.g. inputs.unsqueeze(0)."
            )
        return batch_size

    def backbone_rows(self, inputs: Any, what: str = "pooled features") -> Tensor:
        """The backbone's batch-major output ``(B·M, D)`` from ``(B, ...)`` inputs.

        Args:
            inputs: A tensor or a tokenizer's mapping.
            what: What the output should be, for the error message.

        Raises:
            RuntimeError: On the first call, if a member layer runs before the expansion.
            ValueError: If the output is not ``(B·M, D)``.
        """
        batch_size = self.check_inputs(inputs)
        expected = self.num_estimators * batch_size
        if self.expand_at == "input":
            inputs = batch_major_members(inputs, self.num_estimators)
        output = pooled_output(
            self._call_checking_rows(inputs, expected)
            if not self._rows_checked
            else self._call(inputs)
        )
        if not isinstance(output, Tensor) or output.dim() != 2 or output.shape[0] != expected:
            shape = tuple(output.shape) if isinstance(output, Tensor) else type(output)
            raise ValueError(
                f"The backbone {type(self.backbone).__name__} returned {shape}; expected "
                f"{what} of shape ({expected}, D). Pass head= the final nn.Linear so that "
                f"what precedes it is pooled, or use expand_at='input'."
            )
        return output

    def _call(self, inputs: Any) -> Any:
        return self.backbone(**inputs) if isinstance(inputs, Mapping) else self.backbone(inputs)

    def _call_checking_rows(self, inputs: Any, expected: int) -> Any:
        """First call: every member layer must see all M·B rows, or expand_at is wrong."""

        def check(name: str, args: tuple) -> None:
            rows = args[0].shape[0]
            if rows != expected:
                raise RuntimeError(
                    f"Member layer {name!r} received {rows} rows, expected M·B = {expected}: "
                    f"expand_at={self.expand_at!r} splits the members off after this layer "
                    f"runs. Use expand_at='input'."
                )

        handles = [
            self.backbone.get_submodule(name).register_forward_pre_hook(
                lambda module, args, name=name: check(name, args)
            )
            for name in self.member_layer_names
        ]
        try:
            output = self._call(inputs)
        finally:
            for handle in handles:
                handle.remove()
        self._rows_checked = True
        return output

    def member_layers(self, names: Sequence[str] | None = None) -> dict[str, nn.Module]:
        """The backbone's per-member layers by name: those named ``names``, else all of them."""
        names = self.member_layer_names if names is None else names
        return {name: self.backbone.get_submodule(name) for name in names}

    def forward(self, inputs: Tensor | Mapping[str, Tensor]) -> Tensor:
        """Member-major logits ``(M·B, C)`` from ``(B, ...)`` inputs: the heads
        (:meth:`head_logits`) read the backbone's batch-major features."""
        return self.head_logits(self.backbone_rows(inputs))

    def head_module(self) -> nn.Module:
        """The module reading the members' batch-major features ``(B·M, D)``."""
        return self.heads

    def head_logits(self, rows: Tensor) -> Tensor:
        """Member-major logits ``(M·B, C)`` from the batch-major features ``(B·M, D)``."""
        return self.heads(rows)

    def plain_head(self, member: int) -> nn.Module:
        """Member ``member``'s head as plain layers, the end of :meth:`member_model`."""
        return self.heads.to_plain(member)

    def feats_forward(self, inputs: Tensor | Mapping[str, Tensor]) -> Tensor:
        """TorchUncertainty's feature protocol: each input's members' features side by side.

        Returns ``(B, M·D)``, one row per input (the layout of TorchUncertainty's Packed
        Ensembles), which :meth:`linear` turns into the logits; TorchUncertainty's
        ``GroupingLoss`` groups inputs on these rows. The whole forward runs, so forward hooks
        on the model (logits readers such as ``callbacks.logits_tap.LogitsTap``) see the
        logits as they do without features; the features are what :meth:`head_module` reads.
        """
        rows: list[Tensor] = []
        handle = self.head_module().register_forward_pre_hook(
            lambda module, args: rows.append(args[0])
        )
        try:
            self(inputs)
        finally:
            handle.remove()
        return torch.cat(rows).reshape(-1, self.num_estimators * rows[0].shape[-1])

    def linear(self, features: Tensor) -> Tensor:
        """Member-major logits ``(M·B, C)`` from :meth:`feats_forward`'s ``(B, M·D)`` features
        (TorchUncertainty's feature protocol); equal to the model's output on the inputs."""
        return self.head_logits(features.reshape(-1, features.shape[-1] // self.num_estimators))

    def member_model(self, member: int) -> MemberModel:
        """Member ``member`` alone as a :class:`MemberModel` of plain layers: its rows of this
        ensemble's output.

        A copy of the backbone without the member expansion, in which every per-member layer
        is folded into its plain counterpart (``to_plain``: σNorm into the norm it came from,
        FiLM's BatchNorm into BatchNorm, LoRA adapters merged into their projection), then the
        member's head (:meth:`plain_head`). In the wrapper's training mode.

        Raises:
            ValueError: If ``member`` is not in ``0..M-1``.
        """
        check_integer("member", member, low=0, high=self.num_estimators - 1)
        backbone = copy.deepcopy(self.backbone)
        remove_member_expansion(backbone)  # one member: no repeat of the inputs
        replace_modules(backbone, self.member_layer_names, lambda layer: layer.to_plain(member))
        return MemberModel(backbone, self.plain_head(member)).train(self.training)
