"""Repeated samples per item: three-way votes with ties (spec 003) and k scores per response (spec 004).

* :mod:`~judgecal_dist.methods.repeated.davidson`: Bradley-Terry-Davidson aggregation with the MAE Bayes action;
* :mod:`~judgecal_dist.methods.repeated.self_consistency`: self-consistency baselines and their weighted variants;
* :mod:`~judgecal_dist.methods.repeated.vote_simulation`: seeded simulators of repeated three-way votes;
* :mod:`~judgecal_dist.methods.repeated.ensemble`: ensemble scoring over k repeated samples per response;
* :mod:`~judgecal_dist.methods.repeated.routing`: cost-aware escalation driven by the cheap tier's dispersion.
"""

from judgecal_dist.methods.repeated.davidson import DavidsonAggregator
from judgecal_dist.methods.repeated.routing import HardVarianceRouting, SoftBlend, VarianceInformedEnsemble

__all__ = ["DavidsonAggregator", "HardVarianceRouting", "SoftBlend", "VarianceInformedEnsemble"]
