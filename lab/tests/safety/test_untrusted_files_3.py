"""Third attack pass on files from elsewhere: what a class path and a named file are (one rule for
the check and the parser), bounded reading (cyclic YAML aliases, atomic-group regexes, layer
counts, pipes swapped in) and one-line refusals of ``signorm-export``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from signorm_lab.safety import allowlist
from signorm_lab.safety.export_spec import (
    MAX_STACKED_LAYERS,
    check_ensemble_spec,
    check_layer_counts,
)
from signorm_lab.safety.files import UnboundedYAML, load_yaml
from signorm_lab.safety.patterns import check_pattern
from tests.fixtures.marker_module import assert_not_imported, marker_module

ROUTINE = "torch_uncertainty_signorm.routines.SigmaNormClassificationRoutine"
RESNET = "torch_uncertainty.models.classification.resnet"
BERT = "signorm_lab.models.backbones.bert_classifier"


def _backbone(**init_args) -> dict:
    return {
        "class_path": RESNET,
        "init_args": {
            "in_channels": 1,
            "num_classes": 10,
            "arch": 18,
            "style": "cifar",
            **init_args,
        },
    }


def _recipe(backbone: object) -> dict:
    model = {
        "class_path": "torch_uncertainty_signorm.signorm_ensemble",
        "init_args": {"model": backbone, "num_estimators": 2},
    }
    return {
        "routine": {"class_path": ROUTINE, "init_args": {"num_classes": 10, "model": model}},
        "data": {"class_path": "signorm_lab.datamodules.DigitsDataModule"},
    }


def _bert(**config) -> dict:
    return {
        "class_path": BERT,
        "init_args": {"num_classes": 10, "pretrained": False, "config": config},
    }


# ------------------------------------------------------------- 1. what a class path is
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("advcanary.é", True),
        ("payload_local.Ωmega", True),
        ("torch.nn.BatchNorm2d", True),
        ("vit_base_patch16_224.augreg_in21k", True),
        ("advcanary", False),
        ("a..b", False),
        ("1a.b", False),
        ("blocks/model.yaml", False),
        ("a.b ", False),
    ],
)
def test_a_class_path_is_what_jsonargparse_imports(value, expected):
    """Any dotted sequence of ``str.isidentifier()`` parts, whatever the script."""
    assert allowlist.is_class_path(value) is expected


def test_a_class_path_in_another_script_is_refused_unimported(tmp_path, monkeypatch):
    name, marker = marker_module(tmp_path, monkeypatch, "advcanary")
    with pytest.raises(
        ValueError,
        match=r"model.init_args.activation_fn='advcanary.é' is not "
        r"an allowed class path",
    ):
        allowlist.check_class_paths(
            {"class_path": RESNET, "init_args": {"activation_fn": "advcanary.é"}}, where="model"
        )
    with pytest.raises(ValueError, match=r"activation_fn='advcanary.é' is not an allowed"):
        allowlist.check_recipe(
            _recipe(_backbone(activation_fn="advcanary.é")), "recipe.yaml", folder=tmp_path
        )
    assert_not_imported(name, marker)


def test_a_module_beside_the_recipe_counts_as_importable(tmp_path, monkeypatch):
    """Not on ``sys.path`` now, but the parser works in the recipe's folder (``python -m``
    with ``PYTHONPATH=.`` or a ``''`` entry would import it from there)."""
    (tmp_path / "payload_local.py").write_text("raise SystemExit('ran')\n")
    monkeypatch.chdir(tmp_path.parent)
    with pytest.raises(ValueError, match=r"payload_local.é' is not an allowed class path"):
        allowlist.check_recipe(
            _recipe(_backbone(activation_fn="payload_local.é")), "recipe.yaml", folder=tmp_path
        )


# ------------------------------------------------------------- 2. which file a path names
def _evil_block(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(yaml.safe_dump({"class_path": "evil_marker.Evil"}))
    return folder / name


def test_a_file_named_in_a_block_file_is_read_from_that_files_folder(tmp_path, monkeypatch):
    """The parser reads ``backbone.yaml`` from ``blocks/``, where ``model.yaml`` names it; the
    check used to look for it beside the recipe and in the working directory."""
    _evil_block(tmp_path / "blocks", "backbone.yaml")
    (tmp_path / "blocks" / "model.yaml").write_text(
        yaml.safe_dump(
            {
                "class_path": "torch_uncertainty_signorm.signorm_ensemble",
                "init_args": {"model": "backbone.yaml", "num_estimators": 2},
            }
        )
    )
    recipe = _recipe(None)
    recipe["routine"]["init_args"]["model"] = "blocks/model.yaml"
    monkeypatch.chdir(tmp_path.parent)
    with pytest.raises(
        ValueError,
        match=r"routine.init_args.model.init_args.model.class_path="
        r"'evil_marker.Evil' is not an allowed class path",
    ):
        allowlist.check_recipe(recipe, "recipe.yaml", folder=tmp_path)


def test_a_home_relative_file_is_read_and_checked(tmp_path, monkeypatch):
    _evil_block(tmp_path / "home", "blk.yaml")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(ValueError, match=r"init_args.model.class_path='evil_marker.Evil'"):
        allowlist.check_recipe(_recipe("~/blk.yaml"), "recipe.yaml", folder=tmp_path / "r")


@pytest.mark.parametrize(
    "url",
    [
        "file://{path}",
        "file:{path}",
        "http://example.com/blk.yaml",
        "s3://bucket/blk.yaml",
        "simplecache::s3://bucket/blk.yaml",
    ],
)
def test_a_url_is_refused_never_read(url, tmp_path):
    path = _evil_block(tmp_path, "blk.yaml")
    value = url.format(path=path)
    with pytest.raises(
        ValueError,
        match=r"names a URL or a file: path, which the parser would "
        r"read unchecked",
    ):
        allowlist.check_recipe(_recipe(value), "recipe.yaml", folder=tmp_path)


def test_every_file_the_parser_reads_is_checked_as_it_is_read(tmp_path):
    """The guard around the parser: the text it gets is the text checked, a pipe swapped in for
    a checked file is refused at open, and a URL is never fetched."""
    from jsonargparse import Path as ParserPath

    from signorm_lab.safety.parser_reads import checked_parser_reads

    allowed = allowlist.RECIPE_CLASS_PATHS
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(_backbone()))
    evil = _evil_block(tmp_path, "evil.yaml")
    swapped = tmp_path / "swapped.yaml"
    swapped.write_text(yaml.safe_dump(_backbone()))
    allowlist.check_recipe(yaml.safe_load(swapped.read_text()), str(swapped), allowed, tmp_path)
    swapped.unlink()
    os.mkfifo(swapped)  # after the check, before the parser opens it
    start = time.perf_counter()
    with checked_parser_reads(allowed) as refusals:
        assert ParserPath(str(good), mode="fr").read_text() == good.read_text()
        with pytest.raises(ValueError, match=r"class_path='evil_marker.Evil' is not an allowed"):
            ParserPath(str(evil), mode="fr").read_text()
        with pytest.raises(ValueError, match=r"is a named pipe \(FIFO\); expected a YAML file"):
            ParserPath(str(swapped), mode="fr").read_text()
    assert len(refusals) == 2 and time.perf_counter() - start < 10
    assert ParserPath.read_text.__name__ == "read_text"  # put back
    assert ParserPath.read_text.__module__.startswith("jsonargparse")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_block_file_swapped_for_a_pipe_after_the_check_is_refused(tmp_path, monkeypatch):
    """The export command checks the recipe, then its parser opens the files it names: a block
    file replaced by a named pipe in between is refused, never waited on."""
    from signorm_lab.cli.export import main

    block = tmp_path / "model.yaml"
    _write(block, _recipe(_backbone())["routine"]["init_args"]["model"])
    recipe = _recipe(None)
    recipe["routine"]["init_args"]["model"] = "model.yaml"
    _write(tmp_path / "recipe.yaml", recipe)
    check = allowlist.check_recipe

    def check_then_swap(*args, **kwargs):
        check(*args, **kwargs)
        if block.is_file():  # checked: now a pipe takes its place
            block.unlink()
            os.mkfifo(block)

    monkeypatch.setattr(allowlist, "check_recipe", check_then_swap)
    monkeypatch.chdir(tmp_path)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"model.yaml.* named pipe"):
        main(["--config", "recipe.yaml", "--ckpt_path", "run.ckpt", "--output", "out"])
    assert time.perf_counter() - start < 60 and not (tmp_path / "out").exists()


# ----------------------------------------------------------------- 3. bounded reading
@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "text", ["a: &r [*r]", "a: &r {b: *r}", "a: &r [[1, *r]]", "x: &r\n  y: [1, {z: *r}]\n"]
)
def test_a_cyclic_yaml_alias_is_refused_at_once(text):
    with pytest.raises(UnboundedYAML, match=r"^recipe.yaml holds a cyclic YAML alias") as error:
        load_yaml(text, "recipe.yaml")
    assert "\n" not in str(error.value)


@pytest.mark.timeout(10)
def test_an_alias_used_twice_still_reads():
    assert load_yaml("a: &x [1, 2]\nb: [*x, *x]\n", "recipe.yaml") == {
        "a": [1, 2],
        "b": [[1, 2], [1, 2]],
    }


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "pattern",
    [
        r"(?>((.*)*)*X)",
        r"(?>(a+)+)$",
        r"(a*)*+",
        r"(?:a+)++$",
        r"(?:.*\.){2,}+x",
        r"(?>(?>a|b)*)*c",
    ],
)
def test_atomic_groups_and_possessive_repeats_are_walked(pattern):
    with pytest.raises(
        ValueError,
        match=r"inside a repeat, whose matching can take "
        r"exponential time",
    ):
        check_pattern("regularized_layers", pattern)


@pytest.mark.timeout(10)
def test_a_checkpoints_atomic_group_is_refused_before_test_ckpt_path_matches_it():
    """The route of ``test --ckpt_path``: the values a checkpoint brings are checked first."""
    from signorm_lab.safety.checkpoint_args import check_taken_arguments

    with pytest.raises(
        ValueError,
        match=r"ckpt_path='run.ckpt': routine.init_args.model."
        r"init_args.regularized_layers='\(\?>",
    ):
        check_taken_arguments(
            "run.ckpt", {"model.init_args.regularized_layers": r"(?>((.*)*)*X)"}, ROUTINE, {}
        )


@pytest.mark.parametrize("pattern", [r"(?>layer1)\.bn\d", r"layer[34]\.\d++\.bn2"])
def test_simple_atomic_and_possessive_patterns_are_kept(pattern):
    assert check_pattern("regularized_layers", pattern) == pattern


_BART = {"model_type": "bart", "encoder_layers": 12, "decoder_layers": 12, "d_model": 768}
_ALBERT = {
    "model_type": "albert",
    "num_hidden_layers": 12,
    "num_hidden_groups": 1,
    "inner_group_num": 1,
    "hidden_size": 768,
}


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("config", "refused"),
    [
        ({**_BART, "encoder_layers": 100_000}, r"config.encoder_layers=100000 repeats a layer"),
        ({**_BART, "decoder_layers": 10**9}, r"config.decoder_layers=1000000000 repeats a layer"),
        (
            {**_ALBERT, "num_hidden_groups": 64, "inner_group_num": 64},
            rf"config stacks 49152 layers .*at most {MAX_STACKED_LAYERS}",
        ),
        ({**_ALBERT, "inner_group_num": -1}, r"config.inner_group_num=-1 repeats a layer"),
        ({"model_type": "funnel", "block_sizes": [100, 100]}, r"block_sizes=\[100, 100\]"),
        (
            {"model_type": "blip", "text_config": {"num_hidden_layers": 5000}},
            r"config.text_config.num_hidden_layers=5000",
        ),
    ],
)
def test_an_exports_layer_counts_are_bounded_before_building(config, refused):
    spec = {
        "class_path": "torch_uncertainty_signorm.signorm_ensemble",
        "init_args": {"model": _bert(**config), "num_estimators": 2},
    }
    with pytest.raises(ValueError, match=refused):
        check_ensemble_spec(spec)


def test_real_architectures_layer_counts_pass():
    for config in (
        _BART,
        _ALBERT,
        {"model_type": "t5", "num_layers": 24, "num_decoder_layers": 24},
    ):
        check_layer_counts({"init_args": {"model": _bert(**config)}})


# ------------------------------------------------------------------ 4. unclear errors
@pytest.mark.parametrize("state", ["log_tau", 3.0, [1.0, 2.0], None.__class__])
def test_a_tau_state_that_is_not_a_mapping_is_refused_in_one_line(state):
    from torch_uncertainty_signorm.signorm.diversity_target import DiversityTarget

    controller = DiversityTarget(0.5, 0.1, 100)
    with pytest.raises(ValueError, match=r"τ controller state is .*, not a mapping"):
        controller.load_state_dict(state)


def _fifo_folder(root: Path) -> Path:
    folder = root / "fifo_out"
    (folder / "notes").mkdir(parents=True)
    os.mkfifo(folder / "notes" / "pipe")
    return folder


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda root: root / "file.txt", r"is a regular file, not a folder"),
        (lambda root: Path("."), r"is the working directory or a parent of it"),
        (lambda root: root / "sub" / "..", r"is the working directory or a parent of it"),
        (lambda root: root / "link", r"is a symbolic link"),
        (_fifo_folder, r"holds '.*pipe', a named pipe \(FIFO\), which an export cannot carry"),
    ],
)
def test_an_output_that_cannot_take_an_export_is_named(make, said, tmp_path, monkeypatch):
    from signorm_lab.export.writing import output_directory

    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("notes")
    (tmp_path / "sub").mkdir()
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(ValueError, match=said) as error:
        output_directory(make(tmp_path), overwrite=True)
    assert "\n" not in str(error.value)


# ------------------------------------------- 5. the export command, as a user meets it
_DRIVER = """
import contextlib, io, json, os, sys, time
from signorm_lab.cli.export import command
for name, argv, debug in json.loads(sys.argv[1]):
    os.environ.pop("SIGNORM_DEBUG", None)
    if debug:
        os.environ["SIGNORM_DEBUG"] = "1"
    stderr, start = io.StringIO(), time.perf_counter()
    try:
        with contextlib.redirect_stderr(stderr):
            status = command(argv)
    except BaseException as error:
        status = f"raised {type(error).__name__}"
    print(json.dumps([name, status, stderr.getvalue(), time.perf_counter() - start]), flush=True)
"""


def _write(path: Path, content: object) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        content if isinstance(content, str) else yaml.safe_dump(content, allow_unicode=True)
    )
    return path.name


_REFUSED = "is not an allowed class path, so it is not imported"
_ACTIVATION = "routine.init_args.model.init_args.model.init_args.activation_fn"
#: {case: (the export command's arguments, what its one line must say)}
_EXPORT_CASES = {
    "unicode class path": (
        ["--config", "unicode.yaml", "--output", "o1"],
        f"unicode.yaml: {_ACTIVATION}='advcanary.é' {_REFUSED}",
    ),
    "unicode class path in a base file": (
        ["--config", "with_base.yaml", "--output", "o2"],
        f"base_unicode.yaml: {_ACTIVATION}='advcanary.é' {_REFUSED}",
    ),
    "a file named in a block file": (
        ["--config", "nested.yaml", "--output", "o3"],
        f"init_args.model.class_path='evil_marker.Evil' {_REFUSED}",
    ),
    "a home-relative file": (
        ["--config", "home_file.yaml", "--output", "o4"],
        f"model.class_path='evil_marker.Evil' {_REFUSED}",
    ),
    "a file:// path": (
        ["--config", "file_url.yaml", "--output", "o5"],
        "names a URL or a file: path",
    ),
    "a cyclic alias": (["--config", "cyclic.yaml", "--output", "o6"], "holds a cyclic YAML alias"),
    "BART encoder layers": (
        ["--config", "bart.yaml", "--output", "o7"],
        "config.encoder_layers=100000 repeats a layer 100000 times",
    ),
    "ALBERT inner groups": (
        ["--config", "albert.yaml", "--output", "o8"],
        "config stacks 49152 layers",
    ),
    "a model larger than its checkpoint": (
        ["--config", "wide.yaml", "--output", "o9"],
        "checkpoint='run.ckpt' does not fit",
    ),
    "a missing recipe": (
        ["--config", "missing.yaml", "--output", "o10"],
        "--config 'missing.yaml' does not exist.",
    ),
    "--output naming a file": (
        ["--config", "unicode.yaml", "--output", "a_file"],
        "'a_file' is a regular file, not a folder",
    ),
    "--output .": (
        ["--config", "unicode.yaml", "--output", "."],
        "'.' is the working directory or a parent of it",
    ),
    "--output a symlink": (
        ["--config", "unicode.yaml", "--output", "link", "--overwrite"],
        "'link' is a symbolic link",
    ),
    "--output holding a FIFO": (
        ["--config", "unicode.yaml", "--output", "fifo_out", "--overwrite"],
        "a named pipe (FIFO), which an export",
    ),
}


def _export_files(root: Path) -> None:
    """The recipes, blocks, checkpoint and outputs of :data:`_EXPORT_CASES`."""
    _write(root / "home" / "blk.yaml", {"class_path": "evil_marker.Evil"})
    _write(root / "abs_blk.yaml", {"class_path": "evil_marker.Evil"})
    unicode_recipe = _recipe(_backbone(activation_fn="advcanary.é"))
    _write(root / "unicode.yaml", unicode_recipe)
    _write(root / "base_unicode.yaml", {"routine": unicode_recipe["routine"]})
    _write(root / "with_base.yaml", {"base": "base_unicode.yaml", "data": unicode_recipe["data"]})
    _write(root / "blocks" / "backbone.yaml", {"class_path": "evil_marker.Evil"})
    _write(
        root / "blocks" / "model.yaml",
        {
            "class_path": "torch_uncertainty_signorm.signorm_ensemble",
            "init_args": {"model": "backbone.yaml", "num_estimators": 2},
        },
    )
    nested = _recipe(None)
    nested["routine"]["init_args"]["model"] = "blocks/model.yaml"
    _write(root / "nested.yaml", nested)
    _write(root / "home_file.yaml", _recipe("~/blk.yaml"))
    _write(root / "file_url.yaml", _recipe(f"file://{root / 'abs_blk.yaml'}"))
    _write(root / "cyclic.yaml", "loop: &r [*r]\n" + yaml.safe_dump(_recipe(_backbone())))
    _write(root / "bart.yaml", _recipe(_bert(**{**_BART, "encoder_layers": 100_000})))
    _write(
        root / "albert.yaml",
        _recipe(_bert(**{**_ALBERT, "num_hidden_groups": 64, "inner_group_num": 64})),
    )
    # few layers, each huge: sized on the meta device against the checkpoint, never allocated
    wide = {
        "model_type": "bert",
        "num_hidden_layers": 2,
        "hidden_size": 1 << 15,
        "intermediate_size": 1 << 17,
        "num_attention_heads": 8,
        "vocab_size": 1 << 16,
    }
    _write(root / "wide.yaml", _recipe(_bert(**wide)))
    torch.save({"state_dict": {"model.w": torch.zeros(1)}}, root / "run.ckpt")
    (root / "a_file").write_text("notes")
    (root / "target").mkdir()
    (root / "link").symlink_to(root / "target")
    _fifo_folder(root)


@pytest.fixture(scope="module")
def export_answers(tmp_path_factory) -> tuple[dict, Path]:
    """Every case given to the export command in one interpreter (markers importable from
    PYTHONPATH, HOME a folder of the case): {case: (exit status, stderr, seconds)}."""
    root = tmp_path_factory.mktemp("export_3")
    markers = [root / "site" / f"{name}.imported" for name in ("advcanary", "evil_marker")]
    for marker in markers:
        _write(
            marker.with_suffix(".py"),
            f"from pathlib import Path\nPath({str(marker)!r}).touch()\nclass Evil:\n    pass\n",
        )
    _export_files(root)
    argv = [
        [name, [*arguments, "--ckpt_path", "run.ckpt"], False]
        for name, (arguments, _) in _EXPORT_CASES.items()
    ]
    argv.append(
        ["debug", ["--config", "missing.yaml", "--ckpt_path", "run.ckpt", "--output", "o11"], True]
    )
    (root / "driver.py").write_text(_DRIVER)
    path = os.pathsep.join([str(root / "site"), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "driver.py", json.dumps(argv)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={
            **os.environ,
            "PYTHONPATH": path,
            "HOME": str(root / "home"),
            "OMP_NUM_THREADS": "1",
            "PYTHONWARNINGS": "ignore",
        },
    )
    answers = {
        name: (status, stderr, seconds)
        for name, status, stderr, seconds in map(json.loads, done.stdout.splitlines())
    }
    assert set(answers) == {*_EXPORT_CASES, "debug"}, done.stderr[-3000:]
    assert not any(marker.exists() for marker in markers), "a class path was imported"
    return answers, root


@pytest.mark.slow
@pytest.mark.parametrize("case", list(_EXPORT_CASES))
def test_each_export_refusal_is_one_line(case, export_answers):
    """Refused on one line naming the input and what is valid, exit status 1, in seconds, and
    nothing written where the export would go."""
    answers, root = export_answers
    status, stderr, seconds = answers[case]
    said = _EXPORT_CASES[case][1]
    assert status == 1, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("signorm-export: "), stderr
    assert said in stderr
    assert seconds < 60
    output = _EXPORT_CASES[case][0][3]
    assert not (root / output).exists() or output in ("a_file", ".", "link", "fifo_out")


@pytest.mark.slow
def test_signorm_debug_shows_the_whole_traceback(export_answers):
    status, stderr, _ = export_answers[0]["debug"]
    assert status == "raised FileNotFoundError" and stderr == ""


@pytest.mark.slow
def test_python_m_with_the_recipes_folder_on_the_path_imports_nothing_of_it(tmp_path):
    """``PYTHONPATH=.`` and ``python -m``: a ``payload_local.py`` shipped beside the recipe,
    named in another script's letters."""
    marker = tmp_path / "payload_local.imported"
    _write(
        tmp_path / "payload_local.py", f"from pathlib import Path\nPath({str(marker)!r}).touch()\n"
    )
    _write(tmp_path / "recipe.yaml", _recipe(_backbone(activation_fn="payload_local.é")))
    path = os.pathsep.join([".", os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "signorm_lab.cli.export",
            "--config",
            "recipe.yaml",
            "--ckpt_path",
            "run.ckpt",
            "--output",
            "out",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"},
    )
    assert not marker.exists(), done.stderr[-2000:]
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr[-2000:]
    assert "activation_fn='payload_local.é' is not an allowed class path" in done.stderr


@pytest.mark.slow
def test_torch_uncertainty_refuses_a_cyclic_recipe_in_one_line(tmp_path):
    (tmp_path / "cyclic.yaml").write_text("a: &r [*r]\n")
    start = time.perf_counter()
    done = subprocess.run(
        [str(Path(sys.executable).parent / "torch-uncertainty"), "fit", "--config", "cyclic.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") <= 1 and "holds a cyclic YAML alias" in done.stderr, done.stderr[
        -2000:
    ]
    assert time.perf_counter() - start < 120
