"""Reporting: results tables, regression checks against published numbers, sweeps and figures.

One command per module (``python -m torch_uncertainty_signorm.reporting.<module> --help``):

* :mod:`.results_table`: TorchUncertainty ``results.csv`` files → mean ± std rows appended to
  a published table (Markdown and LaTeX);
* :mod:`.regression`: compare a results table with a published or reference row under
  per-metric tolerances, exit 1 when out of tolerance;
* :mod:`.sweeps`: τ, M and λ sweeps (digits on CPU, or any recipe);
* :mod:`.figures`: the paper's sweep tables and figures from the runs' ``results.csv`` files;
* :mod:`.digits_study`: the CPU study on digits behind ``docs/digits_study``.
"""
