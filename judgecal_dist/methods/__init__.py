"""Estimators: sklearn-style aggregators and calibrators over numpy arrays (no I/O, no Spark, no Ray)."""

from judgecal_dist.methods.aggregate import MajorityVote, OneCoin
from judgecal_dist.methods.calibrate import PlattCalibrator
from judgecal_dist.methods.votes import MISSING, VOTE_A, VOTE_B, check_votes, count_judge_votes, signed_votes

__all__ = [
    "MISSING",
    "VOTE_A",
    "VOTE_B",
    "MajorityVote",
    "OneCoin",
    "PlattCalibrator",
    "check_votes",
    "count_judge_votes",
    "signed_votes",
]
