"""The near/far OOD and shift tables print percent (as TorchUncertainty's tables), NLL in nats."""

from rich.console import Console

from torch_uncertainty_signorm.evaluation.printing import ood_shift_tables


def _render(results):
    console = Console(record=True, width=200)
    for table in ood_shift_tables(results):
        console.print(table)
    return console.export_text()


def test_ood_and_shift_values_print_in_percent_with_the_unit_in_the_header():
    text = _render({
        "ood_near/AUROC": 0.75, "ood_near/CIFAR100/FPR95": 0.123456,
        "shift/s1/Acc": 0.5, "shift/s1/NLL": 1.25, "shift/mean/ECE": 0.0312,
    })
    assert "AUROC (%)" in text and "FPR95 (%)" in text and "Acc (%)" in text
    assert "ECE (%)" in text and "NLL (nats)" in text
    assert "75.000" in text and "12.346" in text and "50.000" in text and "3.120" in text
    assert "1.25000" in text  # NLL is not scaled
    assert "0.75000" not in text and "0.50000" not in text
