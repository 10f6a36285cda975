"""The near/far OOD and shift tables print percent (as TorchUncertainty's tables), NLL in nats."""

from rich.console import Console

from signorm_lab.evaluation.printing import ood_shift_tables, results_tables


def _render(results):
    console = Console(record=True, width=200)
    for table in ood_shift_tables(results):
        console.print(table)
    return console.export_text()


def test_ood_and_shift_values_print_in_percent_with_the_unit_in_the_header():
    text = _render(
        {
            "ood_near/AUROC": 0.75,
            "ood_near/CIFAR100/FPR95": 0.123456,
            "shift/s1/Acc": 0.5,
            "shift/s1/NLL": 1.25,
            "shift/mean/ECE": 0.0312,
        }
    )
    assert "AUROC (%)" in text and "FPR95 (%)" in text and "Acc (%)" in text
    assert "ECE (%)" in text and "NLL (nats)" in text
    assert "75.000" in text and "12.346" in text and "50.000" in text and "3.120" in text
    assert "1.25000" in text  # NLL is not scaled
    assert "0.75000" not in text and "0.50000" not in text


def _render_all(results, inputs=None):
    console = Console(record=True, width=100)
    for table in results_tables(results, "test", inputs):
        console.print(table)
    return console.export_text()


def test_test_tables_show_whole_names_diversity_and_flops_per_input():
    text = _render_all(
        {
            "test/cls/Acc": 0.9,
            "ood/AUROC": 0.8,
            "ood/ens_Disagreement": 0.7,
            "test/div/signorm_cos": 0.5,
            "test/div/signorm_cos_regularized": 0.05,
            "test/div/jensen_gap": 0.04,
            "test/ens_MI": 0.06,
            "test/ens_Disagreement": 0.08,
            "test/div/some_new_measure": 0.3,
            "test/cplx/flops": 1.1e9,
            "test/cplx/params": 7e5,
            "ood_near/AUROC": 0.75,
            "shift/s1/Acc": 0.5,
        },
        inputs=64,
    )
    assert "…" not in text  # TorchUncertainty cuts names at 12 characters: ens_Disagre…
    assert "ens_Disagreement" in text and "90.000%" in text and "80.000%" in text
    for name in (
        "Ensemble diversity",
        "σNorm-cos (all layers)",
        "σNorm-cos (regularized layers)",
        "Jensen gap",
        "Mutual information U_mod (nats)",
        "Disagreement",
        "some_new_measure",
    ):
        assert name in text
    assert "FLOPs (first test batch, 64 inputs)" in text and "1.10 G" in text
    assert "FLOPs per input" in text and "17.19 M" in text  # 1.1e9 / 64
    assert "Near / far OOD detection" in text and "Corruption shift" in text


def test_members_print_their_accuracy_in_percent_and_nll_beside_the_health_counts():
    text = _render_all(
        {
            "test/cls/Acc": 0.9,
            "test/member_0/Acc": 0.875,
            "test/member_0/NLL": 0.4,
            "test/member_1/Acc": 0.3125,
            "test/member_1/NLL": 2.5,
            "test/health/dead_members": 1.0,
            "test/health/one_class": 0.0,
        }
    )
    members = text[text.index("Members") :]
    assert "Acc (%)" in members and "NLL (nats)" in members
    assert "87.500" in members and "31.250" in members and "2.50000" in members
    assert "0.87500" not in text  # a fraction printed in percent, as TorchUncertainty's Acc
    health = text[text.index("Member health") :]
    assert "dead_members" in health and "one_class" in health


def test_nan_coverage_and_the_ood_ensemble_measures_say_what_they_are():
    text = _render_all(
        {
            "test/sc/Cov_5Risk": float("nan"),
            "ood/ens_MI": 0.2,
            "test/ens_MI": 0.05,
            "test/cls/NLL": float("nan"),
        }
    )
    assert "nan%" not in text and "none (no coverage has risk <= 5%)" in text
    assert "ens_MI = U_mod (nats), OOD set" in text
    assert "Mutual information U_mod (nats), test set" in text
