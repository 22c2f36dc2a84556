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

from typing import TYPE_CHECKING

from judgecal_dist.extras import lazy_exports

if TYPE_CHECKING:
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

# Imported on first use: applying a model imports judgecal_dist.methods.fitted alone, not every estimator.
_HOMES = {
    "AccuracyWeighted": "judgecal_dist.methods.aggregation",
    "CountAggregator": "judgecal_dist.methods.aggregation",
    "DawidSkene": "judgecal_dist.methods.aggregation",
    "LogisticStacking": "judgecal_dist.methods.aggregation",
    "LogOddsWeighted": "judgecal_dist.methods.aggregation",
    "MajorityVote": "judgecal_dist.methods.aggregation",
    "OneCoin": "judgecal_dist.methods.aggregation",
    "MISSING": "judgecal_dist.methods.aggregation.votes",
    "VOTE_A": "judgecal_dist.methods.aggregation.votes",
    "VOTE_B": "judgecal_dist.methods.aggregation.votes",
    "check_votes": "judgecal_dist.methods.aggregation.votes",
    "count_judge_votes": "judgecal_dist.methods.aggregation.votes",
    "signed_votes": "judgecal_dist.methods.aggregation.votes",
    "BetaCalibration": "judgecal_dist.methods.calibration",
    "IsotonicCalibrator": "judgecal_dist.methods.calibration",
    "PlattCalibrator": "judgecal_dist.methods.calibration",
    "SplitConformal": "judgecal_dist.methods.calibration",
    "TemperatureScaling": "judgecal_dist.methods.calibration",
}


__getattr__ = lazy_exports(__name__, _HOMES)

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
