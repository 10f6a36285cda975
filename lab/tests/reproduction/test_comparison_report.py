"""What signorm-compare prints and draws of finished runs: tables, wording, cost, figure."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from torch_uncertainty.metrics import CalibrationError

from signorm_lab.reproduction import comparison as cmp
from signorm_lab.reproduction import comparison_figure as figure
from signorm_lab.reproduction.comparison_report import ONE_MODEL_COS, SIGNORM_COS, plan
from signorm_lab.reproduction.paired import mean_interval


def _runs(
    values: dict[str, list[tuple[float, float]]], folder: Path = Path()
) -> dict[str, cmp.MethodRuns]:
    """Methods with (accuracy, NLL) per seed, fit times 10 s (reference) and 5 s, parameters
    4 M (reference) and 1 M."""
    runs = {}
    for name, rows in values.items():
        r = runs[name] = cmp.MethodRuns(name)
        for seed, (acc, nll) in enumerate(rows):
            r.metrics[seed] = {
                "test/cls/Acc": acc,
                "test/cls/NLL": nll,
                "test/cal/ECE": 0.02,
                "test/cls/Brier": 0.1,
            }
            r.records[seed] = {
                "params_total": 4_000_000 if name == "ref" else 1_000_000,
                "params_trainable": 1_000_000,
                "optimizer_steps": 90,
                "fit_seconds": 10.0 if name == "ref" else 5.0,
                "test_seconds": 2.0,
                "train_class_counts": {"0": 50, "1": 50},
                "test_class_counts": {"0": 5, "1": 5},
            }
            r.folders[seed] = folder / name / f"seed_{seed}" / "version_0"
    return runs


THREE_SEEDS = {
    "ref": [(0.90, 0.30), (0.91, 0.31), (0.92, 0.29)],
    "better": [(0.95, 0.40), (0.96, 0.42), (0.97, 0.41)],  # σN-Ens: worse acc, better NLL
    "noisy": [(0.85, 0.30), (0.95, 0.31), (0.90, 0.29)],
}


def test_the_table_gives_each_difference_its_interval_verdict_and_cost_multiple():
    comparison = cmp.Comparison(Path("c.yaml"), {}, "ref", (0, 1, 2))
    text = cmp.tables(comparison, _runs(THREE_SEEDS), (0, 1, 2))
    lines = {tuple(line.split()[:2]): line for line in text.splitlines() if line.strip()}
    assert "ref WORSE" in lines[("better", "Acc")] and "-5.0" in lines[("better", "Acc")]
    assert "ref BETTER" in lines[("better", "NLL")]
    stats = mean_interval([-0.10, -0.11, -0.12])
    assert f"[{stats['low']:+.3f}, {stats['high']:+.3f}]" in lines[("better", "NLL")]
    assert "no difference shown" in lines[("noisy", "Acc")]
    (cost,) = [
        line.split() for line in text.splitlines() if line.startswith("better") and "×" in line
    ]
    # params, trained, steps, fit and test seconds, then the reference's multiples of them
    assert cost == ["better", "1.000", "1.000", "90", "5.0", "2.0", "4.00×", "2.00×", "1.00×"]
    assert "NOT LEARNED" not in text and "STAND-IN" not in text


def test_one_seed_says_which_way_each_metric_went_in_lower_case():
    comparison = cmp.Comparison(Path("c.yaml"), {}, "ref", (0,))
    text = cmp.tables(comparison, _runs({"ref": [(0.90, 0.30)], "b": [(0.85, 0.40)]}), (0,))
    assert "ref higher on this seed" in text and "ref lower on this seed" in text
    assert "(1 seed)" in text
    assert not any(word in text for word in ("WORSE", "BETTER", "better", "worse"))


def test_an_untrained_run_is_named_under_the_tables():
    comparison = cmp.Comparison(Path("c.yaml"), {}, "ref", (0,))
    runs = _runs({"ref": [(0.90, 0.30)], "b": [(0.5, 0.69)]})
    text = cmp.tables(comparison, runs, (0,))
    assert "NOT LEARNED: b seed 0" in text


@pytest.mark.parametrize(
    ("cos", "said"), [((0.99, 0.995), True), ((0.99, ONE_MODEL_COS - 0.01), False)]
)
def test_members_still_one_model_at_every_seed_are_explained_with_where_to_look(cos, said):
    see = "480 steps with clipping: studies/results/finetune_comparison/README.md"
    comparison = cmp.Comparison(Path("c.yaml"), {}, "ref", (0, 1), see=see)
    runs = _runs({"ref": [(0.90, 0.30)] * 2, "b": [(0.95, 0.40)] * 2})
    for seed, value in enumerate(cos):
        runs["ref"].metrics[seed][SIGNORM_COS] = value
    text = cmp.tables(comparison, runs, (0, 1))
    assert ("still one model at every seed" in text) is said
    assert (see in text) is said


def test_the_comparison_file_may_say_where_a_difference_was_found(tmp_path):
    (tmp_path / "a.yaml").write_text("trainer: {}\n")
    path = tmp_path / "c.yaml"
    path.write_text("reference: a\nseeds: [0]\nmethods: {a: a.yaml, b: a.yaml}\nsee: longer\n")
    assert cmp.read_comparison(path).see == "longer"


def test_the_first_line_says_how_many_runs_of_which_recipes(tmp_path):
    specs = {m: {"recipe": tmp_path / f"{m}.yaml", "label": m.upper()} for m in ("a", "b")}
    comparison = cmp.Comparison(tmp_path / "c.yaml", specs, "a", (0, 1, 2))
    line = plan(comparison, ["a", "b"], (0, 1, 2), tmp_path / "out")
    assert line.startswith("signorm-compare: 2 methods (A, B) × 3 seeds = 6 runs of a.yaml, b.yaml")


def _rows(runs: dict[str, cmp.MethodRuns], seeds: tuple[int, ...]) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(cmp.runs_csv(runs, seeds, Path()))))


def test_the_figure_has_a_panel_per_metric_and_one_of_cost_and_says_one_seed():
    rows = _rows(_runs(THREE_SEEDS), (0, 1, 2))
    drawn = figure.draw(rows, "ref", {"ref": "σN-Ens"})
    titles = [ax.get_title() for ax in drawn.axes]
    assert [t.split("\n")[0] for t in titles] == [
        "Acc (%)",
        "NLL",
        "ECE (%)",
        "Brier",
        "cost: σN-Ens's multiple",
    ]
    forest = drawn.axes[1]  # NLL: 'better' differs (a filled point), 'noisy' does not (hollow)
    points = [line.get_markerfacecolor() for line in forest.lines if line.get_marker() == "o"]
    assert points[0] == figure._BETTER and points[1] == "white"
    assert not any(tick.get_text() for tick in forest.get_yticklabels())  # names on the first
    assert [t.get_text() for t in drawn.axes[0].get_yticklabels()] == ["better", "noisy"]
    assert "95 % t interval" in drawn._suptitle.get_text()
    one = figure.draw(_rows(_runs({"ref": [(0.9, 0.3)], "b": [(0.95, 0.4)]}), (0,)), "ref", {})
    assert "one seed, points without interval" in one._suptitle.get_text()
    assert "No reliability diagram for ref, b" in one._suptitle.get_text()
    assert "STAND-IN" not in one._suptitle.get_text()
    rows = _rows(_runs({"ref": [(0.9, 0.3)], "b": [(0.95, 0.4)]}), (0,))
    rows[1]["stand_in"] = "True"
    assert figure.draw(rows, "ref", {})._suptitle.get_text().startswith("STAND-IN DATA")


def test_the_figure_draws_each_runs_reliability_diagram_from_its_test_predictions(tmp_path):
    runs = _runs({"ref": [(0.9, 0.3)] * 2, "b": [(0.95, 0.4)] * 2}, tmp_path)
    folder = runs["ref"].folders[0]
    folder.mkdir(parents=True)
    probs = torch.softmax(torch.randn(4, 50, 3, generator=torch.Generator().manual_seed(0)), -1)
    targets = torch.randint(0, 3, (50,), generator=torch.Generator().manual_seed(1))
    save_file(
        {"probs/0": probs, "targets/0": targets},
        folder / figure.PREDICTIONS_FILENAME,
    )
    comparison = cmp.Comparison(tmp_path / "c.yaml", {}, "ref", (0, 1))
    written = figure.save_figure(
        figure.draw_comparison(comparison, runs, (0, 1), tmp_path), tmp_path
    )
    assert (tmp_path / "comparison.png").stat().st_size > 0 and "comparison.svg" in written
    # TorchUncertainty's diagram writes its ECE into the panel: the routine's (15 bins)
    ece = CalibrationError(task="multiclass", num_classes=3, num_bins=15)(probs.mean(0), targets)
    assert f"ECE={float(ece):.02%}" in (tmp_path / "comparison.svg").read_text()
    drawn = figure.draw(
        _rows(runs, (0, 1)), "ref", {}, {"ref": folder / figure.PREDICTIONS_FILENAME}
    )
    assert (
        drawn.axes[-1].get_title() == "ref, seed 0"
        and "No reliability diagram for b" in drawn._suptitle.get_text()
    )
