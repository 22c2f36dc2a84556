"""The continuous study's exported corrector: the recommended one, fitted as the study fitted it, as a model.

``export: auto`` takes the corrector the Recommendation names (the lowest rubric-mean MAE at the largest budget;
``raw`` is no model, so then the best of the others) for the real judge where that corrector's MAE is lowest;
``export: <corrector>@<judge>`` names another. The model is that judge's corrector for the first seed (``seed``) at
the largest budget, on the very anchors of the study's rows for that seed:

- ``linear_hb``: the study's own fit (NUTS when the first seed is a NUTS seed, else the exact conjugate
  posterior), read off its rows, which keep each fit's posterior moments; parts of an earlier version without
  them are refitted the same way;
- ``ot``: ``MarginalOT`` per rubric on those anchors (the rows' maps, a deterministic fit);
- ``flow``: one :class:`~judgecal_dist.methods.continuous.score_flow.ScoreFlow` with the study's settings on those
  anchors (the study trains its flows in stacks, so this is the same recipe, not the same weights);
- ``flow_per_rubric``: one such flow per rubric on that rubric's anchors, each with its member's seed
  (``judgecal.flow-per-rubric/v1``).

Scores in the exported model are on RewardBench 2's 1-10 (``input_range``), corrected onto 1-5 as in the study.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.io.adapters.rb2k8 import SCORE_RANGE
from judgecal_dist.methods.continuous.hb_linear import ConvergenceGateWarning, HierarchicalLinear
from judgecal_dist.methods.continuous.linear_conjugate import ConjugateLinear, sufficient_stats
from judgecal_dist.methods.continuous.score_flow import ScoreFlow
from judgecal_dist.methods.continuous.score_transport import MarginalOT
from judgecal_dist.models import (
    flow_from_estimator,
    flows_per_rubric_from_estimators,
    linear_from_conjugate,
    linear_from_hb,
    linear_from_moments,
    ot_from_estimators,
)
from judgecal_dist.studies.continuous.config import EXPORTABLE, Config, ContinuousInput
from judgecal_dist.studies.continuous.design import RUBRIC_STRIDE, arm_data, draw_anchors, flow_settings, split

__all__ = ["EXPORTABLE", "exported_choice", "export_corrector"]

SYNTHETIC = "synthetic"


def exported_choice(config: Config, table: pd.DataFrame) -> tuple[str, str]:
    """(corrector, judge) the run exports: ``export`` when set, else the recommended corrector (module doc)."""
    if config.export != "auto":
        corrector, _, judge = config.export.partition("@")
        return corrector, judge
    real = table[table["judge"] != SYNTHETIC]
    hi = real[real["budget"] == real["budget"].max()]
    mae = hi[hi["corrector"].isin(EXPORTABLE)].groupby(["corrector", "judge"])["mae"].mean()
    by_corrector = mae.groupby(level="corrector").mean().sort_values(kind="stable")
    corrector = str(by_corrector.index[0])
    judge = str(mae.loc[corrector].sort_values(kind="stable").index[0])
    return corrector, judge


def export_corrector(
    config: Config, data: ContinuousInput, corrector: str, judge: str, parts: pd.DataFrame | None = None
) -> Any:
    """The model of ``corrector`` fitted on ``judge``'s anchors of seed ``config.seed`` at the largest budget
    (``linear_hb``: the study's own fit, read off its rows in ``parts`` when they hold the posterior moments)."""
    seed, budget = config.seed, int(max(config.budgets))
    anchors = _anchors(config, data, judge)
    j, y, rubric = anchors["j"].to_numpy(), anchors["y"].to_numpy(), anchors["rubric"].to_numpy()
    fitted_on = {
        "items": len(anchors),
        "labelled_items": len(anchors),
        "item_ids": sorted(map(str, anchors["item_id"])),
        "study": "continuous",
        "sample": 0,
    }
    common: dict[str, Any] = {"judge_id": judge, "input_range": SCORE_RANGE, "fitted_on": fitted_on}
    rubrics = list(data.rubrics)
    if corrector == "ot":
        maps = {r: MarginalOT().fit(j[rubric == r], y[rubric == r]) for r in rubrics if (rubric == r).sum() >= 2}
        return ot_from_estimators(maps, **common)
    if corrector == "flow":
        flow = ScoreFlow(n_passes=config.flow_passes, random_state=seed, **flow_settings(config))
        return flow_from_estimator(flow.fit(j, y, rubric), **common)
    if corrector == "flow_per_rubric":  # each rubric's own flow, seeded as the study seeds that member
        flows = {
            r: ScoreFlow(
                n_passes=config.flow_passes, random_state=seed * RUBRIC_STRIDE + i, **flow_settings(config)
            ).fit(j[rubric == r], y[rubric == r], rubric[rubric == r])
            for i, r in enumerate(rubrics)
            if (rubric == r).sum() >= 2
        }
        return flows_per_rubric_from_estimators(flows, **common)
    # the linear corrector's predictive interval, as in the study
    common["interval_level"] = config.interval_level
    kept = _kept_linear(parts, judge, seed, budget, rubrics)
    if corrector == "linear_hb" and kept is not None:
        return _linear_from_rows(kept, rubrics, common)
    return _refit_linear(config, j, y, rubric, rubrics, common)


def _anchors(config: Config, data: ContinuousInput, judge: str) -> pd.DataFrame:
    """``judge``'s anchor rows of seed ``config.seed`` at the largest budget, as the study drew them."""
    rows = arm_data(data, judge, config.seed)
    _, pool = split(rows, config.seed, config.test_groups)
    return draw_anchors(rows, pool, int(max(config.budgets)))


def _linear_from_rows(kept: pd.DataFrame, rubrics: list[str], common: dict[str, Any]) -> Any:
    """The linear corrector of the study's own fit, from the posterior moments its rows keep."""
    cov = [np.array([[aa, ab], [ab, bb]]) for aa, ab, bb in kept[["cov_aa", "cov_ab", "cov_bb"]].to_numpy()]
    return linear_from_moments(
        rubrics=rubrics,
        alpha=kept["alpha"],
        beta=kept["beta"],
        sigma=kept["sigma"],
        cov=np.stack(cov),
        sigma2=kept["sigma2"],
        n_anchors=kept["n_anchors"],
        canary_prob=kept["canary_prob"],
        fit=str(kept["linear_fit"].iloc[0]),
        **common,
    )


def _refit_linear(
    config: Config, j: np.ndarray, y: np.ndarray, rubric: np.ndarray, rubrics: list[str], common: dict[str, Any]
) -> Any:
    """The linear corrector refitted as the study fits its first seed (parts without the posterior moments)."""
    if config.nuts_seeds > 0:  # the first seed is a NUTS seed in the study too
        model = HierarchicalLinear(
            num_warmup=config.nuts_warmup,
            num_samples=config.nuts_samples,
            num_chains=config.nuts_chains,
            random_state=config.seed,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceGateWarning)  # the report says whether the seed converged
            model.fit(j, y, rubric, rubrics=rubrics)
        return linear_from_hb(model, **common)
    masks = np.stack([rubric == r for r in rubrics])
    conj = ConjugateLinear().fit(sufficient_stats(np.where(masks, j, np.nan), np.where(masks, y, np.nan)))
    return linear_from_conjugate(conj, rubrics=rubrics, n_anchors=masks.sum(axis=1), **common)


_MOMENTS = ["alpha", "beta", "sigma", "cov_aa", "cov_ab", "cov_bb", "sigma2", "n_anchors", "canary_prob", "linear_fit"]


def _kept_linear(
    parts: pd.DataFrame | None, judge: str, seed: int, budget: int, rubrics: list[str]
) -> pd.DataFrame | None:
    """The study's linear_hb rows of (judge, seed, budget), one per rubric in ``rubrics`` order; None when the
    parts do not hold them (parts of an earlier version, without the posterior moments)."""
    if parts is None or not set(_MOMENTS) <= set(parts.columns):
        return None
    sel = parts[
        (parts["corrector"] == "linear_hb")
        & (parts["judge"] == judge)
        & (parts["seed"] == seed)
        & (parts["budget"] == budget)
    ]
    sel = sel.drop_duplicates("rubric").set_index("rubric")
    if set(sel.index) != set(rubrics) or sel[_MOMENTS[:-1]].isna().any().any():
        return None
    return sel.loc[rubrics, _MOMENTS]
