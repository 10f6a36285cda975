"""results.csv files → mean ± std rows in the paper's columns, appended to a published table."""

import math

import pytest

from fixtures.results_files import tu_metrics, write_run
from signorm_lab.reproduction import results_table
from signorm_lab.reproduction.results_table import (
    aggregate,
    madds_per_image,
    mean_std,
    missing_columns,
    read_rows,
    write_rows,
)
from signorm_lab.reproduction.runs import find_runs

SEEDS = [  # (Acc, NLL, ECE) of three seeds, fractions as TorchUncertainty logs them
    (0.90, 0.30, 0.010),
    (0.92, 0.33, 0.020),
    (0.94, 0.36, 0.030),
]


@pytest.fixture
def three_seeds(tmp_path):
    for seed, (acc, nll, ece) in enumerate(SEEDS):
        write_run(
            tmp_path / "signorm" / f"seed{seed}",
            tu_metrics(acc, nll, ece),
            settings={"seed": seed, "test_batch_size": 64},
        )
    return tmp_path / "signorm"


def test_mean_and_sample_std_match_hand_computation(three_seeds):
    row = aggregate(find_runs([three_seeds]), "σN-Ens")
    assert row["runs"] == 3
    # Acc: 90, 92, 94 -> mean 92, sample std sqrt((4 + 0 + 4) / 2) = 2
    assert row["Acc"] == pytest.approx(92.0) and row["Acc_std"] == pytest.approx(2.0)
    assert row["NLL"] == pytest.approx(0.33) and row["NLL_std"] == pytest.approx(0.03)
    assert row["ECE"] == pytest.approx(2.0) and row["ECE_std"] == pytest.approx(1.0)
    assert row["AUROC"] == pytest.approx(90.0) and row["AUROC_std"] == 0.0
    assert row["Params"] == pytest.approx(11.39)


def test_mean_std_leaves_out_runs_without_a_value_and_defaults_to_columns_all_logged(tmp_path):
    write_run(tmp_path / "a", tu_metrics(0.90, 0.30, float("nan"), **{"test/div/signorm_cos": 0.2}))
    write_run(tmp_path / "b", tu_metrics(0.94, 0.36, 0.03))
    runs = find_runs([tmp_path])
    row = mean_std(runs, ["Acc", "ECE", "test/div/signorm_cos", "test/div/MI"])
    assert row["runs"] == 2
    assert row["Acc"] == pytest.approx(92.0) and row["Acc_std"] == pytest.approx(2 * 2**0.5)
    assert row["ECE"] == pytest.approx(3.0) and row["ECE_std"] == 0.0  # the NaN run is left out
    assert row["test/div/signorm_cos"] == pytest.approx(0.2)  # raw metrics too
    assert math.isnan(row["test/div/MI"])  # no run logged it
    assert math.isnan(row["test/div/MI_std"])
    default = mean_std(runs)
    assert "Acc" in default and "ECE" not in default  # ECE is missing from run a


def test_a_table_row_keeps_a_nan_or_infinite_value_instead_of_averaging_it_away(tmp_path):
    write_run(tmp_path / "a", tu_metrics(0.90, 0.30, float("nan")))
    write_run(tmp_path / "b", tu_metrics(0.94, float("inf"), 0.03))
    row = aggregate(find_runs([tmp_path]), "x")
    assert row["runs"] == 2 and row["Acc"] == pytest.approx(92.0)
    assert math.isnan(row["ECE"]) and math.isnan(row["ECE_std"])  # one broken seed: broken row
    assert row["NLL"] == math.inf
    write_rows([row], tmp_path / "rows.csv")
    (read,) = read_rows(tmp_path / "rows.csv")
    assert math.isnan(read["ECE"]) and read["NLL"] == math.inf
    assert "MAdds" not in read  # an empty cell is a value the row does not hold


def test_columns_missing_from_some_runs_are_named(tmp_path, capsys):
    write_run(tmp_path / "a", tu_metrics(0.90, 0.30, 0.01))
    metrics = {k: v for k, v in tu_metrics(0.94, 0.36, 0.03).items() if not k.startswith("ood/")}
    write_run(tmp_path / "b", metrics)
    assert set(missing_columns(find_runs([tmp_path]))) == {"AUPR", "AUROC", "FPR95"}
    results_table.main(["--run", f"x={tmp_path}", "--out", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert f"x: warning: AUROC is missing from 1 of 2 runs: {tmp_path / 'b'}" in err


def test_madds_per_image_halves_flops_and_divides_by_the_first_test_batch(three_seeds):
    # 1.92e11 FLOPs for a batch of 64 images = 1.92e11 / (2 * 64) = 1.5e9 multiply-adds each
    assert madds_per_image(1.92e11, 64) == pytest.approx(1.5)
    assert aggregate(find_runs([three_seeds]), "x")["MAdds"] == pytest.approx(1.5)
    assert aggregate(find_runs([three_seeds]), "x", test_batch_size=128)["MAdds"] == (
        pytest.approx(0.75)
    )


def test_batch_size_is_read_from_the_saved_cli_config(tmp_path):
    config = {
        "seed_everything": 1,
        "data": {"class_path": "X", "init_args": {"batch_size": 128}},
        "routine": {
            "class_path": "a.SigmaNormClassificationRoutine",
            "init_args": {"model": {"init_args": {"tau": 0.5, "num_estimators": 4}}},
        },
    }
    write_run(tmp_path / "run", tu_metrics(0.9, 0.3, 0.01), config=config)
    (run,) = find_runs([tmp_path])
    assert run.settings == {
        "seed": 1,
        "method": "SigmaNormClassificationRoutine",
        "tau": 0.5,
        "num_estimators": 4,
        "test_batch_size": 128,
    }
    config["trainer"] = {"max_epochs": 2, "limit_train_batches": 3, "max_steps": -1}
    write_run(tmp_path / "run", tu_metrics(0.9, 0.3, 0.01), config=config)
    (run,) = find_runs([tmp_path])
    assert run.settings["max_epochs"] == 2 and run.settings["limit_train_batches"] == 3
    row = aggregate([run], "x")
    assert row["seeds"] == "1" and row["max_epochs"] == 2 and row["limit_train_batches"] == 3
    assert "max_steps" not in row  # -1: no bound
    assert aggregate([run], "x")["MAdds"] == pytest.approx(0.75)


def test_without_a_batch_size_madds_is_left_out(tmp_path):
    write_run(tmp_path / "run", tu_metrics(0.9, 0.3, 0.01))
    assert "MAdds" not in aggregate(find_runs([tmp_path]), "x")


@pytest.mark.parametrize("bad", [0, -64, 64.0, True])
def test_madds_rejects_a_bad_batch_size(bad):
    with pytest.raises(ValueError, match=f"images_per_batch must be a positive integer.*{bad!r}"):
        madds_per_image(1e9, bad)


def test_command_appends_our_row_to_the_published_block(three_seeds, tmp_path, capsys):
    out = tmp_path / "tables"
    header, body = results_table.main(
        [
            "--run",
            f"σN-Ens (ours)={three_seeds}",
            "--published",
            "rn18",
            "--where",
            "dataset=CIFAR-10",
            "arch=ResNet-18",
            "--out",
            str(out),
        ]
    )
    assert header == ["method", "Acc", "NLL", "ECE", "AUPR", "AUROC", "FPR95", "Params", "MAdds"]
    assert body[0] == ["Single", "94.0", "0.238", "3.5", "94.0", "89.7", "33.8", "11.17", "0.56"]
    assert len(body) == 10  # the 9 published CIFAR-10 rows, then ours
    assert body[-1] == [
        "σN-Ens (ours) (n=3)",
        "92.0 ± 2.0",
        "0.330 ± 0.030",
        "2.00 ± 1.00",
        "95.0",
        "90.0",
        "20.0",
        "11.39",
        "1.5",
    ]
    markdown = (out / "table.md").read_text()
    assert "| σN-Ens (ours) (n=3) | 92.0 ± 2.0 |" in markdown
    latex = (out / "table.tex").read_text()
    assert r"\label{tab:rn18-ours}" in latex and r"92.0 $\pm$ 2.0" in latex
    assert r"$\sigma$N-Ens (ours)" in latex
    (row,) = results_table.read_rows(out / "rows.csv")
    assert row["method"] == "σN-Ens (ours)" and row["Acc"] == pytest.approx(92.0)


def test_shift_tables_get_one_row_per_severity(tmp_path):
    shift = {
        f"shift/s{k}/{m}": v
        for k in range(1, 6)
        for m, v in (("Acc", 0.8 - 0.1 * k), ("NLL", 0.5 * k), ("ECE", 0.01 * k))
    }
    write_run(tmp_path / "run", tu_metrics(0.9, 0.3, 0.01, **shift))
    _, body = results_table.main(
        [
            "--run",
            f"ours={tmp_path / 'run'}",
            "--published",
            "shift_cnn",
            "--where",
            "arch=ResNet-50",
            "dataset=CIFAR-100-C",
            "--out",
            str(tmp_path / "t"),
        ]
    )
    ours = body[-5:]
    assert [r[:2] for r in ours] == [["ours (n=1)", str(k)] for k in range(1, 6)]
    assert ours[2][2:] == ["50.0", "1.500", "3.00"]  # severity 3: Acc 50 %, NLL 1.5, ECE 3 %


def test_near_far_ood_columns_fill_the_vit_table(tmp_path):
    write_run(
        tmp_path / "run",
        tu_metrics(0.9, 0.3, 0.01, **{"ood_near/AUROC": 0.8123, "ood_far/AUROC": 0.9}),
    )
    header, body = results_table.main(
        [
            "--run",
            f"ours={tmp_path / 'run'}",
            "--published",
            "vit",
            "--where",
            "dataset=CIFAR-100",
            "--out",
            str(tmp_path / "t"),
        ]
    )
    assert body[0][header.index("Acc")] == "92.77 ± 0.10"
    assert body[-1][header.index("AUROC_near")] == "81.23"
    assert body[-1][header.index("AUROC_far")] == "90.00"
    assert body[-1][header.index("MAdds")] == "--"  # no batch size known


def test_command_errors_name_the_bad_input(tmp_path, capsys):
    with pytest.raises(SystemExit):
        results_table.main(["--run", "no-equals-sign"])
    assert "--run expects NAME=VALUE, got 'no-equals-sign'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        results_table.main(["--run", f"x={tmp_path / 'missing'}"])
    assert "is neither a results file nor a folder" in capsys.readouterr().err
    write_run(tmp_path / "run", tu_metrics(0.9, 0.3, 0.01))
    with pytest.raises(SystemExit):
        results_table.main(
            ["--run", f"x={tmp_path}", "--published", "main", "--where", "dataset=MNIST"]
        )
    err = capsys.readouterr().err
    assert "0 rows of table 'main' match {'dataset': 'MNIST'}" in err
    assert "valid values: dataset: CIFAR-10, CIFAR-100; arch: ResNet-50, WideResNet-28-10" in err


def test_where_accepts_the_tables_aliases(three_seeds, tmp_path):
    _, body = results_table.main(
        [
            "--run",
            f"ours={three_seeds}",
            "--published",
            "main",
            "--where",
            "dataset=C100",
            "arch=WRN-28-10",
            "--out",
            str(tmp_path / "t"),
        ]
    )
    assert len(body) == 10 and body[0][0] == "Single"  # the nine published rows of the block


def test_empty_results_file_is_rejected(tmp_path):
    (tmp_path / "results.csv").write_text("test/cls/Acc\n")
    with pytest.raises(ValueError, match="holds no result row"):
        find_runs([tmp_path])
