"""The throughput benchmark in reduced mode: every method gets a row, the numbers are sane."""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

BENCHMARK = Path(__file__).resolve().parents[3] / "benchmarks" / "throughput.py"


@pytest.fixture(scope="module")
def throughput():
    spec = importlib.util.spec_from_file_location("throughput", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    sys.modules["throughput"] = module
    spec.loader.exec_module(module)
    return module


#: The rows that cannot run on a preset, with the start of the reason the table gives; every
#: other row must be measured. On a ViT, TorchUncertainty 0.13 has no packed model, its
#: ``batch_ensemble`` converter fails, and FiLM has no BatchNorm to modulate.
UNAVAILABLE = {
    "cpu-resnet18": {},
    "gpu-vit-b16": {
        "Packed-Ensembles": "TorchUncertainty 0.13 has no Packed-Ensembles ViT",
        "BatchEnsemble": "TorchUncertainty's batch_ensemble fails on ViT",
        "FiLM-Ensemble": "FiLM-Ensemble modulates BatchNorm layers",
    },
}


def _assert_only_expected_rows_unavailable_and_the_rest_measured(throughput, rows, preset):
    unavailable = {name: row.unavailable for name, row in rows.items() if row.unavailable}
    assert set(unavailable) == set(UNAVAILABLE[preset]), unavailable
    for name, reason in UNAVAILABLE[preset].items():
        assert unavailable[name].startswith(reason), unavailable[name]
    eval_only = {throughput.PREDICT_ROW, throughput.ONE_PASS_ROW}  # eval_ips only
    for name, row in rows.items():
        if name in eval_only or name.startswith("σN-Ens, eval in parts of"):
            assert row.eval_ips > 0, row
        elif name not in unavailable:
            assert row.params > 0 and row.madds > 0 and row.train_ms > 0, row
            assert row.eval_ips > 0 and row.peak_mb > 0, row


@pytest.mark.slow
def test_reduced_cpu_run_has_every_method_and_consistent_ratios(throughput, capsys, tmp_path):
    csv_path = tmp_path / "rows.csv"
    report = throughput.main(
        [
            "--preset",
            "cpu-resnet18",
            "--reduced",
            "--repeats",
            "1",
            "--warmup",
            "1",
            "--csv",
            str(csv_path),
            "--eval-parts",
            "8",
        ]
    )
    table = capsys.readouterr().out
    names = throughput.method_names(throughput.PRESETS["cpu-resnet18"])
    assert set(names) >= {
        "Single model",
        "Deep Ensembles",
        "Packed-Ensembles",
        "BatchEnsemble",
        "FiLM-Ensemble",
        "σN-Ens",
        "σN-Ens (expand at input)",
    }
    parts = throughput.parts_row(8)
    for name in [*names, throughput.PREDICT_ROW, throughput.ONE_PASS_ROW, parts]:
        assert f"| {name} " in table
    assert "; allocator: " in table  # what decides how freed activations are reused on CPU
    rows = report.rows
    _assert_only_expected_rows_unavailable_and_the_rest_measured(throughput, rows, "cpu-resnet18")
    single, deep = rows["Single model"], rows["Deep Ensembles"]
    assert deep.params == 4 * single.params  # M independent copies
    assert deep.madds == pytest.approx(4 * single.madds, rel=1e-3)
    # Late expansion runs the stem once instead of M times: fewer multiply-adds.
    late, early = rows["σN-Ens"], rows["σN-Ens (expand at input)"]
    assert late.madds < early.madds and late.params == early.params
    assert rows[throughput.PREDICT_ROW].eval_ips > 0
    assert rows[throughput.ONE_PASS_ROW].eval_ips > 0 and rows[parts].eval_ips > 0
    verdicts = [line for line in table.splitlines() if line.startswith(("PASS", "MISS"))]
    assert len(verdicts) == len(report.targets) == 8
    assert report.norm_kernels == report.signorm_layers > 1  # one kernel per σNorm layer
    assert f"kernels per σN-Ens pass over all B·M rows: {report.norm_kernels} for" in table
    assert csv_path.read_text().count("\n") == len(rows) + len(report.norm_ms) + 1


@pytest.mark.slow
def test_reduced_vit_preset_runs_its_transformer_rows_in_bf16_on_cpu(throughput):
    report = throughput.run_benchmark(
        "gpu-vit-b16", reduced=True, device="cpu", repeats=1, warmup=0, log=lambda text: None
    )
    rows = report.rows
    assert "LoRA-Ensemble" in rows
    _assert_only_expected_rows_unavailable_and_the_rest_measured(throughput, rows, "gpu-vit-b16")
    assert rows["σN-Ens"].madds < rows["σN-Ens (expand at input)"].madds


def test_cpu_peak_memory_counts_live_storages_until_freed(throughput):
    weight = torch.ones(1024)  # 4 KiB persistent
    with throughput.TensorMemoryPeak([weight]) as tracker:
        first = weight * 2  # +4 KiB
        del first  # freed
        second = weight + 1  # +4 KiB again: the peak stays at 8 KiB
        third = torch.cat([second, second])  # +8 KiB: peak 16 KiB
        del second, third
    assert tracker.peak == 16 * 1024
    assert tracker.live == 4 * 1024


def test_bad_benchmark_arguments_are_rejected(throughput):
    with pytest.raises(ValueError, match=r"Unknown preset 'tpu-resnet'; valid: \['cpu-resnet18'"):
        throughput.run_benchmark("tpu-resnet")
    with pytest.raises(ValueError, match=r"precision must be .*got 'fp8'"):
        throughput.Runner(torch.device("cpu"), "fp8", channels_last=False)
    with pytest.raises(SystemExit):
        throughput.parse_args(["--repeats", "0"])
