"""What a configuration read from a file may import: an explicit list, checked before building.

Checkpoint hyper-parameters and exported ``config.json`` files are data. jsonargparse, which
builds ``class_path``/``init_args`` blocks, imports every ``class_path`` it meets, and every dotted
string given to a class- or callable-typed argument (``normalization_layer: torch.nn.BatchNorm2d``);
:func:`check_class_paths` rejects, before anything is imported, every such name outside the lists
below (the models' list is read from :mod:`signorm_lab.safety.model_registry`).
For a class-typed argument jsonargparse also reads a *string* as a class block (a YAML
``"{class_path: ...}"``, the path of a YAML file, a short class name):
:func:`check_class_strings` refuses such strings before parsing, and :func:`check_parsed` checks
the parsed configuration again before it is built (both called by the one builder of such
blocks, :func:`~signorm_lab.safety.class_blocks.build_class_block`).

A recipe given to the export command is data too (the recipe given to ``torch-uncertainty``
is the user's): :func:`check_recipe` walks it whole before its parser imports anything, every
``class_path``, dotted string, string YAML reads as a block (one line included) and file a
value names, and refuses a value naming a pipe, a device or a socket. The check and the parser
agree on what a class path is (:func:`is_class_path`: identifiers in any script) and which file
a value names (:func:`named_file`: relative to the file naming it, ``~`` expanded; URLs
refused); the export command also checks every file as its parser reads it
(:mod:`~signorm_lab.safety.parser_reads`).
"""

from __future__ import annotations

import collections.abc
import enum
import importlib
import importlib.util
import inspect
import os
import re
import stat
import sys
import types
import typing
from collections.abc import Collection, Mapping
from importlib.machinery import PathFinder
from pathlib import Path, PurePath
from types import MappingProxyType
from typing import Any

import yaml

from . import model_registry
from .patterns import check_selection_patterns

__all__ = [
    "ALLOWED_CLASS_PATHS",
    "ARGUMENT_CLASS_PATHS",
    "COMPONENT_CLASS_PATHS",
    "MODEL_CLASS_PATHS",
    "MOVED_CLASS_PATHS",
    "RECIPE_CLASS_PATHS",
    "argument_type",
    "check_class_paths",
    "check_class_strings",
    "check_parsed",
    "check_recipe",
    "current_argument",
    "current_class_paths",
    "current_path",
    "import_object",
    "is_class_path",
    "named_file",
    "parameter_type",
    "value_at",
]

_PACKAGE = "torch_uncertainty_signorm"
#: Paths inside the package that moved before 0.2.0: (old, new), each after the package's name;
#: a new path that then moved to the lab is read at its place now (:func:`_now`).
_MOVED_IN_PACKAGE = (
    # The modules that became the folders of σN-Ens and of each baseline.
    ("ensemble.signorm_ensemble", "signorm.ensemble.signorm_ensemble"),
    ("ensemble.SigmaNormEnsemble", "signorm.ensemble.SigmaNormEnsemble"),
    ("config.SigmaNormConfig", "signorm.config.SigmaNormConfig"),
    ("baselines.film_ensemble.film_ensemble", "baselines.film.model.film_ensemble"),
    ("baselines.film_ensemble.FiLMEnsemble", "baselines.film.model.FiLMEnsemble"),
    ("baselines.lora_ensemble.lora_ensemble", "baselines.lora.model.lora_ensemble"),
    ("baselines.lora_ensemble.LoRAEnsemble", "baselines.lora.model.LoRAEnsemble"),
    # The loose root modules, folded into the folders they serve.
    *(
        (f"backbones.{name}", f"models.backbones.{name}")
        for name in (
            "wideresnet28",
            "timm_vit",
            "bert_classifier",
            "bert_config",
            "SequenceClassifier",
        )
    ),
    *(
        (f"offline_assets.{name}", f"models.packaged.{name}")
        for name in ("minilm_classifier", "efficientnet_lite0_classifier")
    ),
    ("transforms.vit_transform", "datamodules.transforms.vit_transform"),
    ("lr_schedulers.WarmupCosineLR", "optim_recipes.WarmupCosineLR"),
    # Callback modules renamed apart from the datamodule and σN-Ens modules of the same name.
    ("callbacks.ood_shift.OODShiftEvaluation", "callbacks.ood_shift_metrics.OODShiftEvaluation"),
    (
        "callbacks.diversity_target.DiversityTargetCallback",
        "callbacks.tau_control.DiversityTargetCallback",
    ),
)


def _now(path: str) -> str:
    """``path`` where it is now: a folder, module or name of the package that moved to the lab
    in 0.2.0 (the method's ``MOVED_MODULES``, and the names of its ``callbacks`` and
    ``evaluation`` folders that went with them) at its ``signorm_lab`` path."""
    from torch_uncertainty_signorm import MOVED_MODULES, MOVED_NAMES

    if path in MOVED_NAMES:  # a folder's name: the lab's folder of the same name holds it
        return "signorm_lab." + path.removeprefix(f"{_PACKAGE}.")
    for old, new in MOVED_MODULES.items():
        if path == old or path.startswith(f"{old}."):
            return new + path[len(old) :]
    return path


def _moved_class_paths() -> dict[str, str]:
    """:data:`MOVED_CLASS_PATHS`' paths moved before 0.2.0, each at its place now."""
    return {f"{_PACKAGE}.{old}": _now(f"{_PACKAGE}.{new}") for old, new in _MOVED_IN_PACKAGE}


#: Dotted paths that recipes, checkpoints' hyper-parameters and exports' ``config.json`` written
#: earlier may name, each with the path of the same object now: the one table of moved paths.
#: A configuration read from a file passes through :func:`current_class_paths` before it is
#: checked or parsed, so everything after sees current paths only. The 0.2.0 moves to the lab
#: are read by :func:`current_path` from the method's table, for any path under a moved folder.
MOVED_CLASS_PATHS: Mapping[str, str] = MappingProxyType(
    {
        **_moved_class_paths(),
        # TorchUncertainty's, renamed after its CIFAR recipes were written.
        "torch_uncertainty.models.deep_ensembles": "torch_uncertainty.methods.deep_ensembles",
    }
)


def current_path(path: str) -> str:
    """The dotted ``path`` of a file as it is now (:data:`MOVED_CLASS_PATHS`, then the 0.2.0
    moves to the lab); any other string unchanged."""
    path = MOVED_CLASS_PATHS.get(path, path)
    return _now(path) if path.startswith(f"{_PACKAGE}.") else path


def current_class_paths(tree: Any) -> Any:
    """``tree`` (a configuration read from a file) with every moved path, as a ``class_path``
    value or as a dotted string, replaced by its current one (:data:`MOVED_CLASS_PATHS`); a
    copy, ``tree`` itself unchanged."""
    if isinstance(tree, Mapping):
        return {key: current_class_paths(value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(current_class_paths(value) for value in tree)
    if isinstance(tree, str):
        return current_path(tree)
    return tree


def current_argument(arg: str) -> str:
    """A command-line argument with a moved class path as its whole value (``OLD`` or
    ``--key=OLD``) given its current one (:data:`MOVED_CLASS_PATHS`)."""
    option, equals, value = arg.partition("=")
    if equals and option.startswith("-"):
        return f"{option}={current_path(value)}"
    return current_path(arg)


#: Models a ``model:`` block may build: the registry's allow-listed models (σNorm-Ensembles and
#: the backbones of the recipes, :mod:`signorm_lab.safety.model_registry`).
MODEL_CLASS_PATHS = model_registry.class_paths(allow_listed=True)
#: The routine's other blocks: losses and batch formats.
COMPONENT_CLASS_PATHS = frozenset(
    {
        "torch.nn.CrossEntropyLoss",
        "torch.nn.BCEWithLogitsLoss",
        "torch_uncertainty.transforms.RepeatTarget",
    }
)
#: Classes and functions passed as argument values (the defaults jsonargparse writes out).
ARGUMENT_CLASS_PATHS = frozenset(
    {
        "torch.nn.BatchNorm2d",
        "torch.nn.functional.relu",
    }
)
ALLOWED_CLASS_PATHS = MODEL_CLASS_PATHS | COMPONENT_CLASS_PATHS | ARGUMENT_CLASS_PATHS


def _each(module: str, names: str) -> set[str]:
    return {f"{module}.{name}" for name in names.split()}


#: What a recipe given to the export command may name besides :data:`ALLOWED_CLASS_PATHS`:
#: the routines, datamodules, optimisers, schedulers, loggers, callbacks and transforms of the
#: recipes of ``experiments/`` and TorchUncertainty's image classification recipes.
RECIPE_CLASS_PATHS = frozenset(
    ALLOWED_CLASS_PATHS
    | _each("torch_uncertainty_signorm.routines", "SigmaNormClassificationRoutine")
    | _each("torch_uncertainty.routines", "ClassificationRoutine")
    | _each(
        "signorm_lab.datamodules",
        "CIFAR10OODShiftDataModule CIFAR100OODShiftDataModule DigitsDataModule "
        "ImageNetOODShiftDataModule SST2DataModule TweetsDataModule",
    )
    | _each(
        "torch_uncertainty.datamodules",
        "CIFAR10DataModule CIFAR100DataModule ImageNetDataModule MNISTDataModule "
        "TinyImageNetDataModule",
    )
    | _each("torch.optim", "SGD Adam AdamW RMSprop Adagrad")
    | _each(
        "torch.optim.lr_scheduler",
        "MultiStepLR StepLR CosineAnnealingLR CosineAnnealingWarmRestarts LinearLR "
        "ConstantLR ExponentialLR OneCycleLR ReduceLROnPlateau",
    )
    | _each("torch_uncertainty_signorm.optim_recipes", "WarmupCosineLR")
    # MLflow's logger, as TorchUncertainty's recipes log: it writes to the store it is given,
    # and, like the others, reads no file into the model.
    | _each("lightning.pytorch.loggers", "CSVLogger MLFlowLogger TensorBoardLogger")
    | _each(
        "lightning.pytorch.callbacks",
        "EarlyStopping LearningRateMonitor ModelCheckpoint ModelSummary RichProgressBar "
        "TQDMProgressBar Timer",
    )
    | _each("torch_uncertainty.callbacks", "TUClsCheckpoint")
    | _each("torch_uncertainty_signorm.callbacks", "MemberOwnershipCallback")
    | _each(
        "signorm_lab.callbacks",
        "ExactResumeCheckpoint OODShiftEvaluation ParameterCountCallback RunRecordCallback "
        "TestPredictionWriter",
    )
    | _each("torch_uncertainty.transforms", "MIMOBatchFormat RepeatTarget")
    | _each("signorm_lab.datamodules.transforms", "vit_transform")
)
#: A recipe's top-level blocks, which the parser reads as classes (or as files, or YAML
#: strings, when given a string).
_RECIPE_BLOCKS = frozenset({"routine", "model", "data", "optimizer", "lr_scheduler", "trainer"})
#: A file named in a recipe that is read to check it: a recipe-sized YAML file.
_MAX_NAMED_FILE_BYTES = 1 << 20


def is_class_path(value: Any) -> bool:
    """Whether jsonargparse may import ``value``: a string of two or more dot-separated parts,
    each a Python identifier in any script (``str.isidentifier``, the test of jsonargparse's
    ``import_object``: ``advcanary.é`` is one, and importing it runs ``advcanary``)."""
    return (
        isinstance(value, str)
        and "." in value
        and all(part.isidentifier() for part in value.split("."))
    )


def _importable(name: str, folders: Collection[Path] = ()) -> bool:
    """Whether the class path ``name`` names a module that could be imported: its first part
    found on ``sys.path``, already imported, or lying in one of ``folders`` (the working
    directories a parser may change to: a relative ``sys.path`` entry such as ``''`` or
    ``PYTHONPATH=.`` then reaches them). Nothing is run; when the search fails, yes."""
    if not is_class_path(name):
        return False
    top = name.partition(".")[0]
    if top in sys.modules:
        return True
    try:
        return (
            importlib.util.find_spec(top) is not None
            or PathFinder.find_spec(top, [str(folder) for folder in folders]) is not None
        )
    except (ImportError, ValueError, OSError):
        return True


#: A string jsonargparse reads as a URL or an fsspec path (``http://``, ``s3://``), or as the
#: local file ``file:///...`` names: never a file the check reads, so refused.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(//|:).*|file:.*", re.DOTALL)


def named_file(value: str, folder: Path) -> Path | None:
    """The file path ``value`` names when a file of ``folder`` holds it, as jsonargparse
    resolves it (``~`` expanded, relative to ``folder``); ``None`` when ``value`` cannot be a
    path (a URL is refused by :func:`check_recipe`, see :data:`_URL`)."""
    if len(value) > 4096 or not value or "\0" in value or "\n" in value:
        return None
    try:
        return (folder / os.path.expanduser(value)).resolve()
    except (OSError, ValueError, RuntimeError):
        return None


def _refuse(where: str, name: Any, allowed: frozenset[str]) -> ValueError:
    return ValueError(
        f"{where}={name!r} is not an allowed class path, so it is not imported; allowed: "
        f"{', '.join(sorted(allowed))} (signorm_lab.safety.allowlist)."
    )


def check_class_paths(
    spec: Any, allowed: frozenset[str] = ALLOWED_CLASS_PATHS, where: str = "spec"
) -> None:
    """Raise naming the first ``class_path`` (or importable dotted string) outside ``allowed``.

    Walks a ``class_path``/``init_args`` tree (mappings, lists, strings) without importing
    anything, so that a file can only make jsonargparse build listed classes.

    Args:
        spec: The tree, e.g. a recipe's ``routine.init_args.model`` block.
        allowed: The class paths that may be named. Defaults to :data:`ALLOWED_CLASS_PATHS`.
        where: Name of ``spec`` in the error message.
    """
    if isinstance(spec, Mapping):
        if "class_path" in spec:
            class_path = spec["class_path"]
            if not isinstance(class_path, str):
                raise ValueError(
                    f"{where}.class_path must be a dotted class path (a string such "
                    f"as 'torch_uncertainty_signorm.signorm_ensemble'), got "
                    f"{type(class_path).__name__} {class_path!r:.200}."
                )
            if class_path not in allowed:
                raise _refuse(f"{where}.class_path", class_path, allowed)
            if not isinstance(spec.get("init_args") or {}, Mapping):
                raise ValueError(
                    f"{where}.init_args must be a mapping of argument names to "
                    f"values, got {type(spec['init_args']).__name__} "
                    f"{spec['init_args']!r:.200}."
                )
        for key, value in spec.items():
            if key != "class_path":
                check_class_paths(value, allowed, f"{where}.{key}")
    elif isinstance(spec, (list, tuple)):
        for index, value in enumerate(spec):
            check_class_paths(value, allowed, f"{where}[{index}]")
    elif isinstance(spec, str) and spec not in allowed and _importable(spec):
        raise _refuse(where, spec, allowed)


def _allowed_name(name: str, allowed: frozenset[str]) -> bool:
    """An allowed class path, or the class name alone of one (jsonargparse's short form)."""
    return name in allowed or (
        "." not in name and any(path.rpartition(".")[2] == name for path in allowed)
    )


def check_recipe(
    recipe: Any,
    where: str,
    allowed: frozenset[str] = RECIPE_CLASS_PATHS,
    folder: Path | None = None,
) -> None:
    """Raise naming the first place of a whole recipe (any format) that could make the parser
    import a class outside ``allowed``; nothing is imported.

    Every ``class_path`` at any depth, in either recipe format (``routine:`` or
    TorchUncertainty's ``model:``), must be allowed (:data:`RECIPE_CLASS_PATHS`); a class path
    (:func:`is_class_path`) naming an importable module, from ``sys.path`` or from a folder the
    parser may work in, must be allowed; a string that YAML reads as a mapping or a list (a flow
    block, several lines, or one line such as ``"class_path: a.B"``) is checked as the block it
    would be; a string naming a file (:func:`named_file`: relative to the file holding it, which
    is ``folder`` for the recipe, or to the working directory) is read and checked as the block
    it would be, and a URL or ``file:`` path refused; a top-level block (``routine``, ``data``,
    ``optimizer``, ...) must be written as a mapping.

    Raises:
        ValueError: On one line, naming ``where`` (the file), the key, the value and what is
            valid.
    """
    from .files import UnboundedYAML, load_yaml, read_regular

    check_selection_patterns(recipe, where)  # a regex of a file matches in bounded time
    seen_files: set[Path] = set()
    cwd = Path.cwd()
    folder = cwd if folder is None else Path(folder).resolve()

    def refuse(place: str, value: Any, why: str) -> ValueError:
        return ValueError(
            f"{where}: {place}={value!r:.200} {why}; a recipe given to the export "
            f"command may name only allowed classes "
            f"(signorm_lab.safety.allowlist.RECIPE_CLASS_PATHS, or "
            f"--allow)."
        )

    def files_named(value: str, place: str, base: Path) -> list[Path]:
        """The regular files ``value`` may name: beside the file holding it (as the parser
        resolves it), or in the working directory (a command-line override)."""
        found = []
        for root in dict.fromkeys((base, cwd)):
            candidate = named_file(value, root)
            try:
                mode = candidate.stat().st_mode if candidate is not None else None
            except (OSError, ValueError):
                continue
            if mode is None or stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):  # the parser would open it, and block on a pipe
                raise refuse(
                    place,
                    value,
                    f"names '{candidate}', which is not a regular file "
                    f"(a named pipe, a device or a socket)",
                )
            found.append(candidate)
        return found

    def visit(node: Any, place: str, depth: int, folders: tuple[Path, ...]) -> None:
        if depth > 64:
            raise refuse(place, "...", "is nested more than 64 levels deep")
        if isinstance(node, Mapping):
            if "class_path" in node:
                class_path = node["class_path"]
                if not isinstance(class_path, str) or not _allowed_name(class_path, allowed):
                    raise refuse(
                        f"{place}.class_path" if place else "class_path",
                        class_path,
                        "is not an allowed class path, so it is not imported",
                    )
            for key, value in node.items():
                if key == "class_path":
                    continue
                child = f"{place}.{key}" if place else str(key)
                if (
                    not place
                    and key in _RECIPE_BLOCKS
                    and isinstance(value, str)
                    and not _allowed_name(value, allowed)
                ):
                    raise refuse(
                        child,
                        value,
                        "is a string where a block is expected (the "
                        "parser would read it as a file or a YAML block, unchecked); "
                        "write the block in the recipe",
                    )
                visit(value, child, depth + 1, folders)
        elif isinstance(node, (list, tuple)):
            for index, value in enumerate(node):
                visit(value, f"{place}[{index}]", depth + 1, folders)
        elif isinstance(node, str) and not _allowed_name(node, allowed):
            if _URL.fullmatch(node.strip()):
                raise refuse(
                    place,
                    node,
                    "names a URL or a file: path, which the parser would "
                    "read unchecked; name a file by its path, relative to the file "
                    "naming it",
                )
            if _importable(node, (*folders, cwd)):
                raise refuse(place, node, "is not an allowed class path, so it is not imported")
            paths = files_named(node, place, folders[-1])
            if not paths:
                # any string YAML reads as a block, on one line too ("class_path: a.B", "- x")
                try:
                    parsed = load_yaml(node, f"{where}: {place}")
                except UnboundedYAML:
                    raise
                except ValueError:
                    return
                if isinstance(parsed, (Mapping, list)):
                    visit(parsed, place, depth + 1, folders)
            for path in paths:
                if path in seen_files:
                    continue
                seen_files.add(path)
                try:
                    data = read_regular(path, place, _MAX_NAMED_FILE_BYTES)
                except ValueError:
                    if path.suffix.lower() not in (".yaml", ".yml", ".json"):
                        continue  # a data file or a checkpoint (a saved config's ckpt_path)
                    raise refuse(
                        place,
                        node,
                        f"names the file '{path}', larger than a recipe "
                        f"block ({_MAX_NAMED_FILE_BYTES} bytes)",
                    ) from None
                try:
                    parsed = load_yaml(data, f"{where}: {place} ('{path}')")
                except UnboundedYAML:
                    raise
                except ValueError:
                    continue  # not YAML: a data file, which the parser does not read
                if isinstance(parsed, (Mapping, list)):  # its own names: from its folder
                    visit(parsed, place, depth + 1, (*folders, path.parent))

    visit(recipe, "", 0, (folder,))


def import_object(path: str, allowed: Collection[str] | None = None) -> Any:
    """The object at the dotted ``path`` (``package.module.name``): the one importer.

    Args:
        path: The dotted path (a moved one is read as its current one,
            :data:`MOVED_CLASS_PATHS`).
        allowed: When given, the paths that may be imported; any other is refused before
            anything is imported.

    Raises:
        ValueError: If ``path`` is not in ``allowed``, or names nothing importable.
    """
    path = current_path(path)
    if allowed is not None and path not in allowed:
        raise _refuse("class_path", path, frozenset(allowed))
    module_name, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as error:
        raise ValueError(f"class_path {path!r} cannot be imported ({error}).") from None


# ------------------------------------------------------------------- strings read as classes
_DATA_TYPES = (str, bytes, int, float, bool, type(None), PurePath, enum.Enum, dict, list, tuple)
_CONTAINERS = (collections.abc.Sequence, collections.abc.Mapping, collections.abc.Set)
_PLAIN_WORD = re.compile(r"[\w-]+")


def parameter_type(owner: Any, name: str) -> Any:
    """The annotation of argument ``name`` of ``owner`` (a function, or a class whose
    ``**kwargs`` reach its bases' ``__init__``); ``Any`` when it cannot be told."""
    functions = (
        [owner]
        if not isinstance(owner, type)
        else [klass.__dict__["__init__"] for klass in owner.__mro__ if "__init__" in klass.__dict__]
    )
    for function in functions:
        try:
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError):
            return Any
        if name in parameters:
            try:
                annotation = typing.get_type_hints(function).get(name, Any)
            except Exception:  # an annotation naming what is not importable here
                annotation = Any
            return annotation
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
            return Any
    return Any


def argument_type(class_path: str, key: str, init_args: Mapping) -> Any:
    """The annotation of the dotted ``key`` (``model.init_args.tau``) of ``class_path``'s
    arguments ``init_args``; nested blocks are the classes ``init_args`` names (trusted ones:
    a recipe's). ``Any`` when it cannot be told."""
    owner, node, annotation = import_object(class_path), init_args, Any
    for part in key.split("."):
        if part == "init_args":
            continue
        if owner is None:
            return Any
        annotation = parameter_type(owner, part)
        node = node.get(part) if isinstance(node, Mapping) else None
        owner = None
        if isinstance(node, Mapping) and isinstance(node.get("class_path"), str):
            owner, node = import_object(node["class_path"]), node.get("init_args") or {}
    return annotation


def _takes_class(annotation: Any) -> bool:
    """Whether jsonargparse may read a value of ``annotation`` as a class to import or build."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return False
    if origin in (typing.Union, types.UnionType):
        return any(_takes_class(arg) for arg in typing.get_args(annotation))
    if isinstance(origin, type) and issubclass(origin, _CONTAINERS):
        return any(_takes_class(arg) for arg in typing.get_args(annotation))
    if origin is None and isinstance(annotation, type):
        return not issubclass(annotation, _DATA_TYPES)
    return True  # Any, callables, type[...], type variables: anything may be


def _takes_string(annotation: Any) -> bool:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_takes_string(arg) for arg in typing.get_args(annotation))
    return annotation is str


def _reads_as_structure(value: str) -> bool:
    """Whether YAML reads ``value`` as a mapping or a list (which jsonargparse may build)."""
    try:
        return isinstance(yaml.safe_load(value), (Mapping, list))
    except yaml.YAMLError:
        return False


def check_class_strings(
    value: Any, annotation: Any, where: str, allowed: frozenset[str] = ALLOWED_CLASS_PATHS
) -> None:
    """Refuse a string jsonargparse could read as a class where ``annotation`` takes one.

    Nothing is imported but the classes of ``value``'s own class blocks (which
    :func:`check_class_paths` must have accepted). Where an argument takes a class, a string is
    kept only when it is an allowed class path, or a plain word (``msp``, no file of that name)
    for an argument that also takes strings: a YAML ``"{class_path: ...}"``, the path of a YAML
    file or a class name is refused. Where it takes anything (``Any``, the items of mappings and
    lists), a string
    that YAML reads as a mapping or a list is refused.

    Raises:
        ValueError: Naming the string, where it is, and what the argument takes.
    """
    if isinstance(value, Mapping) and isinstance(value.get("class_path"), str):
        owner = import_object(value["class_path"], allowed)
        for key, item in (value.get("init_args") or {}).items():
            check_class_strings(
                item, parameter_type(owner, key), f"{where}.init_args.{key}", allowed
            )
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            check_class_strings(item, Any, f"{where}.{key}", allowed)
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_class_strings(item, Any, f"{where}[{index}]", allowed)
    if not isinstance(value, str) or value in allowed or not _takes_class(annotation):
        return
    if annotation is Any:
        refused = _reads_as_structure(value)
    else:
        refused = not (
            _takes_string(annotation) and _PLAIN_WORD.fullmatch(value) and not Path(value).exists()
        )
    if refused:
        raise ValueError(
            f"{where}={value!r:.200} is a string where a class is expected ({annotation}): it "
            f"could be read as a class to build (a YAML class_path block, a YAML file, a class "
            f"name), so it is refused. Classes are built only from class_path/init_args blocks "
            f"of allowed classes (signorm_lab.safety.allowlist)."
        )


def _classes_built(tree: Any, where: str) -> dict[str, str]:
    """``{place: class_path}`` of every class block in a parsed configuration ``tree``."""
    found = {}
    if isinstance(tree, Mapping):
        if isinstance(tree.get("class_path"), str):
            found[where] = tree["class_path"]
        for key, value in tree.items():
            found |= _classes_built(value, f"{where}.{key}")
    elif isinstance(tree, (list, tuple)):
        for index, value in enumerate(tree):
            found |= _classes_built(value, f"{where}[{index}]")
    return found


def check_parsed(
    given: Any, parsed: Any, where: str, allowed: frozenset[str] = ALLOWED_CLASS_PATHS
) -> None:
    """After parsing, before building: every class block of ``parsed`` was a class block of
    ``given`` (no string became one) and is in ``allowed``.

    Raises:
        ValueError: Naming the place, the class and the value given there.
    """
    check_selection_patterns(parsed, where)  # a regex of a file matches in bounded time
    before = _classes_built(given, where)
    for place, class_path in _classes_built(parsed, where).items():
        if place not in before:
            raise ValueError(
                f"{place} was given as {value_at(given, place, where)!r:.200}, which the parser "
                f"read as the class {class_path!r}: a class is built only from a class_path block "
                f"of an allowed class (signorm_lab.safety.allowlist)."
            )
    check_class_paths(parsed, allowed, where)


def value_at(tree: Any, place: str, where: str) -> Any:
    """The value of ``tree`` at ``place`` (as :func:`_classes_built` names it), else its
    deepest given ancestor."""
    for part in re.findall(r"\.([^.\[]+)|\[(\d+)\]", place.removeprefix(where)):
        key = part[0] if part[0] else int(part[1])
        try:
            tree = tree[key]
        except (KeyError, IndexError, TypeError):
            break
    return tree
