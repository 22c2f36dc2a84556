"""FCPS: calibrators over the joint output patterns of a judge-path prefix, and their selection (spec 002).

* :mod:`~judgecal_dist.methods.fcps.joint_table`: the joint output-table calibrator and its pattern keys;
* :mod:`~judgecal_dist.methods.fcps.scalar_families`: low-dimensional stackers of the prefix judges' verdicts;
* :mod:`~judgecal_dist.methods.fcps.paths`: judge orderings (paths) built on the selection block;
* :mod:`~judgecal_dist.methods.fcps.select`: validation selection over (path, prefix size, family);
* :mod:`~judgecal_dist.methods.fcps.cold_start`: the guarded cold start with the one-standard-error rule.
"""

from judgecal_dist.methods.fcps.cold_start import GuardedColdStart
from judgecal_dist.methods.fcps.joint_table import HybridResidualShrinkage, JointTableCalibrator
from judgecal_dist.methods.fcps.paths import JudgePath
from judgecal_dist.methods.fcps.select import FCPSSelector

__all__ = ["FCPSSelector", "GuardedColdStart", "HybridResidualShrinkage", "JointTableCalibrator", "JudgePath"]
