"""A results.csv exactly as TorchUncertainty's routine writes it goes through the results table and
the regression check, OOD columns included, with the published errata applied."""

import csv

import pytest

from fixtures.tu_results import TU_HEADER
from signorm_lab.reproduction import regression, results_table
from signorm_lab.reproduction.regression import compare_rows
from signorm_lab.reproduction.results_table import read_rows

WHERE = ["dataset=CIFAR-10", "arch=ResNet-18"]
ROW = [*WHERE, "method=σN-Ens"]


def _write_tu_run(log_dir, params, **values):
    """results.csv as TorchUncertainty's csv_writer writes it (``.4f``, 'nan' for NaN), and the
    CLI's config.yaml (test batch 128) beside it; σN-Ens ResNet-18 CIFAR-10 of rn18 otherwise."""
    row = (
        dict.fromkeys(TU_HEADER, 0.5)
        | {
            "test/cls/Acc": 0.939,
            "test/cls/NLL": 0.185,
            "test/cal/ECE": 0.007,
            "ood/AUPR": 0.934,
            "ood/AUROC": 0.891,
            "ood/FPR95": 0.306,
            "test/sc/Cov_5Risk": "nan",
            "test/cplx/params": params,
            "test/cplx/flops": 2.2164e9 * 2 * 128,
        }
        | values
    )
    log_dir.mkdir(parents=True)
    with (log_dir / "results.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(TU_HEADER)
        writer.writerow([v if isinstance(v, str) else f"{v:.4f}" for v in row.values()])
    (log_dir / "config.yaml").write_text("data:\n  init_args:\n    batch_size: 128\n")
    return log_dir


def test_tu_results_csv_fills_every_paper_column_including_ood(tmp_path, capsys):
    run = _write_tu_run(tmp_path / "run", params=11_201_002)
    header, body = results_table.main(
        [
            "--run",
            f"ours={run}",
            "--published",
            "rn18",
            "--where",
            *WHERE,
            "--out",
            str(tmp_path / "out"),
        ]
    )
    (ours,) = read_rows(tmp_path / "out" / "rows.csv")
    assert ours["AUROC"] == pytest.approx(89.1) and ours["AUPR"] == pytest.approx(93.4)
    assert ours["FPR95"] == pytest.approx(30.6) and ours["Acc"] == pytest.approx(93.9)
    assert ours["Params"] == pytest.approx(11.201002)
    assert ours["MAdds"] == pytest.approx(2.2164)
    our_cells = dict(zip(header, body[-1], strict=True))
    assert our_cells["AUROC"] == "89.1" and our_cells["FPR95"] == "30.6"
    (published,) = [dict(zip(header, row, strict=True)) for row in body if row[0] == "σN-Ens"]
    assert published["Params"] == "11.20 (erratum; printed 11.39)"


def test_regression_passes_a_faithful_run_and_labels_the_erratum(tmp_path, capsys):
    run = _write_tu_run(tmp_path / "run", params=11_201_002)
    assert regression.main([str(run), "--published", "rn18", "--where", *ROW]) == 0
    report = capsys.readouterr().out
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("metric "))
    compared = {line.split()[0] for line in lines[start + 2 : -1]}  # below the header's rule
    assert compared == {"Acc", "NLL", "ECE", "AUPR", "AUROC", "FPR95", "Params", "MAdds"}
    (params,) = [line for line in report.splitlines() if line.startswith("Params")]
    assert "11.2 " in params and "ok  (erratum: paper prints 11.39)" in params
    # The printed (CIFAR-100) count is what fails now, and an OOD drift is caught.
    printed = _write_tu_run(tmp_path / "printed", params=11_390_000, **{"ood/AUROC": 0.87})
    assert regression.main([str(printed), "--published", "rn18", "--where", *ROW]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == (
        "2 of 8 metrics failed: AUROC (out of tolerance), Params (out of tolerance)"
    )


def test_madds_tolerance_is_relative():
    # 23.60 vs the printed 23.83 G (WRN σN-Ens): 1.0% off, an absolute 0.01 G would fail it.
    (wrn,) = compare_rows({"MAdds": 23.60}, {"MAdds": 23.83})
    assert wrn.ok and wrn.relative and wrn.allowed == pytest.approx(0.4766)
    (packed,) = compare_rows({"MAdds": 0.468}, {"MAdds": 0.48})  # 2.5% off at 0.48 G
    assert not packed.ok
    (absolute,) = compare_rows({"MAdds": 0.468}, {"MAdds": 0.48}, {"MAdds": 0.05})
    assert absolute.ok and not absolute.relative
    (looser,) = compare_rows({"MAdds": 0.468}, {"MAdds": 0.48}, relative_tolerances={"MAdds": 0.05})
    assert looser.ok and looser.relative
    with pytest.raises(ValueError, match=r"tolerances must be >= 0, got \{'MAdds': -0.01\}"):
        compare_rows({"MAdds": 1.0}, {"MAdds": 1.0}, relative_tolerances={"MAdds": -0.01})


def test_relative_tolerance_from_the_command_line(tmp_path, capsys):
    run = _write_tu_run(tmp_path / "run", params=11_201_002, **{"test/cplx/flops": 2.0e9 * 256})
    where = ["--published", "rn18", "--where", *ROW, "--metrics", "MAdds"]
    assert regression.main([str(run), *where]) == 1  # 2.00 vs 2.23 G: 10% off
    assert regression.main([str(run), *where, "--tol", "MAdds=15%"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("MAdds")][-1:]
    assert line.split()[4] == "15%"
    with pytest.raises(SystemExit):
        regression.main([str(run), *where, "--tol", "MAdds=x%"])
    assert "--tol MAdds: expected a number, got 'x'" in capsys.readouterr().err
