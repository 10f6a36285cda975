"""The one table formatter of the paper's commands: aligned plain text and Markdown."""

import pytest

from signorm_lab.reproduction.tables import format_table, markdown_table

HEADER = ["method", "Acc", "verdict"]
BODY = [["σN-Ens", "92.0", "ok"], ["Packed", "100.25", "FAIL"]]


def test_plain_text_pads_columns_and_rules_off_the_header():
    lines = format_table(HEADER, BODY, align="lrl").splitlines()
    assert lines == [
        "method     Acc  verdict",
        "-----------------------",
        "σN-Ens    92.0  ok",
        "Packed  100.25  FAIL",
    ]


def test_default_alignment_is_first_column_left_numbers_right():
    lines = format_table(["M", "cos"], [["2", "0.5"], ["16", "0.25"]]).splitlines()
    assert lines[2:] == ["2    0.5", "16  0.25"]


def test_markdown_marks_right_aligned_columns():
    assert format_table(HEADER, BODY, markdown=True) == (
        "| method | Acc | verdict |\n|---|---:|---:|\n"
        "| σN-Ens | 92.0 | ok |\n| Packed | 100.25 | FAIL |\n"
    )
    assert format_table(HEADER, [], markdown=True, align="lll").splitlines()[1] == "|---|---|---|"


@pytest.mark.parametrize(
    ("body", "align", "match"),
    [
        ([["a", "b"]], None, r"every row needs 3 cells .*got \['a', 'b'\]"),
        (BODY, "lr", r"align needs one 'l' or 'r' per column \(3\), got 'lr'"),
        (BODY, "lcr", r"got 'lcr'"),
    ],
)
def test_ragged_rows_and_bad_alignment_are_rejected(body, align, match):
    with pytest.raises(ValueError, match=match):
        format_table(HEADER, body, align=align)


def test_markdown_table_of_dict_rows_rounds_floats_and_leaves_missing_cells_empty():
    rows = [{"tau": 0.1, "runs": 3, "Acc": 92.123456}, {"tau": 1.0, "runs": 3}]
    assert markdown_table(rows, ["tau", "runs", "Acc"]).splitlines()[2:] == [
        "| 0.1 | 3 | 92.12 |",
        "| 1 | 3 |  |",
    ]
