"""Backbones usable as YAML ``class_path``: pretrained timm ViTs and BERT, a narrow WideResNet-28.

:func:`wideresnet28` is TorchUncertainty's WideResNet-28-10 with the widen factor as an
argument, for trying the WideResNet recipes on a CPU (``widen_factor=1``); the transformer
factories are described below.

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
  snapshot (``from_pretrained(directory)``); ``config`` (the Hugging Face configuration as
  data, :func:`bert_config`) rebuilds the architecture with no directory or hub at all, as
  exports do.

Dropout is 0 in both (the paper trains every transformer without dropout). Hugging Face is
always called with ``trust_remote_code=False``: a model directory's own code never runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from torch_uncertainty_signorm.utils.checks import check_integer

from .. import _compat

__all__ = ["SequenceClassifier", "bert_classifier", "bert_config", "timm_vit", "wideresnet28"]

#: Dropout settings of the transformers configurations (the paper trains without dropout).
_NO_DROPOUT = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def wideresnet28(
    in_channels: int,
    num_classes: int,
    widen_factor: int = 10,
    conv_bias: bool = True,
    dropout_rate: float = 0.3,
    groups: int = 1,
    style: Any = "imagenet",
    activation_fn: Any = None,
    normalization_layer: type[nn.Module] = nn.BatchNorm2d,
) -> nn.Module:
    """TorchUncertainty's WideResNet-28 at any widen factor (10: its ``wideresnet28x10``).

    TorchUncertainty 0.13 builds WideResNet-28 only at widen factor 10 (36.5 M parameters; a
    σN-Ens of it trains at about 25 s per step of 8 images on 2 CPU cores). A recipe's backbone
    block switches to this factory by its ``class_path`` and keeps every other argument, so
    that the same recipe runs narrow on a laptop (``widen_factor=1``: same depth, blocks and
    normalization layers, 0.37 M parameters), see ``experiments/README.md``.

    Args:
        in_channels: Number of input channels.
        num_classes: Number of classes.
        widen_factor: Channel multiplier of the three stages (16, 32, 64 channels times it).
        conv_bias, dropout_rate, groups, style, activation_fn, normalization_layer: As in
            TorchUncertainty's ``wideresnet28x10`` (``activation_fn`` ``None``: its ReLU).

    Raises:
        ValueError: If ``widen_factor`` is not a positive integer.
    """
    from torch_uncertainty.models.classification import wideresnet28x10
    from torch_uncertainty.models.classification.resnet.utils import ResNetStyle

    check_integer("widen_factor", widen_factor)
    kwargs = {
        "conv_bias": conv_bias,
        "dropout_rate": dropout_rate,
        "groups": groups,
        "style": ResNetStyle(style.lower()) if isinstance(style, str) else style,
        "normalization_layer": normalization_layer,
    }
    if activation_fn is not None:
        kwargs["activation_fn"] = activation_fn
    if widen_factor == 10:
        return wideresnet28x10(in_channels, num_classes, **kwargs)
    wide_resnet = _compat.wide_resnet_class()  # wideresnet28x10's class, for other widen factors
    return wide_resnet(
        depth=28,
        widen_factor=widen_factor,
        in_channels=in_channels,
        num_classes=num_classes,
        **kwargs,
    )


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

    check_integer("num_classes", num_classes)
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
    config: Mapping[str, Any] | None = None,
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
        config: The model's Hugging Face configuration as data (:func:`bert_config`); builds
            a random initialisation from it alone, without hub or directory (exports store
            it). Requires ``pretrained=False`` and no ``pretrained_path``.

    Raises:
        FileNotFoundError: If ``pretrained_path`` is not an existing directory.
        ValueError: If ``model_name`` cannot be resolved, ``num_classes`` is invalid, or
            ``config`` comes with ``pretrained``/``pretrained_path`` or names remote code.

    Example:
        >>> model = bert_classifier(pretrained_path="weights/bert-base-uncased")
        >>> model(tokenizer(["a fine film"], return_tensors="pt")).shape
        torch.Size([1, 2])
    """
    from transformers import AutoModelForSequenceClassification

    check_integer("num_classes", num_classes)
    source = _config_source(model_name, pretrained_path)
    if config is None:
        hf_config = _resolve_config(source, num_classes)
    elif pretrained or pretrained_path is not None:
        raise ValueError(
            f"config builds a random initialisation: pass pretrained=False and no "
            f"pretrained_path (got pretrained={pretrained!r}, pretrained_path={pretrained_path!r})."
        )
    else:
        hf_config = _config_from_data(config, num_classes)
    if pretrained:
        model = _from_pretrained_quietly(AutoModelForSequenceClassification, source, hf_config)
    else:
        model = AutoModelForSequenceClassification.from_config(hf_config, trust_remote_code=False)
    _reinitialize_linears(model.classifier, std=getattr(hf_config, "initializer_range", 0.02))
    model.train()  # from_pretrained returns a model in evaluation mode; Lightning keeps modes
    return SequenceClassifier(model)


def _from_pretrained_quietly(auto_class: Any, source: Any, hf_config: Any) -> nn.Module:
    """``auto_class.from_pretrained`` without transformers' progress bar and multi-line load
    report (raw ANSI colour codes in a log file), which lists the classifier as missing: it is
    re-initialised here anyway. Weights missing elsewhere, which would start random, are named in
    one warning."""
    import warnings

    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # "Loading weights: 100%": a fraction of a second
    try:
        model, info = auto_class.from_pretrained(
            source,
            config=hf_config,
            ignore_mismatched_sizes=True,
            trust_remote_code=False,
            output_loading_info=True,
        )
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    missing = [
        str(key)
        for key in [
            *info.get("missing_keys", ()),
            *(k[0] if isinstance(k, tuple) else k for k in info.get("mismatched_keys", ())),
        ]
        if not str(key).startswith("classifier.")
    ]
    if missing:
        warnings.warn(
            f"{source}: {len(missing)} weights are not in the checkpoint (or have "
            f"another shape) and start random: {', '.join(sorted(missing)[:5])}"
            f"{', ...' if len(missing) > 5 else ''}; check the checkpoint matches "
            "the model name.",
            stacklevel=3,
        )
    return model


def bert_config(
    model_name: str = "bert-base-uncased",
    num_classes: int = 2,
    *,
    pretrained_path: str | Path | None = None,
) -> dict[str, Any]:
    """The Hugging Face configuration :func:`bert_classifier` builds, as JSON data.

    Read from ``pretrained_path`` or the hub (no weights). Exports store it, so that
    ``bert_classifier(config=..., pretrained=False)`` rebuilds the architecture offline.
    """
    check_integer("num_classes", num_classes)
    hf_config = _resolve_config(_config_source(model_name, pretrained_path), num_classes)
    data = json.loads(hf_config.to_json_string(use_diff=False))
    # where it was read from: not part of the architecture
    data.pop(_compat.HF_CONFIG_SOURCE_KEY, None)
    return data


def _config_source(model_name: str, pretrained_path: str | Path | None) -> str:
    """Where the model is read from: the local ``pretrained_path`` if given, else the hub id."""
    if pretrained_path is not None:
        path = Path(pretrained_path)
        if not path.is_dir() or not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"pretrained_path='{path}' is not a model directory with a config.json; save "
                f"one with model.save_pretrained(path) or download a snapshot of {model_name!r}."
            )
        return str(path)
    return model_name


def _resolve_config(source: str, num_classes: int):
    """``AutoConfig`` of ``source`` (hub id or local directory), without dropout."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(
            source, num_labels=num_classes, trust_remote_code=False, **_NO_DROPOUT
        )
    except OSError as error:
        raise ValueError(
            f"model_name={source!r} could not be resolved ({error}). Pass a Hugging Face model "
            f"id such as 'bert-base-uncased' (needs internet) or pretrained_path=<local dir>."
        ) from error


def _config_from_data(data: Mapping[str, Any], num_classes: int):
    """A transformers configuration from :func:`bert_config`'s data; never remote code."""
    from transformers import AutoConfig

    if not isinstance(data, Mapping) or "model_type" not in data:
        raise ValueError(
            f"config must be a mapping with a 'model_type' (bert_config()), got {data!r:.200}."
        )
    if "auto_map" in data:
        raise ValueError(
            f"config names remote code (auto_map={data['auto_map']!r}); only "
            f"transformers' own architectures are built."
        )
    try:
        hf_config = AutoConfig.for_model(**data)
    except ValueError as error:
        raise ValueError(
            f"config has model_type={data['model_type']!r}, which transformers "
            f"does not know ({error})."
        ) from None
    hf_config.num_labels = num_classes
    for key, value in _NO_DROPOUT.items():
        setattr(hf_config, key, value)
    return hf_config


def _reinitialize_linears(module: nn.Module, std: float) -> None:
    """Normal(0, std) weights and zero biases for every linear layer of ``module``."""
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            nn.init.normal_(layer.weight, std=std)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
