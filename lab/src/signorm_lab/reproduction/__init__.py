"""Checking a reproduction against the paper: its tables as data, results table, regression check.

What a user's CI runs against the paper; each command takes ``--help``:

* :mod:`.published`: the paper's tables as data (CSV + JSON sidecars), e.g. ``load_table("main")``;
* :mod:`.results_table` (``signorm-results-table``): TorchUncertainty ``results.csv`` files →
  mean ± std rows appended to a published table (Markdown, LaTeX and CSV);
* :mod:`.regression` (``signorm-regression``): compare a results table, or runs, with a published
  or reference row under per-metric tolerances, exit 1 when out of tolerance.

Shared by the commands: :mod:`.runs` (finding runs and their settings) and :mod:`.tables` (the
plain-text and Markdown table formatter). Imports neither torch nor the method's core.
"""
