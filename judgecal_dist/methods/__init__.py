"""Estimators: sklearn-style aggregators and calibrators over numpy arrays (no I/O, no Spark, no Ray)."""

from judgecal_dist.methods.aggregate import CountAggregator, MajorityVote, OneCoin
from judgecal_dist.methods.beta import BetaCalibration
from judgecal_dist.methods.conformal import SplitConformal
from judgecal_dist.methods.dawid_skene import DawidSkene
from judgecal_dist.methods.isotonic import IsotonicCalibrator
from judgecal_dist.methods.platt import PlattCalibrator
from judgecal_dist.methods.stacking import LogisticStacking
from judgecal_dist.methods.temperature import TemperatureScaling
from judgecal_dist.methods.votes import MISSING, VOTE_A, VOTE_B, check_votes, count_judge_votes, signed_votes
from judgecal_dist.methods.weighted import AccuracyWeighted, LogOddsWeighted

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
