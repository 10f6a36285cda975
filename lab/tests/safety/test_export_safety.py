"""Loading an export runs no code: a config.json naming anything but allow-listed models is refused
before anything is imported or built, at any depth, and leaves every file as it was."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
import torch

from signorm_lab.export import (
    build_model,
    export_ensemble,
    load_ensemble,
    load_member,
)
from signorm_lab.safety.allowlist import import_object

SPEC = {
    "class_path": "torch_uncertainty_signorm.signorm_ensemble",
    "init_args": {
        "model": {
            "class_path": "torch_uncertainty.models.classification.resnet",
            "init_args": {
                "in_channels": 3,
                "num_classes": 10,
                "arch": 18,
                "style": "cifar",
                "width_multiplier": 0.125,
            },
        },
        "num_estimators": 2,
    },
}


class _PicklePayload:
    """Unpickling it runs ``code`` (what ``torch.load(..., weights_only=False)`` would do)."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self):
        return exec, (self.code,)


def _payloads(root: Path) -> dict[str, tuple[dict, Path]]:
    """Each malicious block with the file its side effect would create or overwrite."""
    pickle_marker, hub_marker, victim = (
        root / "pickle.ran",
        root / "hubconf.ran",
        root / "victim.txt",
    )
    torch.save(_PicklePayload(f"open({str(pickle_marker)!r}, 'w').close()"), root / "payload.pt")
    (root / "hub").mkdir()
    (root / "hub" / "hubconf.py").write_text(
        f"open({str(hub_marker)!r}, 'w').close()\n\ndef payload():\n    return None\n"
    )
    victim.write_text("precious")
    return {
        "torch.load": (
            {
                "class_path": "torch.load",
                "init_args": {"f": str(root / "payload.pt"), "weights_only": False},
            },
            pickle_marker,
        ),
        "torch.hub.load": (
            {
                "class_path": "torch.hub.load",
                "init_args": {
                    "repo_or_dir": str(root / "hub"),
                    "model": "payload",
                    "source": "local",
                    "trust_repo": True,
                },
            },
            hub_marker,
        ),
        "torch.save": (
            {"class_path": "torch.save", "init_args": {"obj": "overwritten", "f": str(victim)}},
            victim,
        ),
        # A trusted package is not enough: only the listed model factories are.
        "signorm_lab.export.export_ensemble": (
            {
                "class_path": "signorm_lab.export.export_ensemble",
                "init_args": {"model": None, "spec": {}, "directory": str(root / "written")},
            },
            root / "written",
        ),
    }


def _digest(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("export")
    export_ensemble(build_model(SPEC).eval(), SPEC, directory, members=True)
    return directory


@pytest.mark.parametrize("loader", ["ensemble", "member"])
@pytest.mark.parametrize("where", ["model", "model.init_args.model"])
@pytest.mark.parametrize(
    "payload",
    [
        "torch.load",
        "torch.hub.load",
        "torch.save",
        "signorm_lab.export.export_ensemble",
    ],
)
def test_a_config_naming_code_is_refused_before_anything_runs(
    tmp_path, export_dir, payload, where, loader
):
    block, side_effect = _payloads(tmp_path)[payload]
    config = json.loads((export_dir / "config.json").read_text())
    if where == "model":
        config["model"] = block
    else:
        config["model"]["init_args"]["model"] = block
    bad = tmp_path / "bad_export"
    bad.mkdir()
    for name in ("ensemble.safetensors", "member_0.safetensors"):
        (bad / name).write_bytes((export_dir / name).read_bytes())
    (bad / "config.json").write_text(json.dumps(config))
    before = _digest(tmp_path)

    with pytest.raises(ValueError, match=rf"{where}\.class_path='{payload}'") as error:
        load_ensemble(bad) if loader == "ensemble" else load_member(bad, 0)

    assert "allowed: " in str(error.value)
    assert "torch_uncertainty_signorm.signorm_ensemble" in str(error.value)  # lists the allowed
    assert _digest(tmp_path) == before  # nothing created, nothing overwritten
    assert side_effect.exists() == (payload == "torch.save")  # only the victim existed before
    assert "hubconf" not in sys.modules


def test_the_payloads_are_live_without_the_allow_list(tmp_path):
    """The refusal above is what protects: built unchecked, each payload has its effect."""
    payloads = _payloads(tmp_path)
    for name in ("torch.load", "torch.hub.load", "torch.save"):
        block, side_effect = payloads[name]
        import_object(block["class_path"])(**block["init_args"])  # unchecked
        assert side_effect.exists()
    assert (tmp_path / "victim.txt").read_bytes() != b"precious"


def test_a_nested_block_is_refused_even_inside_plain_mappings_and_lists(export_dir, tmp_path):
    config = json.loads((export_dir / "config.json").read_text())
    config["model"]["init_args"]["regularized_layers"] = [{"x": {"class_path": "os.system"}}]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ValueError, match=r"model\.init_args\.regularized_layers\[0\]\.x\.class_path='os"
    ):
        load_ensemble(tmp_path)


def test_an_allowed_backbone_alone_is_no_export(export_dir, tmp_path):
    config = json.loads((export_dir / "config.json").read_text())
    config["model"] = config["model"]["init_args"]["model"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ValueError,
        match=r"model\.class_path='torch_uncertainty\.models\..*"
        r"resnet' is no σNorm-Ensemble",
    ):
        load_ensemble(tmp_path)


# ------------------------------------------------------------------ untrusted exports, continued
def _set(path: str, value):
    """An edit of config.json setting the dotted ``path`` (``model.init_args.tau``)."""

    def edit(config: dict) -> None:
        *parents, leaf = path.split(".")
        node = config
        for parent in parents:
            node = node[parent]
        node[leaf] = value

    return edit


def _edit_config(edit):
    def apply(directory: Path) -> None:
        config = json.loads((directory / "config.json").read_text())
        edit(config)
        (directory / "config.json").write_text(json.dumps(config))

    return apply


def _write_config(data: bytes):
    def apply(directory: Path) -> None:
        (directory / "config.json").write_bytes(data)

    return apply


def _retyped_weights(dtype=None, nan: bool = False):
    """The weight files with their first convolution cast to ``dtype`` or set to NaN."""

    def apply(directory: Path) -> None:
        from safetensors.torch import load_file, save_file

        for path in (directory / "ensemble.safetensors", directory / "member_0.safetensors"):
            state = load_file(path)
            key = next(k for k, v in state.items() if v.is_floating_point() and v.dim() == 4)
            state[key] = state[key].fill_(float("nan")) if nan else state[key].to(dtype)
            save_file(state, path)

    return apply


def _replace_weights(make):
    def apply(directory: Path) -> None:
        (directory / "ensemble.safetensors").unlink()
        make(directory / "ensemble.safetensors", directory)

    return apply


def _device_node(path: Path, _directory: Path) -> None:
    import os
    import stat

    try:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
    except PermissionError:
        pytest.skip("creating a device node needs root")


def _symlink_to_other_export(path: Path, directory: Path) -> None:
    other = directory.parent / "other_export"
    other.mkdir()
    (other / "ensemble.safetensors").write_bytes(b"another export's weights")
    path.symlink_to(other / "ensemble.safetensors")


_ENSEMBLE_BLOCK = "model.init_args"
_BACKBONE_BLOCK = "model.init_args.model"
_REDOS = "(.*.*.*.*.*.*.*.*.*.*.*.*)*X"
#: (edit of a valid export, error, message): each is refused before anything is built.
UNTRUSTED_EXPORTS = {
    "torchvision pretrained=true": (
        _edit_config(
            _set(
                _BACKBONE_BLOCK,
                {
                    "class_path": "torchvision.models.resnet18",
                    "init_args": {"pretrained": True, "num_classes": 10},
                },
            )
        ),
        ValueError,
        r"model\.init_args\.model\.init_args\.pretrained=True: an export's weights are its own",
    ),
    "torchvision weights": (
        _edit_config(
            _set(
                _BACKBONE_BLOCK,
                {
                    "class_path": "torchvision.models.resnet18",
                    "init_args": {"weights": "IMAGENET1K_V1"},
                },
            )
        ),
        ValueError,
        r"init_args\.weights='IMAGENET1K_V1': an export's weights are its own",
    ),
    "FineTune checkpoint": (
        _edit_config(_set(f"{_ENSEMBLE_BLOCK}.checkpoint", "single.ckpt")),
        ValueError,
        r"init_args\.checkpoint='single\.ckpt'",
    ),
    "FineTune factory": (
        _edit_config(_set("model.class_path", "signorm_lab.models.finetune.finetune_ensemble")),
        ValueError,
        (
            r"model\.class_path='signorm_lab\.models\.finetune\.finetune_ensemble' loads "
            r"weights from elsewhere when built; an export names "
            r"torch_uncertainty_signorm\.signorm_ensemble"
        ),
    ),
    "bert_classifier without config": (
        _edit_config(
            _set(
                _BACKBONE_BLOCK,
                {
                    "class_path": "signorm_lab.models.backbones.bert_classifier",
                    "init_args": {"model_name": "some-org/remote-code-model", "pretrained": False},
                },
            )
        ),
        ValueError,
        (
            r"bert_classifier\) has no config: loading would read .* from a directory "
            r"or the hub"
        ),
    ),
    "timm_vit without pretrained": (
        _edit_config(
            _set(
                _BACKBONE_BLOCK,
                {
                    "class_path": "signorm_lab.models.backbones.timm_vit",
                    "init_args": {"model_name": "vit_tiny_patch16_224", "num_classes": 10},
                },
            )
        ),
        ValueError,
        r"timm_vit\) does not set pretrained=false: left out, it defaults to loading weights",
    ),
    "bert_classifier without pretrained": (
        _edit_config(
            _set(
                _BACKBONE_BLOCK,
                {
                    "class_path": "signorm_lab.models.backbones.bert_classifier",
                    "init_args": {"model_name": "some-org/model", "config": {"model_type": "bert"}},
                },
            )
        ),
        ValueError,
        r"bert_classifier\) does not set pretrained=false",
    ),
    "width_multiplier 400": (
        _edit_config(_set(f"{_BACKBONE_BLOCK}.init_args.width_multiplier", 400)),
        ValueError,
        (
            r"does not hold the model config.json describes: .*shape or dtype "
            r"mismatch.*Nothing was built"
        ),
    ),
    "num_estimators 1000": (
        _edit_config(
            lambda c: (
                _set("num_estimators", 1000)(c),
                _set(f"{_ENSEMBLE_BLOCK}.num_estimators", 1000)(c),
            )
        ),
        ValueError,
        r"num_estimators=1000, but .* holds the heads of 2 members",
    ),
    "num_estimators 10**7": (
        _edit_config(
            lambda c: (
                _set("num_estimators", 10**7)(c),
                _set(f"{_ENSEMBLE_BLOCK}.num_estimators", 10**7)(c),
            )
        ),
        ValueError,
        r"config.json: num_estimators=10000000 is more members than 1024",
    ),
    "BERT of 65,536 dimensions": (
        _edit_config(
            _set(
                _BACKBONE_BLOCK,
                {
                    "class_path": "signorm_lab.models.backbones.bert_classifier",
                    "init_args": {
                        "pretrained": False,
                        "config": {
                            "model_type": "bert",
                            "hidden_size": 65536,
                            "intermediate_size": 65536,
                            "num_attention_heads": 16,
                            "num_hidden_layers": 24,
                        },
                    },
                },
            )
        ),
        ValueError,
        r"num_hidden_layers=24, but .* holds 0 encoder layers\. Nothing was built",
    ),
    "catastrophic regex": (
        _edit_config(_set(f"{_ENSEMBLE_BLOCK}.regularized_layers", _REDOS)),
        ValueError,
        (
            r"regularized_layers='\(\.\*.*\)\*X' is a pattern; an "
            r"export holds the names"
        ),
    ),
    "FIFO weights": (
        _replace_weights(lambda path, _: __import__("os").mkfifo(path)),
        ValueError,
        r"ensemble\.safetensors' is not a regular file",
    ),
    "device weights": (
        _replace_weights(_device_node),
        ValueError,
        r"ensemble\.safetensors' is not a regular file",
    ),
    "directory weights": (
        _replace_weights(lambda path, _: path.mkdir()),
        ValueError,
        r"ensemble\.safetensors' is not a regular file",
    ),
    "symlink to another export": (
        _replace_weights(_symlink_to_other_export),
        ValueError,
        r"ensemble\.safetensors' leads out of the export folder",
    ),
    "class_path a list": (
        _edit_config(_set("model.class_path", ["os", "system"])),
        ValueError,
        r"model\.class_path must be a dotted class path .* got list",
    ),
    "class_path a dict": (
        _edit_config(_set("model.class_path", {"a": 1})),
        ValueError,
        r"model\.class_path must be a dotted class path .* got dict",
    ),
    "init_args a string": (
        _edit_config(_set("model.init_args", "num_estimators=2")),
        ValueError,
        r"model\.init_args must be a mapping .* got str",
    ),
    "top-level list": (
        _write_config(b"[1, 2]"),
        ValueError,
        r"config\.json' holds a JSON list; expected an object",
    ),
    "no model": (_edit_config(lambda c: c.pop("model")), ValueError, r"lacks 'model'"),
    "no members": (_edit_config(lambda c: c.pop("members")), ValueError, r"lacks 'members'"),
    "empty config.json": (_write_config(b""), ValueError, r"config\.json' is not valid JSON"),
    "config.json not UTF-8": (
        _write_config(b'{"format": "\xff\xfe"}'),
        ValueError,
        r"config\.json' is not UTF-8 text",
    ),
    "deeply nested": (
        _write_config(b'{"model": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        ValueError,
        r"config\.json' is nested too deeply",
    ),
    "nested 40 levels": (
        _write_config(b'{"model": ' + b"[" * 40 + b"]" * 40 + b"}"),
        ValueError,
        r"nested more than 32 levels",
    ),
    "float64 weights": (_retyped_weights(torch.float64), ValueError, r"dtype mismatch: .* F64"),
    "float16 weights": (_retyped_weights(torch.float16), ValueError, r"dtype mismatch: .* F16"),
    "int8 weights": (_retyped_weights(torch.int8), ValueError, r"dtype mismatch: .* I8"),
    "bool weights": (_retyped_weights(torch.bool), ValueError, r"dtype mismatch: .* BOOL"),
    "NaN weights": (
        _retyped_weights(nan=True),
        ValueError,
        r"holds non-finite values \(NaN or inf\) in backbone\.",
    ),
    "members a string": (
        _edit_config(_set("members", "member_0.safetensors")),
        ValueError,
        r"members='member_0\.safetensors'; expected a list",
    ),
    "num_estimators contradiction": (
        _edit_config(_set("num_estimators", 3)),
        ValueError,
        (
            r"num_estimators=3 but model\.init_args\.num_estimators=2; "
            r"they must agree"
        ),
    ),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", UNTRUSTED_EXPORTS, ids=list(UNTRUSTED_EXPORTS))
def test_an_untrusted_export_is_refused_before_anything_is_built(
    case, export_dir, tmp_path, monkeypatch
):
    """Code, downloads, memory or time it would take are refused with an error naming the
    file or value; nothing is fetched and no file changes."""
    import shutil
    import time

    def fetched(*args, **kwargs):
        raise AssertionError(f"loading an export fetched {args[:1]}")

    for name in (
        "torch.hub.load_state_dict_from_url",
        "transformers.AutoConfig.from_pretrained",
        "transformers.AutoModelForSequenceClassification.from_pretrained",
    ):
        monkeypatch.setattr(name, fetched)
    edit, error, message = UNTRUSTED_EXPORTS[case]
    bad = shutil.copytree(export_dir, tmp_path / "bad_export")
    edit(bad)
    before = _digest(tmp_path)
    start = time.perf_counter()
    for load in (load_ensemble, lambda directory: load_member(directory, 0)):
        with pytest.raises(error, match=message):
            load(bad)
    assert time.perf_counter() - start < 30  # refused, not attempted
    assert _digest(tmp_path) == before
