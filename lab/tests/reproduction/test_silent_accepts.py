"""Nothing passes the regression check or reaches a results table that is not what it claims:
tolerances that check nothing, infinite references, every metric excluded, duplicated columns,
extra rows, text cells, runs whose settings cannot be read; and the results table never
replaces a file in ``--out`` it was not asked to."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from fixtures.results_files import tu_metrics, write_run
from signorm_lab.reproduction import regression, results_table
from signorm_lab.reproduction.regression import compare_rows

PROFILE = b"export PATH=$HOME/bin:$PATH\n"


def _run(folder: Path, seed: int = 0, tau: float = 0.1, acc: float = 0.97) -> Path:
    return write_run(
        folder,
        tu_metrics(acc, 0.1, 0.04),
        config={
            "seed_everything": seed,
            "routine": {
                "class_path": "x.SigmaNormClassificationRoutine",
                "init_args": {"model": {"init_args": {"tau": tau}}},
            },
        },
    )


def _reference(tmp_path: Path, text: str = "method,Acc\nref,97.0\n") -> Path:
    path = tmp_path / "ref.csv"
    path.write_text(text)
    return path


def _refused(capsys, *argv: str) -> str:
    """Run the check; it must exit 2 with one line on stderr; returns that line."""
    with pytest.raises(SystemExit) as exit_:
        regression.main([str(arg) for arg in argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("signorm-regression: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    ("tolerance", "message"),
    [
        ("Acc=1e308", r"absolute tolerance Acc=1e\+308 is wider than 100"),
        ("Acc=1e6%", r"relative tolerance Acc=10000 is wider than 1 \(100%\)"),
    ],
)
def test_a_tolerance_that_passes_anything_is_refused(tolerance, message, tmp_path, capsys):
    _run(tmp_path / "runs" / "version_0")
    err = _refused(
        capsys, tmp_path / "runs", "--reference", _reference(tmp_path), "--tol", tolerance
    )
    assert re.search(message, err), err


def test_every_metric_excluded_is_an_empty_check(tmp_path, capsys):
    _run(tmp_path / "runs" / "version_0")
    err = _refused(
        capsys, tmp_path / "runs", "--reference", _reference(tmp_path), "--exclude", "Acc"
    )
    assert "every metric of the expected row is excluded (Acc): nothing would be compared" in err


def test_an_infinite_reference_value_is_refused():
    with pytest.raises(
        ValueError,
        match=r"expected row holds MAdds=inf: an infinite expected "
        r"value would pass or fail any result",
    ):
        compare_rows({"MAdds": 1.0, "Acc": 90.0}, {"MAdds": float("inf"), "Acc": 90.0})


def test_a_reference_with_an_appended_row_is_refused(tmp_path, capsys):
    _run(tmp_path / "runs" / "version_0")
    reference = _reference(tmp_path, "method,Acc\nref,97.0\nappended,0.0\n")
    err = _refused(capsys, tmp_path / "runs", "--reference", reference)
    assert "holds 2 reference rows (ref, appended)" in err and "--reference-where" in err
    assert (
        regression.main(
            [
                str(tmp_path / "runs"),
                "--reference",
                str(reference),
                "--reference-where",
                "method=ref",
            ]
        )
        == 0
    )


@pytest.mark.parametrize("where", ["results.csv", "reference"])
def test_a_duplicated_column_is_refused(where, tmp_path, capsys):
    run = _run(tmp_path / "runs" / "version_0")
    reference = _reference(tmp_path)
    if where == "results.csv":
        (run / "results.csv").write_text("test/cls/Acc,test/cls/Acc\n0.10,0.97\n")
    else:
        reference.write_text("method,Acc,Acc\nref,10.0,97.0\n")
    err = _refused(capsys, tmp_path / "runs", "--reference", reference)
    assert re.search(r"names the column '(test/cls/)?Acc' twice", err), err


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("=1+1", r"column 'Acc' holds '=1\+1', not a number"),
        ("high", r"column 'Acc' holds 'high', not a number"),
        ("9" * 200_000, r"is not a rows CSV \(field larger than field limit"),
    ],
)
def test_a_reference_cell_that_is_no_number_is_named(cell, message, tmp_path, capsys):
    _run(tmp_path / "runs" / "version_0")
    err = _refused(
        capsys, tmp_path / "runs", "--reference", _reference(tmp_path, f"method,Acc\nref,{cell}\n")
    )
    assert re.search(message, err), err[:300]
    assert "Traceback" not in err


def test_a_text_cell_in_results_csv_is_named(tmp_path, capsys):
    run = _run(tmp_path / "runs" / "version_0")
    (run / "results.csv").write_text("test/cls/Acc\n=HYPERLINK(1)\n")
    err = _refused(capsys, tmp_path / "runs", "--reference", _reference(tmp_path))
    assert "column 'test/cls/Acc' holds '=HYPERLINK(1)', not a number" in err


def test_a_byte_order_mark_is_no_part_of_the_first_column(tmp_path, capsys):
    run = _run(tmp_path / "runs" / "version_0")
    (run / "results.csv").write_bytes("\ufefftest/cls/Acc\n0.9700\n".encode())
    assert regression.main([str(tmp_path / "runs"), "--reference", str(_reference(tmp_path))]) == 0
    assert "missing from the run" not in capsys.readouterr().out


def test_a_list_valued_config_is_refused_not_ignored(tmp_path, capsys):
    run = _run(tmp_path / "runs" / "version_0")
    (run / "config.yaml").write_text("- seed_everything: 0\n- tau: 500\n")
    err = _refused(capsys, tmp_path / "runs", "--reference", _reference(tmp_path))
    assert "config.yaml holds a YAML list, not the mapping of settings" in err


def test_runs_whose_settings_cannot_be_read_are_refused_unless_allowed(tmp_path, capsys):
    """Two bare results.csv (their τ unknown): refused, or compared saying so."""
    for seed in (0, 1):
        write_run(tmp_path / "runs" / f"version_{seed}", tu_metrics(0.97, 0.1, 0.04))
    reference = _reference(tmp_path)
    err = _refused(capsys, tmp_path / "runs", "--reference", reference)
    assert "the settings of 2 run(s) under" in err and "--allow-unknown-settings" in err
    assert (
        regression.main(
            [str(tmp_path / "runs"), "--reference", str(reference), "--allow-unknown-settings"]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "warning: the settings of 2 run(s) could not be read" in out


# ------------------------------------------------------------------------ the results table
def _table(tmp_path: Path, *extra: str) -> list[str]:
    return ["--run", f"ours={tmp_path / 'runs'}", "--out", str(tmp_path / "out"), *extra]


def _table_refused(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        results_table.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("signorm-results-table: error: ") and err.count("\n") == 1, err
    return err


def test_the_table_never_replaces_files_in_out_unless_asked(tmp_path, capsys):
    _run(tmp_path / "runs" / "version_0")
    out = tmp_path / "out"
    out.mkdir()
    (out / "table.md").write_bytes(PROFILE)
    err = _table_refused(capsys, _table(tmp_path))
    assert "already holds table.md: nothing was written" in err and "--overwrite" in err
    assert sorted(p.name for p in out.iterdir()) == ["table.md"]
    assert (out / "table.md").read_bytes() == PROFILE
    results_table.main(_table(tmp_path, "--overwrite"))
    assert sorted(p.name for p in out.iterdir()) == ["rows.csv", "table.md", "table.tex"]


def test_the_table_replaces_a_link_never_the_file_it_leads_to(tmp_path):
    _run(tmp_path / "runs" / "version_0")
    profile = tmp_path / "profile"
    profile.write_bytes(PROFILE)
    (tmp_path / "out").mkdir()
    for name in ("rows.csv", "table.md", "table.tex"):
        (tmp_path / "out" / name).symlink_to(profile)
    results_table.main(_table(tmp_path, "--overwrite"))
    assert profile.read_bytes() == PROFILE
    assert not any(
        (tmp_path / "out" / name).is_symlink() for name in ("rows.csv", "table.md", "table.tex")
    )


def test_out_naming_a_file_is_one_line(tmp_path, capsys):
    _run(tmp_path / "runs" / "version_0")
    (tmp_path / "out").write_bytes(PROFILE)
    err = _table_refused(capsys, _table(tmp_path))
    assert "is a file, not a folder" in err
    assert (tmp_path / "out").read_bytes() == PROFILE


def test_the_table_refuses_runs_of_different_settings(tmp_path, capsys):
    _run(tmp_path / "runs" / "version_0", seed=0, tau=0.1)
    _run(tmp_path / "runs" / "version_1", seed=1, tau=1.0)
    err = _table_refused(capsys, _table(tmp_path))
    assert "holds runs of 2 different settings, which differ in tau" in err
    assert not (tmp_path / "out").exists()
    results_table.main(_table(tmp_path, "--select", "tau=0.1"))
    rows = results_table.read_rows(tmp_path / "out" / "rows.csv")
    assert rows[0]["runs"] == 1 and rows[0]["seeds"] == "0"


def test_the_table_refuses_stand_in_runs_so_its_rows_never_pass_a_check(tmp_path, capsys):
    run = _run(tmp_path / "runs" / "version_0")
    (run / "STAND_IN_DATA.txt").write_text("stand-in")
    err = _table_refused(capsys, _table(tmp_path))
    assert "used stand-in data" in err
    assert not (tmp_path / "out").exists()


def test_rows_digest_unchanged_by_a_refused_run(tmp_path, capsys):
    """A refused second table leaves the first one's files byte-identical."""
    _run(tmp_path / "runs" / "version_0")
    results_table.main(_table(tmp_path))
    capsys.readouterr()
    before = {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (tmp_path / "out").iterdir()
    }
    _table_refused(capsys, _table(tmp_path))
    assert {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (tmp_path / "out").iterdir()
    } == before


def test_a_row_appended_to_results_csv_is_refused(tmp_path, capsys):
    """A file without the tests' row check cannot tell a second row from one appended by hand."""
    run = _run(tmp_path / "runs" / "version_0", acc=0.10)
    with (run / "results.csv").open("a") as file:
        file.write(",".join(["0.9700"] * len(tu_metrics(0.97, 0.1, 0.04))) + "\n")
    with pytest.raises(SystemExit):
        regression.main([str(tmp_path / "runs"), "--reference", str(_reference(tmp_path))])
    (err,) = capsys.readouterr().err.splitlines()
    assert re.search(r"results.csv: holds 2 result rows and no test/row_crc32 column", err)


@pytest.mark.parametrize(("value", "problem"), [(float("nan"), "NaN"), (float("inf"), "infinite")])
def test_a_metric_the_run_could_not_compute_fails_the_check(value, problem):
    (row,) = compare_rows({"Acc": value}, {"Acc": 80.0})
    assert not row.ok and row.problem == f"{problem} in the run"
