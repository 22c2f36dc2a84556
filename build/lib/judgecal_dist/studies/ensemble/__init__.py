"""The ensemble study (spec 004): ensemble scoring and cost-aware escalation on repeated-sample score collections.

* :mod:`.study`: the contract (``load``, ``plan``, ``run_replicate``, ``summarise``);
* :mod:`.config`: settings and the run's input, shared with the report and figures;
* :mod:`.report` and :mod:`.figures`: the summary, statistics, ``report.md`` and figures.
"""
