"""Estimators: sklearn-style aggregators and calibrators over numpy arrays (no I/O, no Spark, no Ray).

One room per family: :mod:`~judgecal_dist.methods.aggregation` (Step 1: votes to a raw probability),
:mod:`~judgecal_dist.methods.calibration` (Steps 2-4: calibrators and conformal sets),
:mod:`~judgecal_dist.methods.selection` (curators, subset search, judge diagnostics),
:mod:`~judgecal_dist.methods.fcps` (joint-pattern calibrators and their selection),
:mod:`~judgecal_dist.methods.repeated` (repeated samples: Davidson, self-consistency, ensembles, routing) and
:mod:`~judgecal_dist.methods.continuous` (correctors of a continuous score). :mod:`~judgecal_dist.methods.pipeline`
composes the first two rooms into the calibration pipeline, defined once. The estimators of the pipeline and the
vote matrix's names are re-exported here.
"""

from judgecal_dist.methods.aggregation import (
    AccuracyWeighted,
    CountAggregator,
    DawidSkene,
    LogisticStacking,
    LogOddsWeighted,
    MajorityVote,
    OneCoin,
)
from judgecal_dist.methods.aggregation.votes import (
    MISSING,
    VOTE_A,
    VOTE_B,
    check_votes,
    count_judge_votes,
    signed_votes,
)
from judgecal_dist.methods.calibration import (
    BetaCalibration,
    IsotonicCalibrator,
    PlattCalibrator,
    SplitConformal,
    TemperatureScaling,
)

__all__ = [
    "MISSING",
    "VOTE_A",
    "VOTE_B",
    "AccuracyWeighted",
    "BetaCalibration",
    "CountAggregator",
    "DawidSkene",
    "IsotonicCalibrator",
    "LogOddsWeighted",
    "LogisticStacking",
    "MajorityVote",
    "OneCoin",
    "PlattCalibrator",
    "SplitConformal",
    "TemperatureScaling",
    "check_votes",
    "count_judge_votes",
    "signed_votes",
]
