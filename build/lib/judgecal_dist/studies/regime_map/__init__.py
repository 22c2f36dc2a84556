"""The finite-calibration regime map (FCPS, spec 002): which aggregator family can N labels afford?

* :mod:`.study`: the contract (``load``, ``plan``, ``run_replicate``, ``summarise``);
* :mod:`.config`: settings, shared with the report;
* :mod:`.data`: grouped FCPS blocks and their pattern cells;
* :mod:`.report`: summary, figures and ``report.md``.
"""
