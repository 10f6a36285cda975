"""The results table and the regression check carry the ensemble's diversity: σNorm-cos, the
mutual information U_mod and the Jensen gap, where a run logged them."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from fixtures.results_files import tu_metrics, write_run
from signorm_lab.reproduction import regression, results_table
from signorm_lab.reproduction.published import load_table
from signorm_lab.reproduction.results_table import (
    DIVERSITY_COLUMNS,
    aggregate,
    read_rows,
    table_cells,
    write_rows,
)
from signorm_lab.reproduction.runs import find_runs

REFERENCE_DIR = Path(__file__).parents[3] / "docs" / "reference"
#: Two seeds of an ensemble: (seed, σNorm-cos, U_mod, Jensen gap).
ENSEMBLE = ((0, 0.5, 0.05, 0.10), (1, 0.7, 0.07, 0.14))
MAIN_ROW = {"dataset": "CIFAR-100", "arch": "ResNet-50"}


def _diversity(cos: float, mi: float, jg: float) -> dict[str, float]:
    return {"test/div/signorm_cos": cos, "test/ens_MI": mi, "test/div/jensen_gap": jg}


def _ensemble_runs(folder: Path, drop_from_seed_1: tuple[str, ...] = ()) -> Path:
    for seed, cos, mi, jg in ENSEMBLE:
        diversity = {
            k: v
            for k, v in _diversity(cos, mi, jg).items()
            if not (seed == 1 and k in drop_from_seed_1)
        }
        write_run(
            folder / f"version_{seed}",
            tu_metrics(0.9, 0.3, 0.02, **diversity),
            settings={"seed": seed, "method": "SigmaNormClassificationRoutine"},
        )
    return folder


def _single_runs(folder: Path) -> Path:
    """A single model's runs: the routine logs no diversity for them."""
    for seed in (0, 1):
        write_run(
            folder / f"version_{seed}",
            tu_metrics(0.88, 0.4, 0.03),
            settings={"seed": seed, "method": "ClassificationRoutine"},
        )
    return folder


def _report(capsys, *argv) -> tuple[int, str]:
    status = regression.main([str(a) for a in argv])
    return status, capsys.readouterr().out


def test_diversity_columns_are_the_three_measures():
    assert DIVERSITY_COLUMNS == ("signorm_cos", "U_mod", "jensen_gap")
    columns = results_table.PAPER_COLUMNS
    assert [columns[c].source for c in DIVERSITY_COLUMNS] == [
        "test/div/signorm_cos",
        "test/ens_MI",
        "test/div/jensen_gap",
    ]
    assert all(c in regression.DEFAULT_TOLERANCES for c in DIVERSITY_COLUMNS)


# ------------------------------------------------------------------ the results table


def test_rows_and_published_tables_carry_the_diversity_columns(tmp_path):
    row = aggregate(find_runs([_ensemble_runs(tmp_path / "logs")]), "σN-Ens")
    assert row["signorm_cos"] == pytest.approx(0.6) and row["U_mod"] == pytest.approx(0.06)
    assert row["jensen_gap"] == pytest.approx(0.12)
    assert row["jensen_gap_std"] == pytest.approx(0.02 * 2**0.5)  # sample std of 0.10, 0.14
    header, body = table_cells(load_table("main"), [row], MAIN_ROW)
    assert header[-3:] == ["signorm_cos", "U_mod", "jensen_gap"]  # after the paper's columns
    assert body[-1][-3:] == ["0.600 ± 0.141", "0.0600 ± 0.0141", "0.1200 ± 0.0283"]
    assert len(body) > 1 and body[0][-3:] == ["--", "--", "--"]  # the paper's rows have none


def test_a_run_without_diversity_gives_a_table_without_those_columns(tmp_path):
    single = aggregate(find_runs([_single_runs(tmp_path / "single")]), "Single")
    assert not set(DIVERSITY_COLUMNS) & set(single)
    for table in (load_table("main"), None):
        header, _ = table_cells(table, [single], MAIN_ROW if table else None)
        assert not set(DIVERSITY_COLUMNS) & set(header), header
        assert "NLL" in header


def test_a_table_of_both_shows_dashes_for_the_single_model(tmp_path):
    ensemble = aggregate(find_runs([_ensemble_runs(tmp_path / "ens")]), "σN-Ens")
    single = aggregate(find_runs([_single_runs(tmp_path / "single")]), "Single")
    header, body = table_cells(load_table("main"), [ensemble, single], MAIN_ROW)
    cells = {row[header.index("method")]: row for row in body}
    jg = header.index("jensen_gap")
    assert cells["σN-Ens (n=2)"][jg] == "0.1200 ± 0.0283"
    assert cells["Single (n=2)"][jg] == "--"  # not logged: "--", not 0 or NaN


def test_the_command_writes_the_columns_a_run_logged(tmp_path, capsys):
    _ensemble_runs(tmp_path / "ens")
    _single_runs(tmp_path / "single")
    results_table.main(
        [
            "--run",
            f"σN-Ens={tmp_path / 'ens'}",
            "--run",
            f"Single={tmp_path / 'single'}",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    with (tmp_path / "out" / "rows.csv").open() as file:
        rows = {row["method"]: row for row in csv.DictReader(file)}
    assert float(rows["σN-Ens"]["jensen_gap"]) == pytest.approx(0.12)
    assert float(rows["σN-Ens"]["U_mod"]) == pytest.approx(0.06)
    assert rows["Single"]["jensen_gap"] == rows["Single"]["U_mod"] == ""  # not logged
    markdown = (tmp_path / "out" / "table.md").read_text()
    assert "| signorm_cos | U_mod | jensen_gap |" in markdown
    assert r"jensen\_gap" in (tmp_path / "out" / "table.tex").read_text()
    _single_runs(tmp_path / "alone")
    results_table.main(["--run", f"Single={tmp_path / 'alone'}", "--out", str(tmp_path / "o2")])
    assert "jensen_gap" not in (tmp_path / "o2" / "rows.csv").read_text()
    capsys.readouterr()


def test_a_column_some_seeds_lack_is_named(tmp_path, capsys):
    runs = find_runs([_ensemble_runs(tmp_path / "logs", ("test/div/jensen_gap",))])
    assert results_table.missing_columns(runs) == {
        "jensen_gap": [tmp_path / "logs" / "version_1" / "results.csv"]
    }
    status, report = _report(
        capsys,
        tmp_path / "logs",
        "--reference",
        _reference(tmp_path, signorm_cos=0.6, U_mod=0.06, jensen_gap=0.12),
    )
    assert status == 1
    assert report.splitlines()[-1] == (
        "1 of 3 metrics failed: jensen_gap (missing from 1 of 2 runs)"
    )


# ------------------------------------------------------------------ the regression check


def _reference(tmp_path: Path, **values) -> Path:
    path = tmp_path / "ref.csv"
    write_rows([{"method": "ref", **values}], path)
    return path


def test_a_reference_without_diversity_checks_none_and_shows_ours(tmp_path, capsys):
    runs = _ensemble_runs(tmp_path / "logs")
    status, report = _report(capsys, runs, "--reference", _reference(tmp_path, Acc=90.0, NLL=0.3))
    assert status == 0, report
    assert (
        "diversity (ours; the expected row has none): signorm_cos 0.6, U_mod 0.06, jensen_gap 0.12"
    ) in report
    assert report.splitlines()[-1] == "0 of 2 metrics failed"


def test_a_single_model_run_passes_a_reference_without_diversity(tmp_path, capsys):
    status, report = _report(
        capsys,
        _single_runs(tmp_path / "single"),
        "--reference",
        _reference(tmp_path, Acc=88.0, NLL=0.4),
    )
    assert status == 0, report
    assert "diversity" not in report  # nothing logged, nothing to show


def test_a_reference_with_diversity_passes_a_run_that_matches(tmp_path, capsys):
    reference = _reference(tmp_path, Acc=90.0, signorm_cos=0.6, U_mod=0.06, jensen_gap=0.12)
    status, report = _report(capsys, _ensemble_runs(tmp_path / "logs"), "--reference", reference)
    assert status == 0, report
    assert report.splitlines()[-1] == "0 of 4 metrics failed"
    assert "diversity (ours" not in report  # checked, not merely shown


def test_a_reference_with_diversity_fails_a_run_that_logged_none(tmp_path, capsys):
    reference = _reference(tmp_path, Acc=88.0, signorm_cos=0.6, U_mod=0.06, jensen_gap=0.12)
    status, report = _report(capsys, _single_runs(tmp_path / "single"), "--reference", reference)
    assert status == 1
    assert report.splitlines()[-1] == (
        "3 of 4 metrics failed: signorm_cos (missing from the run), U_mod (missing from the "
        "run), jensen_gap (missing from the run)"
    )


@pytest.mark.parametrize("metric", DIVERSITY_COLUMNS)
def test_a_reference_whose_diversity_is_far_fails_naming_the_metric(tmp_path, capsys, metric):
    ours = {"signorm_cos": 0.6, "U_mod": 0.06, "jensen_gap": 0.12}
    tolerance = regression.DEFAULT_TOLERANCES[metric]
    runs = _ensemble_runs(tmp_path / "logs")
    # Just inside the default tolerance: passes.
    near = _reference(tmp_path, **ours | {metric: ours[metric] + 0.9 * tolerance})
    status, report = _report(capsys, runs, "--reference", near)
    assert status == 0, report
    # An ensemble that stopped being one, on this metric alone: fails, naming it.
    far = _reference(tmp_path, **ours | {metric: ours[metric] + 3 * tolerance})
    status, report = _report(capsys, runs, "--reference", far)
    assert status == 1
    assert report.splitlines()[-1] == f"1 of 3 metrics failed: {metric} (out of tolerance)"
    with pytest.raises(regression.ReproductionError, match=rf"{metric} \(out of tolerance\)"):
        regression.check_reproduction(runs, "--reference", far)
    # A wider tolerance for that metric lets it pass.
    status, report = _report(capsys, runs, "--reference", far, "--tol", f"{metric}={4 * tolerance}")
    assert status == 0, report


def test_an_empty_reference_cell_is_not_compared_and_says_so(tmp_path, capsys):
    reference = tmp_path / "ref.csv"
    write_rows(
        [
            {"method": "ref", "Acc": 90.0, "signorm_cos": 0.6},
            {"method": "other", "Acc": 90.0, "U_mod": 0.06, "jensen_gap": 0.5},
        ],
        reference,
    )
    status, report = _report(
        capsys,
        _ensemble_runs(tmp_path / "logs"),
        "--reference",
        reference,
        "--reference-where",
        "method=ref",
    )
    assert status == 0, report  # the far jensen_gap is the other row's
    assert "not compared (empty in the reference row, present in ours): U_mod, jensen_gap" in report
    assert report.splitlines()[-1] == "0 of 2 metrics failed"


def test_the_quickstart_reference_row_carries_its_runs_diversity():
    (row,) = read_rows(REFERENCE_DIR / "digits_signorm.csv")
    logged = []
    for results in sorted((REFERENCE_DIR / "digits_signorm").glob("seed_*/results.csv")):
        with results.open() as file:
            logged += list(csv.DictReader(file))
    assert len(logged) == row["runs"] == 10
    for column in DIVERSITY_COLUMNS:
        values = [float(run[results_table.PAPER_COLUMNS[column].source]) for run in logged]
        assert row[column] == pytest.approx(sum(values) / len(values)), column
    assert row["jensen_gap"] > 0 and row["signorm_cos"] < 1  # an ensemble, not one model
