"""The results table and the regression check carry the ensemble's diversity."""

from __future__ import annotations

import pytest
from fixtures.results_files import tu_metrics, write_run

from torch_uncertainty_signorm.reproduction import regression
from torch_uncertainty_signorm.reproduction.published import load_table
from torch_uncertainty_signorm.reproduction.results_table import (
    aggregate,
    table_cells,
    write_rows,
)
from torch_uncertainty_signorm.reproduction.runs import find_runs


def _runs(tmp_path):
    for seed, cos in ((0, 0.5), (1, 0.7)):
        write_run(tmp_path / "logs" / f"version_{seed}",
                  tu_metrics(0.9, 0.3, 0.02, **{"test/div/signorm_cos": cos, "test/ens_MI": 0.06}),
                  settings={"seed": seed})
    return find_runs([tmp_path / "logs"])


def test_rows_and_published_tables_carry_the_diversity_columns(tmp_path):
    row = aggregate(_runs(tmp_path), "σN-Ens")
    assert row["signorm_cos"] == pytest.approx(0.6) and row["U_mod"] == pytest.approx(0.06)
    header, body = table_cells(load_table("main"), [row], {"dataset": "CIFAR-100",
                                                           "arch": "ResNet-50"})
    assert header[-2:] == ["signorm_cos", "U_mod"]  # after the paper's own columns
    assert body[-1][-2:] == ["0.600 ± 0.141", "0.0600"]  # a zero std is not printed
    assert len(body) > 1 and body[0][-2:] == ["--", "--"]  # the paper's rows have none


def test_the_regression_report_shows_ours_and_checks_a_reference_that_has_them(tmp_path, capsys):
    runs = tmp_path / "logs"
    _runs(tmp_path)
    reference = tmp_path / "ref.csv"
    write_rows([{"method": "ref", "Acc": 90.0, "NLL": 0.3}], reference)
    assert regression.main([str(runs), "--reference", str(reference)]) == 0
    assert "diversity (ours; the expected row has none): signorm_cos 0.6, U_mod 0.06" in (
        capsys.readouterr().out)
    write_rows([{"method": "ref", "Acc": 90.0, "signorm_cos": 0.8}], reference)
    assert regression.main([str(runs), "--reference", str(reference)]) == 1
    assert "signorm_cos (out of tolerance)" in capsys.readouterr().out
