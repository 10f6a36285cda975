"""Pretrained transformer backbones by name, usable as YAML ``class_path``: timm ViTs, BERT.

Both factories load pretrained weights by name on a machine with internet access
(timm's and Hugging Face's hubs) and from a local copy otherwise, through one argument,
``pretrained_path``:

* :func:`timm_vit` — a timm model name (``vit_base_patch16_224.orig_in21k``,
  ``vit_base_patch16_224.augreg_in21k``); ``pretrained_path`` is a weights *file*
  (``.safetensors``, ``.bin``, ``.pth``, ``.npz``) loaded through timm's own pretrained
  loader (``pretrained_cfg_overlay=dict(file=...)``), which adapts the classifier to
  ``num_classes`` as a download would.
* :func:`bert_classifier` — a Hugging Face model id (``bert-base-uncased``);
  ``pretrained_path`` is a *directory* written by ``save_pretrained`` or a downloaded
  snapshot (``from_pretrained(directory)``).

Dropout is 0 in both (the paper trains every transformer without dropout).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from torch import Tensor, nn

__all__ = ["SequenceClassifier", "bert_classifier", "timm_vit"]


def _check_num_classes(num_classes: int) -> None:
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"num_classes must be an integer >= 1, got {num_classes!r}.")


def timm_vit(
    model_name: str = "vit_base_patch16_224.augreg_in21k",
    num_classes: int = 1000,
    *,
    pretrained: bool = True,
    pretrained_path: str | Path | None = None,
    img_size: int | None = None,
) -> nn.Module:
    """A timm model by name with a fresh ``num_classes`` classifier and no dropout.

    The classifier is always re-initialised (``reset_classifier``), so ensemble members built
    one after the other from the same weights get different heads.

    Args:
        model_name: A timm model name, with or without pretrained tag
            (``vit_base_patch16_224.orig_in21k``).
        num_classes: Classes of the new classifier.
        pretrained: Load the pretrained weights of ``model_name`` (downloaded by timm
            unless ``pretrained_path`` is given); ``False`` builds a random initialisation.
        pretrained_path: A local weights file used instead of the download (offline
            machines); implies ``pretrained``.
        img_size: Input resolution, if not the model's default (position embeddings are
            resampled when pretrained weights are loaded).

    Raises:
        ValueError: If ``model_name`` is not a timm model, or ``num_classes`` is invalid.
        FileNotFoundError: If ``pretrained_path`` is not an existing file.

    Example:
        >>> model = timm_vit("vit_base_patch16_224.orig_in21k", num_classes=100,
        ...                  pretrained_path="weights/vit_b16_orig_in21k.safetensors")
    """
    import timm

    _check_num_classes(num_classes)
    architecture = model_name.split(".", 1)[0] if isinstance(model_name, str) else None
    if architecture is None or not timm.is_model(architecture):
        raise ValueError(
            f"model_name={model_name!r} is not a timm model; use a name listed by "
            f"timm.list_models(), e.g. 'vit_base_patch16_224.augreg_in21k'."
        )
    kwargs: dict = {"num_classes": num_classes, "drop_rate": 0.0, "drop_path_rate": 0.0}
    if img_size is not None:
        kwargs["img_size"] = img_size
    if pretrained_path is not None:
        path = Path(pretrained_path)
        if not path.is_file():
            raise FileNotFoundError(
                f"pretrained_path='{path}' is not a file; timm loads a weights file "
                f"(.safetensors, .bin, .pth or .npz) saved from {model_name!r}."
            )
        kwargs["pretrained_cfg_overlay"] = {"file": str(path)}
        pretrained = True
    model = timm.create_model(model_name, pretrained=pretrained, **kwargs)
    model.reset_classifier(num_classes)  # fresh even if the weights file held a head of this size
    return model


class SequenceClassifier(nn.Module):
    """A Hugging Face sequence classifier that takes the tokenizer's mapping and returns logits.

    TorchUncertainty's routines and wrappers (``deep_ensembles``) call ``model(inputs)`` with
    one positional argument, and transformers models take the tokenizer's outputs as keyword
    arguments and return a ``ModelOutput``; this wrapper accepts both conventions and returns
    the logits tensor, so every method sees the same inputs and outputs.

    Args:
        model: A transformers ``...ForSequenceClassification`` model (kept as ``.model``;
            its classifier is ``model.classifier`` for BERT).
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, inputs: Mapping[str, Tensor] | Tensor | None = None, /, **encoding: Tensor
    ) -> Tensor:
        """Logits ``(B, C)`` from a tokenizer mapping, ``input_ids``, or keyword tensors."""
        if isinstance(inputs, Mapping):
            encoding = {**inputs, **encoding}
        elif isinstance(inputs, Tensor):
            encoding = {"input_ids": inputs, **encoding}
        elif inputs is not None:
            raise TypeError(
                f"SequenceClassifier takes the tokenizer's mapping (input_ids, attention_mask, "
                f"...) or an input_ids tensor, got {type(inputs).__name__}."
            )
        return self.model(**encoding).logits


def bert_classifier(
    model_name: str = "bert-base-uncased",
    num_classes: int = 2,
    *,
    pretrained: bool = True,
    pretrained_path: str | Path | None = None,
) -> SequenceClassifier:
    """A Hugging Face sequence classifier (BERT) by name with a fresh classifier, no dropout.

    The classifier is always re-initialised (transformers' BERT init: normal weights of
    standard deviation ``initializer_range``, zero bias), even when the checkpoint holds one,
    so ensemble members built one after the other from the same weights get different heads.

    Args:
        model_name: A Hugging Face model id such as ``bert-base-uncased``.
        num_classes: Classes (``num_labels``) of the new classifier.
        pretrained: Load the pretrained encoder (``from_pretrained``); ``False`` builds a
            random initialisation from the model's configuration.
        pretrained_path: A local directory (``save_pretrained`` output or downloaded
            snapshot) read instead of the hub, for offline machines.

    Raises:
        FileNotFoundError: If ``pretrained_path`` is not an existing directory.
        ValueError: If ``model_name`` cannot be resolved, or ``num_classes`` is invalid.

    Example:
        >>> model = bert_classifier(pretrained_path="weights/bert-base-uncased")
        >>> model(tokenizer(["a fine film"], return_tensors="pt")).shape
        torch.Size([1, 2])
    """
    from transformers import AutoConfig, AutoModelForSequenceClassification

    _check_num_classes(num_classes)
    source = model_name
    if pretrained_path is not None:
        path = Path(pretrained_path)
        if not path.is_dir() or not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"pretrained_path='{path}' is not a model directory with a config.json; save "
                f"one with model.save_pretrained(path) or download a snapshot of {model_name!r}."
            )
        source = str(path)
    no_dropout = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    try:
        config = AutoConfig.from_pretrained(source, num_labels=num_classes, **no_dropout)
    except OSError as error:
        raise ValueError(
            f"model_name={source!r} could not be resolved ({error}). Pass a Hugging Face model "
            f"id such as 'bert-base-uncased' (needs internet) or pretrained_path=<local dir>."
        ) from error
    if pretrained:
        model = AutoModelForSequenceClassification.from_pretrained(
            source, config=config, ignore_mismatched_sizes=True
        )
    else:
        model = AutoModelForSequenceClassification.from_config(config)
    _reinitialize_linears(model.classifier, std=getattr(config, "initializer_range", 0.02))
    return SequenceClassifier(model)


def _reinitialize_linears(module: nn.Module, std: float) -> None:
    """Normal(0, std) weights and zero biases for every linear layer of ``module``."""
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            nn.init.normal_(layer.weight, std=std)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
