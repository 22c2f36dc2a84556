"""The itc study (spec 003): distribution-calibrated aggregation of repeated three-way votes.

* :mod:`.study`: the contract (``load``, ``plan``, ``run_replicate``, ``summarise``);
* :mod:`.config`: settings and the methods compared, shared with the report;
* :mod:`.data`: three-way vote counts per item and budget;
* :mod:`.report`: means over splits, corrected resampled t across splits, top clusters, ``report.md`` and figures.
"""
