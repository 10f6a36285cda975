"""Loading an export as untrusted data: no code of the export runs and nothing is fetched.

``config.json`` is checked against the registry's exportable classes before anything is
imported and must be self-contained; the architecture is checked against the safetensors
headers before anything is allocated, and the loaded weights must be finite.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file, load_model
from torch import Tensor, nn

from torch_uncertainty_signorm.members.heads import upgrade_legacy_heads
from torch_uncertainty_signorm.members.wrapper import MemberModel, check_member_count
from torch_uncertainty_signorm.signorm.ensemble import SigmaNormEnsemble

from ..safety.allowlist import current_class_paths
from ..safety.export_spec import EXPORTABLE_CLASS_PATHS, check_ensemble_spec
from .format import (
    CONFIG_NAME,
    FORMAT,
    MEMBER_FILE,
    WEIGHTS_NAME,
    check_finite,
    check_fits_header,
    export_file,
    file_sha256,
    member_record,
    read_json,
    safetensors_header,
)
from .spec import check_self_contained, ensemble_from_spec
from .writing import member_model

__all__ = [
    "EXPORTABLE_CLASS_PATHS",
    "SUPPORTED_VERSIONS",
    "check_ensemble_spec",
    "load_ensemble",
    "load_member",
]


#: The ``config.json`` versions this release reads (1: before the heads' own affine norm).
SUPPORTED_VERSIONS = (1, 2)
#: The keys of an export's ``config.json``.
_CONFIG_KEYS = frozenset({"format", "version", "num_estimators", "model", "members"})


def _read_config(directory: Path) -> dict:
    """``config.json`` of an export, with the keys loading reads checked."""
    path = export_file(directory, CONFIG_NAME)
    config = read_json(path)
    if config.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} has format {config.get('format')!r}, expected {FORMAT!r}.")
    version = config.get("version")
    if isinstance(version, bool) or version not in SUPPORTED_VERSIONS:
        raise ValueError(
            f"{str(path)!r} has version {version!r:.40}; this release reads "
            f"versions {', '.join(map(str, SUPPORTED_VERSIONS))} (an export of "
            f"a later release: update torch-uncertainty-signorm)."
        )
    missing = [key for key in ("num_estimators", "model", "members") if key not in config]
    if missing:
        raise ValueError(
            f"{str(path)!r} lacks {', '.join(map(repr, missing))}; an export's "
            f"config.json holds format, num_estimators, model and members."
        )
    members = config["members"]
    if not isinstance(members, list) or not all(
        isinstance(name, str) and MEMBER_FILE.fullmatch(name) for name in members
    ):
        raise ValueError(
            f"{str(path)!r} has members={members!r:.200}; expected a list of "
            f"'member_<m>.safetensors' file names."
        )
    unknown = sorted(set(config) - _CONFIG_KEYS)
    if unknown:
        raise ValueError(
            f"{str(path)!r} has unknown keys {', '.join(map(repr, unknown))}; an "
            f"export's config.json holds {', '.join(sorted(_CONFIG_KEYS))}."
        )
    check_member_count(f"{path}: num_estimators", config["num_estimators"])
    return config


#: Class blocks an export's model block nests: the ensemble, its settings, its backbone (and
#: a backbone's own block); more is no export written by export_ensemble.
MAX_CLASS_BLOCKS = 6
#: Settings of a backbone's ``config`` giving a number of layers or blocks.
_LAYER_COUNT = re.compile(r"(n_?layers?|num_(hidden_)?layers|n_blocks|num_blocks|depth)")


def _class_blocks(node: object) -> int:
    stack, count = [node], 0
    while stack:
        current = stack.pop()
        if isinstance(current, Mapping):
            count += "class_path" in current
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return count


def _check_sizes(spec: Mapping, header: Mapping[str, tuple], path: Path) -> None:
    """The sizes building would spend time on, against the weights, before building: the
    number of class blocks, the number of members (``heads.weight`` is ``(M, C, D)``, and must
    be there, and every σNorm layer's ``scale_logits`` is ``(M, features)``) and a backbone
    config's numbers of layers (at most the layers the file holds)."""
    if (blocks := _class_blocks(spec)) > MAX_CLASS_BLOCKS:
        raise ValueError(
            f"model nests {blocks} class blocks (at most {MAX_CLASS_BLOCKS}: the "
            f"ensemble, its settings and its backbone); '{path}' is no export "
            f"written by export_ensemble. Nothing was built."
        )
    members = spec["init_args"].get("num_estimators")
    if "heads.weight" not in header:
        raise ValueError(
            f"'{path}' lacks heads.weight, the members' heads (M, classes, "
            f"features) that every σN-Ens export holds; nothing was built."
        )
    if header["heads.weight"][1][:1] != (members,):
        raise ValueError(
            f"model.init_args.num_estimators={members!r}, but '{path}' holds the "
            f"heads of {header['heads.weight'][1][0]} members (heads.weight "
            f"{header['heads.weight'][1]}). Nothing was built."
        )
    other = sorted(
        f"{key} {shape}"
        for key, (_, shape) in header.items()
        if key.endswith(".scale_logits") and shape[:1] != (members,)
    )
    if other:  # each σNorm layer holds (M, features) scale logits
        raise ValueError(
            f"model.init_args.num_estimators={members!r}, but '{path}' holds σNorm "
            f"scale logits of another number of members ({other[0]}"
            f"{f' and {len(other) - 1} more' if len(other) > 1 else ''}). Nothing "
            f"was built."
        )
    backbone = spec["init_args"].get("model")
    config = backbone.get("init_args", {}).get("config") if isinstance(backbone, Mapping) else None
    if not isinstance(config, Mapping):
        return
    if "num_hidden_layers" in config:
        layers = {
            match.group(1)
            for key in header
            if (match := re.search(r"\.encoder\.layer\.(\d+)\.", key))
        }
        if config["num_hidden_layers"] != len(layers):
            raise ValueError(
                f"model.init_args.model.init_args.config.num_hidden_layers="
                f"{config['num_hidden_layers']!r}, but '{path}' holds {len(layers)} "
                f"encoder layers. Nothing was built."
            )
    indices = {int(match.group(1)) for key in header for match in re.finditer(r"\.(\d+)\.", key)}
    held = max(indices, default=-1) + 1
    for key, value in config.items():
        if _LAYER_COUNT.fullmatch(str(key)) and isinstance(value, int) and value > held:
            raise ValueError(
                f"model.init_args.model.init_args.config.{key}={value!r}, but "
                f"'{path}' holds at most {held} layers (the largest layer index of "
                f"its tensors); nothing was built."
            )


def _load_checked(build: Callable[[], nn.Module], path: Path) -> nn.Module:
    """``build()`` with the weights of ``path``: built first on the meta device (no memory) and
    checked against the file's header, then built and loaded strictly, then checked finite."""
    header = safetensors_header(path)
    legacy = _LEGACY_HEAD_NORM in header
    with torch.device("meta"):
        check_fits_header(build().state_dict(), _upgraded_header(header), path)
    model = build()
    if legacy:
        model.load_state_dict(upgrade_legacy_heads(load_file(path), prefix="heads."))
    else:
        load_model(model, str(path), strict=True)
    check_finite(model.state_dict(), path)
    return model.eval()


#: The heads' σNorm scale logits of an export written before the heads had an affine norm.
_LEGACY_HEAD_NORM = "heads.norm.scale_logits"


def _upgraded_header(header: dict[str, tuple]) -> dict[str, tuple]:
    """The header of an export written before the heads' norm had its own affine, as today's
    (:func:`~torch_uncertainty_signorm.members.heads.upgrade_legacy_heads`)."""
    header = dict(header)
    legacy = header.pop(_LEGACY_HEAD_NORM, None)
    if legacy is not None:
        header.update(
            {
                "heads.norm.weight": legacy,
                "heads.norm.bias": legacy,
                "heads.norm.scale_initialised": ("BOOL", ()),
            }
        )
    return header


def _export_spec(directory: Path, extra_class_paths: Iterable[str]) -> dict:
    """The model block of the export in ``directory``, checked before anything is built."""
    config = _read_config(directory)
    spec = config["model"] = current_class_paths(config["model"])
    check_ensemble_spec(spec, extra_class_paths)
    check_self_contained(spec)
    declared = (spec.get("init_args") or {}).get("num_estimators")
    if declared != config["num_estimators"]:
        raise ValueError(
            f"'{directory / CONFIG_NAME}' has num_estimators="
            f"{config['num_estimators']!r} but model.init_args.num_estimators="
            f"{declared!r}; they must agree."
        )
    weights = export_file(directory, WEIGHTS_NAME)
    _check_sizes(spec, safetensors_header(weights), weights)
    return config


def load_ensemble(
    directory: str | Path, extra_class_paths: Iterable[str] = ()
) -> SigmaNormEnsemble:
    """Rebuild an exported ensemble (in eval mode) with exactly the exported weights.

    Nothing outside ``directory`` is read and no code of the export runs: ``config.json`` is
    checked against the allow-list (:func:`~signorm_lab.export.check_ensemble_spec`)
    before anything is imported, and must be self-contained (no argument fetching weights); the
    architecture is checked against the safetensors header (names, shapes, dtypes) before
    anything is allocated, and the loaded weights must be finite.
    """
    directory = Path(directory)
    spec = _export_spec(directory, extra_class_paths)["model"]
    return _load_checked(
        lambda: ensemble_from_spec(spec, extra_class_paths), export_file(directory, WEIGHTS_NAME)
    )


def load_member(
    directory: str | Path, member: int, extra_class_paths: Iterable[str] = ()
) -> MemberModel:
    """Rebuild exported member ``member`` (in eval mode), as safely as :func:`load_ensemble`.

    The member file must be member ``member`` of the export's own ``ensemble.safetensors``: a
    member file copied from another export (same architecture, other weights) or renamed to
    another index is refused. A member file records what it was cut from (its safetensors
    metadata, :func:`~signorm_lab.export.format.member_record`): the SHA-256 of
    the ensemble file written beside it, which must be this export's, and its index, which must
    be ``member``. Nothing is recomputed, so a member file loads on any machine.

    A member file without that record (release 0.1.0) is checked against the member folded
    here from the ensemble file, with :func:`torch.testing.assert_close`'s tolerances for its
    dtype (float32: relative 1.3e-6, eleven times float32's epsilon, plus absolute 1e-5;
    integers exactly): the fold's arithmetic differs across CPU kernels (AVX2, AVX-512, the
    default: by at most 2 units in the last place), the weights of another export by far more.

    The record guards against mixing up exports' files, not against a forged file (an export
    is untrusted data, loaded as such whatever it records).

    Raises:
        ValueError: If ``member`` was not exported, or the member file is not member
            ``member`` of this export's ensemble, or its record is malformed.
    """
    directory = Path(directory)
    config = _export_spec(directory, extra_class_paths)
    name = f"member_{member}.safetensors"
    if name not in config["members"]:
        raise ValueError(
            f"member {member!r} was not exported to {directory}; exported members: "
            f"{config['members'] or 'none (export with members=True / --members)'}."
        )
    path, weights = export_file(directory, name), export_file(directory, WEIGHTS_NAME)
    record = member_record(path)
    if record is not None:  # checked before the member's weights are read
        _refuse_if(_record_mismatch(record, member, weights), path, member, directory)
    loaded = _load_checked(
        lambda: member_model(ensemble_from_spec(config["model"], extra_class_paths), member), path
    )
    if record is None:  # written before member files recorded their ensemble: fold it here
        ensemble = _load_checked(
            lambda: ensemble_from_spec(config["model"], extra_class_paths), weights
        )
        expected = member_model(ensemble, member).eval().state_dict()
        _refuse_if(_first_difference(loaded.state_dict(), expected), path, member, directory)
    return loaded


def _record_mismatch(record: tuple[str, int], member: int, weights: Path) -> str | None:
    """How a member file's record (ensemble SHA-256, index) contradicts being member ``member``
    of the ensemble file ``weights``, or ``None``."""
    digest, index = record
    if index != member:
        return f"it records member {index}"
    actual = file_sha256(weights)
    if digest != actual:
        return f"it records an ensemble of SHA-256 {digest[:12]}…, this one's is {actual[:12]}…"
    return None


def _first_difference(loaded: Mapping[str, Tensor], expected: Mapping[str, Tensor]) -> str | None:
    """The first tensor of ``loaded`` that is not ``expected``'s within
    :func:`torch.testing.assert_close`'s tolerances for its dtype, or ``None``."""
    for key, tensor in loaded.items():
        try:
            torch.testing.assert_close(tensor, expected[key])
        except AssertionError:
            return f"{key} differs"
    return None


def _refuse_if(reason: str | None, path: Path, member: int, directory: Path) -> None:
    if reason is not None:
        raise ValueError(
            f"'{path}' is not member {member} of the ensemble in "
            f"'{directory / WEIGHTS_NAME}' ({reason}): a member file of another "
            f"export? Export the members again (--members)."
        )
