"""The models an export or a checkpoint may name, recorded in one place (as timm's
``register_model``).

With them, the σN-Ens settings object a model block may hold under ``config``
(:class:`~torch_uncertainty_signorm.SigmaNormConfig`: data only, role ``"config"``).

Each :class:`ModelEntry` records a model factory or class by its dotted class path (and the
other paths of the same object), and what the safety checks need to know about it:

* ``allow_listed``: a ``model:`` block read from a file (a checkpoint's hyper-parameters, a
  recipe given to the export command) may name it
  (:data:`signorm_lab.safety.allowlist.MODEL_CLASS_PATHS`); a recipe given to the
  export command is checked whole, every class path of it against
  :data:`signorm_lab.safety.allowlist.RECIPE_CLASS_PATHS` (these models and the
  recipes' routines, datamodules, optimisers, loggers and callbacks), before it is parsed;
* ``exportable``: an export's ``config.json`` may name it
  (:data:`signorm_lab.export.EXPORTABLE_CLASS_PATHS`);
* ``weight_sources``: its arguments that fetch weights or remote code, each with the value that
  builds the architecture alone (``None``: the argument is left out), which an export writes
  and loading requires; a checkpoint given to ``--ckpt_path`` never sets one of them, nor of
  :data:`FETCHING_ARGUMENTS`, where the recipe leaves it unset (only the recipe or the command
  line choose what a run reads or fetches);
* ``layout_flags``: arguments named like a weight source that only choose the parameter
  layout (σN-Ens's ``pretrained`` conversion flag);
* ``stored_argument``: an argument an export must carry because the factory would otherwise
  read it from a directory or the hub (a ``bert_classifier``'s Hugging Face ``config``);
* ``exported_as``: for a factory that loads weights and then builds another registered class
  (FineTune's ``finetune_ensemble``: a single model's checkpoint, then ``signorm_ensemble`` with
  ``pretrained=True``), that class's path and the arguments it is built with; an export writes
  it (the architecture alone) and never names the factory.

The trust rule these entries serve: the recipe given to ``torch-uncertainty`` and the command
line are the user's (trusted, as code); a checkpoint, an export's files and a recipe given to
the export command are data, which may name only the classes listed here (and the recipe
classes of :data:`signorm_lab.safety.allowlist.RECIPE_CLASS_PATHS`), checked before
anything is imported, and are read only as regular files (no pipe, device, or link leading out
of an export: a hard link is refused there too).

The baselines' wrappers are recorded too (neither allow-listed nor exportable: they are no
σNorm-Ensembles). Nothing here imports a model: the checks read class paths before anything
is imported. A caller trusting another class passes it as ``extra_class_paths``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "FETCHING_ARGUMENTS",
    "ModelEntry",
    "StoredArgument",
    "class_paths",
    "fetching_arguments",
    "model_entries",
    "model_entry",
]

Role = Literal["ensemble", "config", "backbone", "baseline"]

#: Arguments that fetch weights or files from elsewhere, whatever the class: an export's model
#: block never sets them (but an entry's ``layout_flags``), as its weights are its own.
FETCHING_ARGUMENTS = (
    "pretrained",
    "pretrained_path",
    "weights",
    "checkpoint",
    "checkpoint_path",
    "pretrained_cfg",
    "pretrained_cfg_overlay",
    "cache_dir",
)


@dataclass(frozen=True)
class StoredArgument:
    """An argument an export stores, computed when exporting by the function ``builder``
    (a dotted path) from the block's arguments ``sources``."""

    name: str
    builder: str
    sources: tuple[str, ...]
    #: What the argument holds, in error messages.
    description: str


@dataclass(frozen=True)
class ModelEntry:
    """One registered model factory or class (see the module docs)."""

    class_path: str
    role: Role
    aliases: tuple[str, ...] = ()
    allow_listed: bool = False
    exportable: bool = False
    weight_sources: Mapping[str, Any] = field(default_factory=dict)
    layout_flags: tuple[str, ...] = ()
    stored_argument: StoredArgument | None = None
    exported_as: tuple[str, Mapping[str, Any]] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "weight_sources", MappingProxyType(dict(self.weight_sources)))
        if self.exported_as is not None:
            path, arguments = self.exported_as
            object.__setattr__(self, "exported_as", (path, MappingProxyType(dict(arguments))))

    @property
    def class_paths(self) -> tuple[str, ...]:
        """Every dotted path of the object: the class path, then its aliases."""
        return (self.class_path, *self.aliases)


_ENTRIES: list[ModelEntry] = []
_BY_PATH: dict[str, ModelEntry] = {}


def _register(entry: ModelEntry) -> ModelEntry:
    for path in entry.class_paths:
        if path in _BY_PATH:
            raise ValueError(f"{path!r} is registered twice.")
        _BY_PATH[path] = entry
    _ENTRIES.append(entry)
    return entry


_PACKAGE = "torch_uncertainty_signorm"
_LAB = "signorm_lab"
_TU_MODELS = "torch_uncertainty.models.classification"
_BACKBONE_WEIGHTS = {"pretrained": False, "pretrained_path": None}

# σNorm-Ensembles: the factory and the class, each also where it is defined (``checkpoint``:
# their deprecated FineTune argument, which 0.1.0's recipes set).
for _name in ("signorm_ensemble", "SigmaNormEnsemble"):
    _register(
        ModelEntry(
            f"{_PACKAGE}.{_name}",
            "ensemble",
            (f"{_PACKAGE}.signorm.ensemble.{_name}",),
            allow_listed=True,
            exportable=True,
            weight_sources={"checkpoint": None},
            layout_flags=("pretrained",),
        )
    )

# FineTune: a single model's checkpoint loaded, then converted; exported as the σN-Ens factory.
_register(
    ModelEntry(
        "signorm_lab.models.finetune.finetune_ensemble",
        "ensemble",
        allow_listed=True,
        exportable=True,
        weight_sources={"checkpoint": None},
        exported_as=(f"{_PACKAGE}.signorm_ensemble", {"pretrained": True}),
    )
)

# Their settings, given as one object (``config:``).
_register(
    ModelEntry(
        f"{_PACKAGE}.SigmaNormConfig",
        "config",
        (f"{_PACKAGE}.signorm.config.SigmaNormConfig",),
        allow_listed=True,
        exportable=True,
        layout_flags=("pretrained",),
    )
)

# Backbones of the recipes.
for _name in ("resnet", "wideresnet28x10"):
    _register(ModelEntry(f"{_TU_MODELS}.{_name}", "backbone", allow_listed=True, exportable=True))
_register(
    ModelEntry(
        f"{_LAB}.models.backbones.wideresnet28", "backbone", allow_listed=True, exportable=True
    )
)
_register(
    ModelEntry(
        f"{_LAB}.models.backbones.timm_vit",
        "backbone",
        allow_listed=True,
        exportable=True,
        weight_sources=_BACKBONE_WEIGHTS,
    )
)
_register(
    ModelEntry(
        f"{_LAB}.models.backbones.bert_classifier",
        "backbone",
        allow_listed=True,
        exportable=True,
        weight_sources=_BACKBONE_WEIGHTS,
        stored_argument=StoredArgument(
            "config",
            f"{_LAB}.models.backbones.bert_config",
            ("model_name", "num_classes", "pretrained_path"),
            "the Hugging Face configuration",
        ),
    )
)
_register(
    ModelEntry(
        f"{_LAB}.models.packaged.minilm_classifier",
        "backbone",
        allow_listed=True,
        exportable=True,
        weight_sources=_BACKBONE_WEIGHTS,
    )
)
# Its ImageNet weights come from an installed package's file (the ``cnn`` extra).
_register(
    ModelEntry(
        f"{_LAB}.models.packaged.efficientnet_lite0_classifier",
        "backbone",
        allow_listed=True,
        exportable=True,
        weight_sources={"pretrained": False},
    )
)
# torchvision's ResNets: exportable (a σN-Ens around one), not named by the recipes.
for _name in (
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "wide_resnet50_2",
    "wide_resnet101_2",
):
    _register(
        ModelEntry(
            f"torchvision.models.{_name}",
            "backbone",
            (f"torchvision.models.resnet.{_name}",),
            exportable=True,
            weight_sources={"weights": None, "pretrained": None},
        )
    )

# Baselines: recorded, neither allow-listed nor exportable (no σNorm-Ensembles).
for _module, _names in (
    ("film", ("film_ensemble", "FiLMEnsemble")),
    ("lora", ("lora_ensemble", "LoRAEnsemble")),
    ("multi_head", ("multi_head_ensemble", "MultiHeadEnsemble")),
):
    for _name in _names:
        _register(
            ModelEntry(
                f"{_LAB}.baselines.{_name}",
                "baseline",
                (f"{_LAB}.baselines.{_module}.model.{_name}",),
            )
        )
_register(
    ModelEntry(
        "torch_uncertainty.methods.deep_ensembles", "baseline", weight_sources={"ckpt_paths": None}
    )
)
for _method in ("packed", "batched", "masked", "mimo"):
    for _arch in ("resnet", "wideresnet28x10"):
        _register(
            ModelEntry(
                f"{_TU_MODELS}.{_method}_{_arch}",
                "baseline",
                weight_sources={"pretrained": None}
                if _arch == "resnet" and _method == "packed"
                else {},
            )
        )
del _name, _module, _names, _method, _arch


def model_entry(class_path: str) -> ModelEntry | None:
    """The entry registering ``class_path`` (or one of its aliases); ``None`` if none does."""
    return _BY_PATH.get(class_path)


def model_entries(role: Role | None = None) -> tuple[ModelEntry, ...]:
    """The registered entries, in registration order; those of ``role`` when given."""
    return tuple(entry for entry in _ENTRIES if role is None or entry.role == role)


def class_paths(
    *, allow_listed: bool | None = None, exportable: bool | None = None, role: Role | None = None
) -> frozenset[str]:
    """Every path (aliases included) of the entries matching the given properties."""
    return frozenset(
        path
        for entry in model_entries(role)
        if allow_listed in (None, entry.allow_listed) and exportable in (None, entry.exportable)
        for path in entry.class_paths
    )


def fetching_arguments() -> tuple[str, ...]:
    """:data:`FETCHING_ARGUMENTS`, then every other weight source an entry records."""
    recorded = {key for entry in _ENTRIES for key in entry.weight_sources}
    return FETCHING_ARGUMENTS + tuple(sorted(recorded - set(FETCHING_ARGUMENTS)))
