r"""Steps 2 to 4 of the pipeline: maps from a raw probability score to a calibrated one, and conformal sets
(spec §3.2, §3.3, §3.5).

Every calibrator takes a 1-D score :math:`s \in [0, 1]` (the aggregator's :math:`P(Y=1)`), clips it to
:math:`[\varepsilon, 1-\varepsilon]` before any log or logit (spec §3.4), is fitted by ``fit(s, y[,
sample_weight])`` on the calibrator items, and exposes ``predict_proba(s)`` with columns ``[P(Y=0), P(Y=1)]``.
Each family lives in its own module, on the checks of :mod:`~judgecal_dist.methods.calibration.base`:

* :class:`~judgecal_dist.methods.calibration.platt.PlattCalibrator`: :math:`\sigma(\alpha\,\mathrm{logit}\,s
  + \beta [+ \gamma^\top x])`, eqs. (2)-(3);
* :class:`~judgecal_dist.methods.calibration.temperature.TemperatureScaling`: :math:`\sigma(\mathrm{logit}\,s / T)`;
* :class:`~judgecal_dist.methods.calibration.beta.BetaCalibration`: :math:`\sigma(a\ln s - b\ln(1-s) + c)`,
  :math:`a, b \ge 0`, elastic net toward the identity, eq. (4); many score vectors at once in
  :mod:`~judgecal_dist.methods.calibration.batched_beta`;
* :class:`~judgecal_dist.methods.calibration.isotonic.IsotonicCalibrator`: PAV step map;
* :class:`~judgecal_dist.methods.calibration.conformal.SplitConformal`: split-conformal prediction sets (Step 4).

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026.
"""

from __future__ import annotations

from judgecal_dist.methods.calibration.beta import BetaCalibration
from judgecal_dist.methods.calibration.conformal import SplitConformal
from judgecal_dist.methods.calibration.isotonic import IsotonicCalibrator
from judgecal_dist.methods.calibration.platt import PlattCalibrator
from judgecal_dist.methods.calibration.temperature import TemperatureScaling

__all__ = ["BetaCalibration", "IsotonicCalibrator", "PlattCalibrator", "SplitConformal", "TemperatureScaling"]
