"""signorm-compare's pieces: the comparison file, the class-frequency baseline, the learned check,
the paired statistics and the verdict each table cell gives."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.weightstats import ttost_paired

from signorm_lab.callbacks.run_record import FIT_KEYS, REQUEST_ENV, package_versions
from signorm_lab.reproduction import comparison as cmp
from signorm_lab.reproduction.paired import equivalence_test, mean_interval
from signorm_lab.reproduction.runs import read_results

EXPERIMENTS = Path(__file__).parents[3] / "experiments"


def _file(tmp_path: Path, text: str) -> Path:
    (tmp_path / "a.yaml").write_text("trainer: {}\n")
    path = tmp_path / "cmp.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("reference: a\nseeds: [0]\nmethods: {a: a.yaml, b: a.yaml}\nextra: 1\n", "unknown key"),
        ("reference: c\nseeds: [0]\nmethods: {a: a.yaml, b: a.yaml}\n", "'c' is not one of"),
        ("reference: a\nseeds: [0, 0]\nmethods: {a: a.yaml, b: a.yaml}\n", "distinct integers"),
        ("reference: a\nseeds: [-1]\nmethods: {a: a.yaml, b: a.yaml}\n", "distinct integers"),
        ("reference: a\nseeds: [0]\nmethods: {a: a.yaml}\n", "at least two methods"),
        (
            "reference: a\nseeds: [0]\nmethods: {a: a.yaml, b: missing.yaml}\n",
            "'missing.yaml' is not a file",
        ),
        (
            "reference: a\nseeds: [0]\nmethods: {a: a.yaml, b: {recipe: a.yaml, args: x}}\n",
            "list of strings",
        ),
        (
            (
                "reference: a\nseeds: [0]\nmethods: {a: a.yaml, b: {recipe: a.yaml, args: "
                "[--seed_everything=5]}}\n"
            ),
            "'--seed_everything=5' is set by signorm-compare",
        ),
    ],
)
def test_a_bad_comparison_file_is_refused_naming_the_key_and_value(tmp_path, text, message):
    with pytest.raises(ValueError, match=message):
        cmp.read_comparison(_file(tmp_path, text))


@pytest.mark.parametrize(
    "label", ["A\\nσN-Ens better", "B\\e[2J", "A\\rB", "A\\u2028B", "A\\u202eB"]
)
def test_a_label_with_a_control_character_is_refused_naming_its_key(tmp_path, label):
    methods = f'{{a: a.yaml, b: {{recipe: a.yaml, label: "{label}"}}}}'
    path = _file(tmp_path, f"reference: a\nseeds: [0]\nmethods: {methods}\n")
    with pytest.raises(ValueError, match=r"methods.b.label: .* holds the control character"):
        cmp.read_comparison(path)


def test_the_packaged_comparisons_read_and_name_existing_recipes():
    for path in sorted((EXPERIMENTS / "compare").glob("*.yaml")):
        comparison = cmp.read_comparison(path)
        assert comparison.reference == "signorm", path
        assert all(spec["recipe"].is_file() for spec in comparison.methods.values())


def test_class_frequency_baseline_is_the_majority_accuracy_and_prior_nll():
    record = {
        "train_class_counts": {"0": 60, "1": 30, "2": 10},
        "test_class_counts": {"0": 5, "1": 3, "2": 2},
    }
    accuracy, nll = cmp.class_frequency_baseline(record)
    assert accuracy == pytest.approx(0.5)
    assert nll == pytest.approx(-(5 * math.log(0.6) + 3 * math.log(0.3) + 2 * math.log(0.1)) / 10)


def test_a_run_at_the_class_frequencies_or_with_a_majority_member_has_not_learned():
    record = {"train_class_counts": {"0": 50, "1": 50}, "test_class_counts": {"0": 50, "1": 50}}
    prior = math.log(2)
    trained = {"test/cls/Acc": 0.9, "test/cls/NLL": 0.3}
    assert cmp.learned(trained, record)[0]
    assert not cmp.learned({"test/cls/Acc": 0.53, "test/cls/NLL": 0.3}, record)[0]
    assert not cmp.learned({"test/cls/Acc": 0.9, "test/cls/NLL": prior - 0.01}, record)[0]
    one_dead = {**trained, "test/member_0/Acc": 0.9, "test/member_1/Acc": 0.5}
    ok, text = cmp.learned(one_dead, record)
    assert not ok and "worst member's acc +0.0 points" in text


def test_mean_interval_is_students_t_and_tost_needs_the_interval_inside_the_margin():
    d = [0.01, -0.02, 0.015, 0.0, -0.005]
    row = mean_interval(d)
    half = stats.t.ppf(0.975, 4) * np.std(d, ddof=1) / math.sqrt(5)
    assert (row["low"], row["high"]) == pytest.approx((np.mean(d) - half, np.mean(d) + half))
    assert equivalence_test(d, 0.05) < 0.05  # the 90 % interval lies inside ±0.05
    assert equivalence_test(d, 0.01) > 0.05  # but not inside ±0.01
    assert equivalence_test([x + 0.1 for x in d], 0.05) > 0.5  # clearly outside
    with pytest.raises(ValueError, match="margin must be a positive"):
        equivalence_test(d, 0)


def test_tost_is_statsmodels_paired_tost_on_the_per_seed_differences():
    # Two arms' NLL at five seeds: the TOST of the differences is the paired TOST of the arms.
    a = np.array([0.080, 0.142, 0.095, 0.071, 0.103])
    b = np.array([0.062, 0.271, 0.088, 0.055, 0.066])
    for margin in (0.02, 0.05, 0.2):
        expected = ttost_paired(a, b, -margin, margin)[0]
        assert equivalence_test(a - b, margin) == pytest.approx(float(expected), rel=1e-12)


def _comparison(tmp_path: Path, methods=("a", "b", "c"), args=()) -> cmp.Comparison:
    recipe = tmp_path / "r.yaml"
    if not recipe.exists():
        recipe.write_text("trainer: {}\n")
    spec = {"recipe": recipe, "label": "x", "args": ()}
    return cmp.Comparison(
        tmp_path / "c.yaml", dict.fromkeys(methods, spec), methods[0], (0, 1), tuple(args)
    )


def _record(comparison, method, seed, extra=(), **fields) -> dict:
    """A finished run's record, of the request ``comparison`` makes for ``method`` at ``seed``."""
    return {
        "params_total": 10,
        "params_trainable": 10,
        "optimizer_steps": 2,
        "fit_seconds": 1.0,
        "test_seconds": 1.0,
        "train_class_counts": {"0": 2},
        "test_class_counts": {"0": 2},
        "provenance": {"versions": package_versions()},
        "request": cmp.request(comparison, method, seed, extra),
        "seed": seed,
        **fields,
    }


def _run(out, method, seed, record, version=0, results="test/cls/Acc\n0.9\n") -> Path:
    """A run's version folder holding ``record`` and, when given, ``results``."""
    folder = cmp.run_folder(out, method, seed) / f"version_{version}"
    folder.mkdir(parents=True)
    (folder / "run_record.json").write_text(json.dumps(record))
    if results:
        (folder / "results.csv").write_text(results)
    return folder


@pytest.fixture
def calls(monkeypatch):
    """The command lines ``train`` runs (each exits 0 without running)."""
    made = []
    skip = len(cmp._command())
    monkeypatch.setattr(cmp, "_run", lambda argv, lock, asked: made.append(argv[skip:]) or 0)
    return made


def test_a_rerun_reuses_finished_runs_and_resumes_an_interrupted_one(tmp_path, monkeypatch, calls):
    """What `train` hands the command: nothing for a finished run, `--ckpt_path` of the
    interruption checkpoint for an interrupted one, a plain fit otherwise."""
    comparison, out = _comparison(tmp_path), tmp_path / "out"
    _run(out, "a", 0, _record(comparison, "a", 0))
    started = {"request": cmp.request(comparison, "b", 0), "seed": 0, "fit_seconds": None}
    interrupted = _run(out, "b", 0, started, results="") / "checkpoints"
    interrupted.mkdir()
    (interrupted / "interrupted.ckpt").write_bytes(b"")
    cmp.train(comparison, out, ["a", "b", "c"], [0])
    assert len(calls) == 2  # "a" reused
    assert f"--ckpt_path={interrupted / 'interrupted.ckpt'}" in calls[0]
    assert not any(arg.startswith("--ckpt_path") for arg in calls[1])
    assert "--seed_everything=0" in calls[1] and "--config" in calls[1]
    monkeypatch.setattr(cmp, "_run", lambda argv, lock, asked: 130)
    with pytest.raises(RuntimeError, match=r"the x run at seed 0 exited with code 130.*resume"):
        cmp.train(comparison, out, ["c"], [0])


def test_every_run_logs_where_the_comparison_reads_it_whatever_its_recipes_logger(
    tmp_path, calls, capsys
):
    """A recipe logging to MLflow (no save_dir/name/version layout) runs under the comparison:
    the logger's class is set before its folder, so another class's arguments are dropped, and
    the comparison says so."""
    comparison, out = _comparison(tmp_path, methods=("a",)), tmp_path / "out"
    mlflow = "lightning.pytorch.loggers.MLFlowLogger"
    (tmp_path / "r.yaml").write_text(f"trainer:\n  logger: {{class_path: {mlflow}}}\n")
    cmp.train(comparison, out, ["a"], [0])
    assert f"x: its recipe logs with {mlflow}; the comparison logs" in capsys.readouterr().out
    (argv,) = calls
    logger = argv.index("--trainer.logger=lightning.pytorch.loggers.TensorBoardLogger")
    assert logger < argv.index(f"--trainer.logger.init_args.save_dir={out / 'a'}")


def _lr(tmp_path, comparison):
    (tmp_path / "r.yaml").write_text("trainer: {}\noptimizer: {lr: 0.5}\n")
    return comparison


@pytest.mark.parametrize(
    ("change", "difference"),
    [
        (_lr, "recipe file r.yaml changed"),
        (
            lambda tmp_path, c: dataclasses.replace(c, args=("--trainer.limit_train_batches=3",)),
            "option 1: --trainer.limit_train_batches=2 then, --trainer.limit_train_batches=3 now",
        ),
    ],
    ids=["recipe lr edited", "comparison batch count changed"],
)
def test_a_run_of_other_settings_is_trained_anew_and_found_again_when_they_come_back(
    tmp_path, capsys, calls, change, difference
):
    comparison = _comparison(tmp_path, args=("--trainer.limit_train_batches=2",))
    out = tmp_path / "out"
    old = _run(out, "a", 0, _record(comparison, "a", 0))
    changed = change(tmp_path, comparison)
    cmp.train(changed, out, ["a"], [0])
    assert len(calls) == 1 and not any(a.startswith("--ckpt_path") for a in calls[0])
    assert f"{old} was run with other settings ({difference}" in capsys.readouterr().out
    _run(out, "a", 0, _record(changed, "a", 0), version=1, results="test/cls/Acc\n0.7\n")
    assert cmp.collect(changed, out, ["a"], [0])["a"].folders[0].name == "version_1"
    (tmp_path / "r.yaml").write_text("trainer: {}\n")  # the settings of before, again
    assert cmp.collect(comparison, out, ["a"], [0])["a"].folders[0] == old
    with pytest.raises(ValueError, match=r"version_1 differs from this request \("):
        cmp.collect(comparison, out, ["a"], [0], ["--trainer.max_steps=2"])


def test_a_run_of_other_options_or_package_versions_is_not_reused(tmp_path, capsys, calls):
    """Options after '--' and the installed versions decide a run too; options that decide
    nothing (--eval_after_fit) do not."""
    comparison, out = _comparison(tmp_path, methods=("a", "b")), tmp_path / "out"
    _run(out, "a", 0, _record(comparison, "a", 0, ["--trainer.max_steps=4"]))
    older = _record(
        comparison, "b", 0, provenance={"versions": package_versions() | {"torch": "0.1"}}
    )
    _run(out, "b", 0, older)
    cmp.train(comparison, out, ["a", "b"], [0], ["--trainer.max_steps=5", "--eval_after_fit=false"])
    printed = capsys.readouterr().out
    assert "option 1: --trainer.max_steps=4 then, --trainer.max_steps=5 now" in printed
    assert f"torch 0.1 then, {package_versions()['torch']} now" in printed
    assert len(calls) == 2
    calls.clear()
    cmp.train(comparison, out, ["a"], [0], ["--eval_after_fit", "false", "--trainer.max_steps=4"])
    assert calls == []


def test_an_edited_base_file_of_a_recipe_makes_another_request(tmp_path):
    (tmp_path / "base.yaml").write_text("trainer: {max_epochs: 1}\n")
    (tmp_path / "r.yaml").write_text("base: base.yaml\ntrainer: {}\n")
    comparison = _comparison(tmp_path)
    before = cmp.request(comparison, "a", 0)
    (tmp_path / "base.yaml").write_text("trainer: {max_epochs: 2}\n")
    difference = cmp._difference({"request": before}, cmp.request(comparison, "a", 0))
    assert difference.startswith("recipe file base.yaml changed")


def _nested(tmp_path, monkeypatch):
    (tmp_path / "r.yaml").write_text("trainer: {}\ndata: data.yaml\n")
    (tmp_path / "data.yaml").write_text("batch_size: 64\n")
    return [], lambda: (tmp_path / "data.yaml").write_text("batch_size: 16\n")


def _option_file(tmp_path, monkeypatch):
    (tmp_path / "t.yaml").write_text("limit_val_batches: 1\n")
    edit = (tmp_path / "t.yaml").write_text
    return [f"--trainer={tmp_path / 't.yaml'}"], lambda: edit("limit_val_batches: 2\n")


def _environment(tmp_path, monkeypatch):
    monkeypatch.setenv("JSONARGPARSE_DEFAULT_ENV", "true")
    return [], lambda: monkeypatch.setenv("PL_FIT__TRAINER__MAX_STEPS", "1")


def _flag_then_option(tmp_path, monkeypatch):
    options = ["--eval_after_fit", "--trainer.max_epochs=1"]
    return options, lambda: options.__setitem__(1, "--trainer.max_epochs=50")


@pytest.mark.parametrize(
    ("setup", "difference"),
    [
        (_nested, "recipe file data.yaml changed"),
        (_option_file, "recipe file t.yaml changed"),
        (_environment, "environment variable PL_FIT__TRAINER__MAX_STEPS: None then, '1' now"),
        (_flag_then_option, "option 1: --trainer.max_epochs=1 then, --trainer.max_epochs=50 now"),
    ],
    ids=["a file a recipe's value names", "a file an option names", "PL_ variables", "a flag"],
)
def test_what_the_command_reads_beside_the_options_decides_the_run_too(
    tmp_path, monkeypatch, setup, difference
):
    """jsonargparse reads nested files, option files and (with JSONARGPARSE_DEFAULT_ENV) the
    environment; a flag of no value (--eval_after_fit) does not hide the option after it."""
    comparison = _comparison(tmp_path)
    options, change = setup(tmp_path, monkeypatch)
    before = cmp.request(comparison, "a", 0, options)
    change()
    now = cmp.request(comparison, "a", 0, options)
    assert cmp._difference({"request": before}, now).startswith(difference)


def test_a_recipe_renamed_says_so(tmp_path):
    comparison = _comparison(tmp_path)
    before = cmp.request(comparison, "a", 0)
    (tmp_path / "r.yaml").rename(tmp_path / "s.yaml")
    moved = dataclasses.replace(
        comparison, methods={"a": {"recipe": tmp_path / "s.yaml", "label": "x", "args": ()}}
    )
    difference = cmp._difference({"request": before}, cmp.request(moved, "a", 0))
    assert difference == "recipe file r.yaml then, s.yaml now (the same contents, renamed)"


def test_the_seed_wins_over_a_config_among_the_options_and_every_seed_is_its_own_run(
    tmp_path, calls
):
    comparison, out = _comparison(tmp_path, methods=("a", "b")), tmp_path / "out"
    (tmp_path / "seed.yaml").write_text("seed_everything: 0\n")
    cmp.train(comparison, out, ["a"], [0, 1], ["--config", str(tmp_path / "seed.yaml")])
    for seed, argv in zip((0, 1), calls, strict=True):
        assert argv.index(f"--seed_everything={seed}") > argv.index(str(tmp_path / "seed.yaml"))
    asked = cmp.request(comparison, "a", 1, ["--config", str(tmp_path / "seed.yaml")])
    assert asked["seed"] == 1 and [name for name, _ in asked["recipes"]] == ["r.yaml", "seed.yaml"]


def test_a_run_whose_saved_seed_is_not_its_folders_is_refused(tmp_path, calls):
    """`cp -r seed_0 seed_1`, a seed_1 run whose config.yaml says seed 0, and one whose
    config.yaml was edited after the run."""
    comparison, out = _comparison(tmp_path), tmp_path / "out"
    run = _run(out, "a", 0, _record(comparison, "a", 0))
    shutil.copytree(run.parent, cmp.run_folder(out, "a", 1))
    with pytest.raises(ValueError, match=r"seed_1/version_0: its run was seeded with 0 but lies"):
        cmp.train(comparison, out, ["a"], [0, 1])
    with pytest.raises(ValueError, match="seeded with 0 but lies in seed_1"):
        cmp.collect(comparison, out, ["a"], [1])
    edited = _run(out, "b", 1, _record(comparison, "b", 1))
    (edited / "config.yaml").write_text("seed_everything: 0\n")
    with pytest.raises(ValueError, match="seeded with 0 but lies in seed_1"):
        cmp.collect(comparison, out, ["b"], [1])
    saved = hashlib.sha256(b"seed_everything: 1\n").hexdigest()
    edited = _run(out, "c", 1, _record(comparison, "c", 1, config_sha256=saved))
    (edited / "config.yaml").write_text("seed_everything: 1\noptimizer: {lr: 9}\n")
    with pytest.raises(ValueError, match=r"config.yaml: not the configuration this run saved"):
        cmp.collect(comparison, out, ["c"], [1])
    assert calls == []  # seed 0 reused, then the copy refused


def _fitted(comparison, out, seed) -> Path:
    """A run at ``seed`` whose fit ended (its best checkpoint saved) and whose test did not."""
    folder = cmp.run_folder(out, "a", seed) / "version_0"
    (folder / "checkpoints").mkdir(parents=True)
    best = folder / "checkpoints" / "best.ckpt"
    best.write_bytes(f"weights of seed {seed}".encode())
    record = _record(
        comparison, "a", seed, test_seconds=None, best_checkpoint="checkpoints/best.ckpt"
    )
    record["best_checkpoint_sha256"] = hashlib.sha256(best.read_bytes()).hexdigest()
    (folder / "run_record.json").write_text(json.dumps(record))
    return best


@pytest.mark.parametrize("replace", ["hard link", "symbolic link", "copy", "not a checkpoint"])
def test_a_best_checkpoint_not_saved_by_its_fit_is_refused_not_tested(tmp_path, calls, replace):
    comparison, out = _comparison(tmp_path), tmp_path / "out"
    seed_0 = _fitted(comparison, out, 0)
    cmp.train(comparison, out, ["a"], [0])
    assert calls[-1][0] == "test" and f"--ckpt_path={seed_0}" in calls[-1]
    seed_1 = _fitted(comparison, out, 1)
    seed_1.unlink()
    {
        "hard link": lambda: os.link(seed_0, seed_1),
        "symbolic link": lambda: seed_1.symlink_to(seed_0),
        "copy": lambda: shutil.copy(seed_0, seed_1),
        "not a checkpoint": lambda: seed_1.write_bytes(b"\x00" * 5),
    }[replace]()
    with pytest.raises(ValueError, match=r"best.ckpt: not the checkpoint this run's fit saved"):
        cmp.train(comparison, out, ["a"], [1])
    assert len(calls) == 1


def test_a_test_of_a_best_checkpoint_that_fails_says_to_train_the_run_anew(tmp_path, monkeypatch):
    comparison, out = _comparison(tmp_path), tmp_path / "out"
    best = _fitted(comparison, out, 0)
    monkeypatch.setattr(cmp, "_run", lambda argv, lock, asked: 1)
    with pytest.raises(RuntimeError, match=rf"testing {best} .* move .*version_0 away"):
        cmp.train(comparison, out, ["a"], [0])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda f: (f / "run.lock").symlink_to(f / "elsewhere"), "run.lock: a symbolic link"),
        (lambda f: (f / "run.lock").mkdir(), "run.lock: Is a directory"),
        (lambda f: f.rmdir() or f.write_text("x"), "seed_0: is a file, not a run folder"),
    ],
    ids=["lock a symlink", "lock a folder", "seed folder a file"],
)
def test_a_run_folder_that_cannot_be_one_is_refused_in_one_line(tmp_path, calls, make, message):
    comparison, out = _comparison(tmp_path), tmp_path / "out"
    folder = cmp.run_folder(out, "a", 0)
    folder.mkdir(parents=True)
    make(folder)
    with pytest.raises((RuntimeError, ValueError), match=message) as error:
        cmp.train(comparison, out, ["a"], [0])
    assert "\n" not in str(error.value) and calls == []


def test_a_version_folder_not_numbered_in_ascii_digits_is_no_version(tmp_path):
    for name in ("version_²", "version_٣", "version_1", "version_x"):
        (tmp_path / name).mkdir()
    assert cmp._versions(tmp_path) == [tmp_path / "version_1"]


@pytest.mark.parametrize(
    ("results", "message"),
    [
        ("test/cls/Acc,test/cls/NLL\nnan,0.3\n", "test/cls/Acc is nan, not a finite number in"),
        (
            "test/cls/Acc,test/cls/NLL\n7.5,0.3\n",
            r"test/cls/Acc is 7.5, not a finite number in \[0, 1\]",
        ),
        ("test/cls/Acc,test/member_1/Acc\n0.9,-0.2\n", "test/member_1/Acc is -0.2,"),
    ],
)
def test_a_metric_out_of_range_is_refused_not_averaged(tmp_path, results, message):
    comparison, out = _comparison(tmp_path), tmp_path / "out"
    _run(out, "a", 0, _record(comparison, "a", 0), results=results)
    with pytest.raises(ValueError, match=message):
        cmp.collect(comparison, out, ["a"], [0])


def test_a_record_without_the_keys_a_table_reads_is_refused_in_one_line(tmp_path):
    comparison, out = _comparison(tmp_path), tmp_path / "out"
    record = _record(comparison, "a", 0)
    del record["fit_seconds"]
    _run(out, "a", 0, record)
    with pytest.raises(ValueError, match="'fit_seconds' is missing, not the number a finished"):
        cmp.collect(comparison, out, ["a"], [0])


FINISH_UNDER_LOCK = """
import pathlib, sys, time
from signorm_lab.safety.run_lock import run_folder_lock
folder = pathlib.Path(sys.argv[1])
with run_folder_lock(folder):
    print("held", flush=True)
    time.sleep(2)
    (folder / "version_0").mkdir()
    (folder / "version_0" / "results.csv").write_text("test/cls/Acc\\n0.9\\n")
    (folder / "version_0" / "run_record.json").write_text(sys.argv[2])
"""


def test_a_run_another_process_is_training_is_waited_for_then_reused(tmp_path, capsys, calls):
    """Two processes given the same --out (each also runs the reference) must not train one run
    into one folder: while another process holds a run's lock the command is not called for it;
    once that process has finished the run and ended, the run is reused, not trained again."""
    comparison, out = _comparison(tmp_path, methods=("a",)), tmp_path / "out"
    folder = cmp.run_folder(out, "a", 0)
    folder.mkdir(parents=True)
    record = json.dumps(_record(comparison, "a", 0))
    holder = subprocess.Popen(
        [sys.executable, "-c", FINISH_UNDER_LOCK, str(folder), record],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        cmp.train(comparison, out, ["a"], [0])
    finally:
        holder.kill()
        holder.wait()
    assert calls == []
    printed = capsys.readouterr().out
    assert f"another process is running in {folder}" in printed and "waiting" in printed
    assert "finished earlier in" in printed and "reused" in printed


#: The digits comparison's Single at the smallest budget that saves a best checkpoint.
TINY_DIGITS = (
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=2",
    "--trainer.limit_val_batches=1",
    "--trainer.limit_test_batches=1",
    "--trainer.enable_progress_bar=false",
)


def _files(folder: Path) -> dict[Path, tuple[int, bytes]]:
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(folder.iterdir())}


def test_a_run_stopped_while_testing_after_its_fit_is_tested_not_trained_again(
    tmp_path, monkeypatch, capsys
):
    """A run whose fit finished but whose --eval_after_fit test did not (here the test is
    switched off, which leaves the folder a stop during that test leaves: checkpoints, the
    fit's run_record.json, no results.csv, no interrupted.ckpt) is tested from the fit's best
    checkpoint into its own version: no new version, no checkpoint written, and a results.csv
    and a run_record.json with the fit's fields and the test's, so that it counts as finished."""
    from signorm_lab.cli import cli_main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["torch-uncertainty"])
    calls = []

    def command(argv, lock, asked):  # the command, in this process
        calls.append(argv[len(cmp._command()) :])
        monkeypatch.setenv(REQUEST_ENV, json.dumps(asked))
        cli_main(calls[-1])
        return 0

    monkeypatch.setattr(cmp, "_run", command)
    comparison = cmp.read_comparison(EXPERIMENTS / "compare" / "digits.yaml")
    comparison = dataclasses.replace(comparison, args=TINY_DIGITS)
    out = tmp_path / "out"
    cmp.train(comparison, out, ["single"], [0], ["--eval_after_fit=false"])
    version = cmp.run_folder(out, "single", 0) / "version_0"
    fitted = json.loads((version / "run_record.json").read_text())
    assert fitted["test_seconds"] is None and fitted["optimizer_steps"] == 2
    # What decided it, as the command ran it: this request, seed 0, the config.yaml it saved.
    assert fitted["request"] == cmp.request(comparison, "single", 0) and fitted["seed"] == 0
    saved = hashlib.sha256((version / "config.yaml").read_bytes()).hexdigest()
    assert fitted["config_sha256"] == saved
    assert not (version / "results.csv").exists() and not cmp._finished(version)
    checkpoints = _files(version / "checkpoints")
    assert version / fitted["best_checkpoint"] in checkpoints
    config = (version / "config.yaml").read_bytes()

    cmp.train(comparison, out, ["single"], [0])
    assert calls[-1][0] == "test"
    assert f"--ckpt_path={version / fitted['best_checkpoint']}" in calls[-1]
    assert "instead of training again" in capsys.readouterr().out
    assert cmp._versions(version.parent) == [version]
    assert _files(version / "checkpoints") == checkpoints  # not trained again
    assert (version / "config.yaml").read_bytes() == config  # the fit's, kept
    record = json.loads((version / "run_record.json").read_text())
    assert {key: record[key] for key in FIT_KEYS} == {key: fitted[key] for key in FIT_KEYS}
    assert record["provenance"] == fitted["provenance"] and "test_provenance" in record
    assert record["test_seconds"] is not None and sum(record["test_class_counts"].values()) > 0
    assert 0 <= read_results(version / "results.csv")["test/cls/Acc"] <= 1
    assert cmp._finished(version)
    calls.clear()
    cmp.train(comparison, out, ["single"], [0])
    assert calls == []  # reused


def _stored(tmp_path: Path) -> Path:
    """A finished comparison of methods a (the reference) and b at seed 0 under ``out``."""
    (tmp_path / "r.yaml").write_text("trainer: {}\n")
    (tmp_path / "c.yaml").write_text("reference: a\nseeds: [0]\nmethods: {a: r.yaml, b: r.yaml}\n")
    comparison, out = cmp.read_comparison(tmp_path / "c.yaml"), tmp_path / "out"
    for method in ("a", "b"):
        _run(out, method, 0, _record(comparison, method, 0))
    return out


@pytest.mark.parametrize(
    ("options", "spoil", "code", "said"),
    [
        (["--seeds", "0", "--seeds", "1"], None, 2, "--seeds given twice"),
        (["--methods", "a"], None, 2, "--methods: only the reference 'a'"),
        ([], "two rows", 1, "holds 2 result rows and no test/row_crc32 column"),
        ([], "predictions", 1, "test_predictions.safetensors: not the test predictions"),
        ([], "figure a folder", 1, "comparison.png is not a file; move it away"),
    ],
    ids=[
        "an option twice",
        "the reference alone",
        "rows no test wrote",
        "bad predictions",
        "a folder in the way",
    ],
)
def test_a_comparison_that_cannot_be_tabulated_whole_writes_nothing_and_says_why(
    tmp_path, capsys, options, spoil, code, said
):
    out = _stored(tmp_path)
    version = cmp.run_folder(out, "b", 0) / "version_0"
    if spoil == "two rows":
        (version / "results.csv").write_text("test/cls/Acc\n0.9\n0.99\n")
    elif spoil == "predictions":
        (version / "test_predictions.safetensors").write_bytes(b"\x10" * 100)
    elif spoil == "figure a folder":
        (out / "comparison.png").mkdir()
    argv = ["--config", str(tmp_path / "c.yaml"), "--out", str(out), "--tables-only", *options]
    with pytest.raises(SystemExit) as stop:
        cmp.main(argv)
    error = capsys.readouterr().err
    assert stop.value.code == code and said in error and error.count("\n") == 1
    assert not (out / "comparison.txt").exists()
