"""Step 1 of the pipeline: aggregators that turn a panel's votes into a raw probability (spec 000 §3.1).

* :mod:`~judgecal_dist.methods.aggregation.votes`: the dense vote matrix every aggregator reads, per-judge counts;
* :mod:`~judgecal_dist.methods.aggregation.aggregate`: majority vote and the one-coin model;
* :mod:`~judgecal_dist.methods.aggregation.weighted`: accuracy- and log-odds-weighted votes;
* :mod:`~judgecal_dist.methods.aggregation.dawid_skene`: Dawid-Skene EM (one confusion matrix per judge);
* :mod:`~judgecal_dist.methods.aggregation.stacking`: logistic stacking with out-of-fold scores.
"""

from judgecal_dist.methods.aggregation.aggregate import CountAggregator, MajorityVote, OneCoin
from judgecal_dist.methods.aggregation.dawid_skene import DawidSkene
from judgecal_dist.methods.aggregation.stacking import LogisticStacking
from judgecal_dist.methods.aggregation.weighted import AccuracyWeighted, LogOddsWeighted

__all__ = [
    "AccuracyWeighted",
    "CountAggregator",
    "DawidSkene",
    "LogOddsWeighted",
    "LogisticStacking",
    "MajorityVote",
    "OneCoin",
]
