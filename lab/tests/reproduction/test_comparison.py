"""signorm-compare's pieces: the comparison file, the class-frequency baseline, the learned check,
the paired statistics and the verdict each table cell gives."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.weightstats import ttost_paired

from signorm_lab.callbacks.run_record import FIT_KEYS
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


def test_a_rerun_reuses_finished_runs_and_resumes_an_interrupted_one(tmp_path, monkeypatch):
    """What `train` hands the command: nothing for a finished run, `--ckpt_path` of the
    interruption checkpoint for an interrupted one, a plain fit otherwise."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("trainer: {}\n")
    spec = {"recipe": recipe, "label": "x", "args": ()}
    comparison = cmp.Comparison(tmp_path / "c.yaml", {"a": spec, "b": spec, "c": spec}, "a", (0,))
    out = tmp_path / "out"
    finished = cmp.run_folder(out, "a", 0) / "version_0"
    finished.mkdir(parents=True)
    (finished / "results.csv").write_text("test/cls/Acc\n0.9\n")
    (finished / "run_record.json").write_text('{"test_seconds": 1.0}')
    interrupted = cmp.run_folder(out, "b", 0) / "version_0" / "checkpoints"
    interrupted.mkdir(parents=True)
    (interrupted / "interrupted.ckpt").write_bytes(b"")
    calls = []
    monkeypatch.setattr(
        cmp.subprocess, "run", lambda argv, **_: calls.append(argv) or SimpleNamespace(returncode=0)
    )
    cmp.train(comparison, out, ["a", "b", "c"], [0])
    assert len(calls) == 2  # "a" reused
    assert f"--ckpt_path={interrupted / 'interrupted.ckpt'}" in calls[0]
    assert not any(arg.startswith("--ckpt_path") for arg in calls[1])
    assert "--seed_everything=0" in calls[1] and "--config" in calls[1]
    monkeypatch.setattr(cmp.subprocess, "run", lambda argv, **_: SimpleNamespace(returncode=130))
    with pytest.raises(RuntimeError, match=r"the x run at seed 0 exited with code 130.*resume"):
        cmp.train(comparison, out, ["c"], [0])


FINISH_UNDER_LOCK = """
import pathlib, sys, time
from signorm_lab.safety.run_lock import run_folder_lock
folder = pathlib.Path(sys.argv[1])
with run_folder_lock(folder):
    print("held", flush=True)
    time.sleep(2)
    (folder / "version_0").mkdir()
    (folder / "version_0" / "results.csv").write_text("test/cls/Acc\\n0.9\\n")
    (folder / "version_0" / "run_record.json").write_text('{"test_seconds": 1.0}')
"""


def test_a_run_another_process_is_training_is_waited_for_then_reused(tmp_path, monkeypatch, capsys):
    """Two processes given the same --out (each also runs the reference) must not train one run
    into one folder: while another process holds a run's lock the command is not called for it;
    once that process has finished the run and ended, the run is reused, not trained again."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text("trainer: {}\n")
    spec = {"recipe": recipe, "label": "x", "args": ()}
    comparison = cmp.Comparison(tmp_path / "c.yaml", {"a": spec}, "a", (0,))
    out = tmp_path / "out"
    folder = cmp.run_folder(out, "a", 0)
    folder.mkdir(parents=True)
    calls = []
    monkeypatch.setattr(
        cmp.subprocess, "run", lambda argv, **_: calls.append(argv) or SimpleNamespace(returncode=0)
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", FINISH_UNDER_LOCK, str(folder)], stdout=subprocess.PIPE, text=True
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
    calls, run = [], subprocess.run

    def command(argv, **kwargs):  # the command, in this process; any other process as it is
        if argv[: len(cmp._command())] != cmp._command():
            return run(argv, **kwargs)
        calls.append(argv[len(cmp._command()) :])
        cli_main(calls[-1])
        return SimpleNamespace(returncode=0)

    monkeypatch.setattr(cmp.subprocess, "run", command)
    comparison = cmp.read_comparison(EXPERIMENTS / "compare" / "digits.yaml")
    comparison = dataclasses.replace(comparison, args=TINY_DIGITS)
    out = tmp_path / "out"
    cmp.train(comparison, out, ["single"], [0], ["--eval_after_fit=false"])
    version = cmp.run_folder(out, "single", 0) / "version_0"
    fitted = json.loads((version / "run_record.json").read_text())
    assert fitted["test_seconds"] is None and fitted["optimizer_steps"] == 2
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
