"""Which judges to use: curators, subset search and the diagnostics that flag judges (spec 000 §3.6-3.8).

* :mod:`~judgecal_dist.methods.selection.curate`: rules that pick a judge subset before aggregation;
* :mod:`~judgecal_dist.methods.selection.search`: same-pipeline subset search over a caller-supplied score;
* :mod:`~judgecal_dist.methods.selection.diagnostics`: calibration-set scope diagnostics P1-P3, below-chance flag;
* :mod:`~judgecal_dist.methods.selection.irt`: 2PL IRT of judge correctness and its variance decomposition.
"""

from judgecal_dist.methods.selection.curate import ForwardSelection
from judgecal_dist.methods.selection.irt import TwoPLIRT

__all__ = ["ForwardSelection", "TwoPLIRT"]
