"""The continuous study's ``flow_solver`` reaches the flow: torchdiffeq's rk4 and the built-in loop agree."""

from __future__ import annotations

import numpy as np
import pytest

from judgecal_dist.engine.cluster.flow_tasks import FlowJob, fit_predict_flows
from judgecal_dist.studies.continuous import study as continuous

pytest.importorskip("torchdiffeq")


def test_flow_solver_setting_reaches_the_stacked_fit():
    rng = np.random.default_rng(0)
    j = rng.uniform(1, 10, (1, 40))
    y = np.clip(0.8 * j + 1 + rng.normal(0, 0.5, j.shape), 1, 10)
    out = {}
    for solver in ("rk4", "torchdiffeq"):
        config = continuous.Config(data="x", flow_epochs=30, flow_solver=solver)
        settings = continuous.flow_settings(config)
        assert settings["solver"] == solver
        job = FlowJob(
            j=j,
            y=y,
            rubric=np.zeros((1, 40), dtype=np.int64),
            test_j=np.linspace(1, 10, 7)[None, :],
            test_rubric=np.zeros((1, 7), dtype=np.int64),
            seeds=(3,),
            n_rubrics=1,
            settings=settings,
            n_passes=4,
        )
        out[solver] = fit_predict_flows(job, use_ray=False).mean
    # Two fourth-order steppers (classical rk4 and Kutta's 3/8 rule) over the same 10 steps: equal to O(h^5),
    # so the trained flows and their predictions agree to a few thousandths of a score point, not bit for bit.
    np.testing.assert_allclose(out["torchdiffeq"], out["rk4"], atol=0.02)
    assert not np.array_equal(out["torchdiffeq"], out["rk4"])
