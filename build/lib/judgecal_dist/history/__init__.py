"""Run history and drift: every run appends to ``<output>/history``; ``judgecal drift`` compares judges across runs.

:mod:`~judgecal_dist.history.store` (the history tables), :mod:`~judgecal_dist.history.judges` (per-judge
statistics of a verdict table), :mod:`~judgecal_dist.history.recorder` (the runner's hook) and
:mod:`~judgecal_dist.history.drift` (comparison, multiplicity control, report).
"""
