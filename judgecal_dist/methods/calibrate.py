r"""Steps 2 and 3 of the pipeline: maps from a raw probability score to a calibrated one (spec §3.2, §3.3).

Every calibrator takes a 1-D score :math:`s \in [0, 1]` (the aggregator's :math:`P(Y=1)`), clips it to
:math:`[\varepsilon, 1-\varepsilon]` before any log or logit (spec §3.4), is fitted by ``fit(s, y[,
sample_weight])`` on the calibrator items, and exposes ``predict_proba(s)`` with columns ``[P(Y=0), P(Y=1)]``.
Each family lives in its own module; this module gathers them:

* :class:`~judgecal_dist.methods.platt.PlattCalibrator`: :math:`\sigma(\alpha\,\mathrm{logit}\,s + \beta
  [+ \gamma^\top x])`, eqs. (2)-(3);
* :class:`~judgecal_dist.methods.temperature.TemperatureScaling`: :math:`\sigma(\mathrm{logit}\,s / T)`;
* :class:`~judgecal_dist.methods.beta.BetaCalibration`: :math:`\sigma(a\ln s - b\ln(1-s) + c)`, :math:`a, b \ge 0`,
  elastic net toward the identity, eq. (4);
* :class:`~judgecal_dist.methods.isotonic.IsotonicCalibrator`: PAV step map.

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv:2605.09702, 2026.
"""

from __future__ import annotations

from judgecal_dist.methods.beta import BetaCalibration
from judgecal_dist.methods.isotonic import IsotonicCalibrator
from judgecal_dist.methods.platt import PlattCalibrator
from judgecal_dist.methods.temperature import TemperatureScaling

__all__ = ["BetaCalibration", "IsotonicCalibrator", "PlattCalibrator", "TemperatureScaling"]
