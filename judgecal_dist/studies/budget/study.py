"""Label-budget and calibration-fraction sweeps (spec 000 §5.3, §5.4, H.7, H.8; Figure 4 and Table 7 of [1]_).

``mode: budget`` (default). Per split (seed) the evaluation half :math:`\\mathcal E_s` is fixed (keyed hash of
``group_id``, fraction ``calib_fraction``, the same halves as the inclusion study); the calibration half
:math:`\\mathcal C_s` is put in a seeded random order (:func:`budget_order`) and budget :math:`n_k` uses its first
:math:`n_k` items, so budgets are nested within a split. At every budget, on those items only:

* both arms of the inclusion comparison, all judges and top-:math:`k'` (:math:`k'` = ``top_k``, ranked on the
  same :math:`n_k` items), fit the Bayesian one-coin aggregator and beta calibration (elastic net toward the
  identity); each arm is also scored uncalibrated;
* the H.7 matched-calibrator sweep keeps the all-judges one-coin aggregator and swaps the calibrator
  (``calibrators``: beta, Platt, temperature).

Metrics are computed on :math:`\\mathcal E_s`. ``summarise`` averages over splits with corrected resampled t
intervals and runs the joint max-:math:`t` test of spec §5.5(d) on :math:`\\Delta_{s,k}` = NLL(top-:math:`k'` +
beta) - NLL(all + beta) across the budgets (:func:`~judgecal_dist.stats.resampling.multiplier_max_t`).

``mode: fraction``. Per split and calibration fraction :math:`f` (``fractions``), the calibration part is every
group whose split uniform is below :math:`f` (nested in :math:`f` within a split) and the evaluation part is the
rest; the all-judges one-coin aggregator is scored uncalibrated and beta-calibrated (spec §5.4).

References
----------
.. [1] Y. Li. Calibrate, Don't Curate: Label-Efficient Estimation from Noisy LLM Judges. arXiv 2605.09702, 2026,
   §4.4, Appendix G, H.7, H.8.
.. [2] V. Chernozhukov, D. Chetverikov, K. Kato. Gaussian approximations and multiplier bootstrap for maxima of
   sums of high-dimensional random vectors. Ann. Statist. 41(6), 2013, doi:10.1214/13-AOS1161.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.panel import Panel, load_panel
from judgecal_dist.errors import InputError
from judgecal_dist.methods.aggregation.aggregate import OneCoin
from judgecal_dist.methods.aggregation.votes import count_judge_votes
from judgecal_dist.methods.calibration import BetaCalibration, PlattCalibrator
from judgecal_dist.methods.pipeline import Settings, aggregate, apply_calibrator, calibrator
from judgecal_dist.methods.selection.curate import top_k
from judgecal_dist.splits import calibration_mask, split_uniforms
from judgecal_dist.stats.metrics import metric_table
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.budget import report as budget_report
from judgecal_dist.studies.budget.config import CALIBRATORS, FRACTIONS, BudgetInput, Config, Replicate
from judgecal_dist.studies.preflight import check_votes
from judgecal_dist.studies.recommendation import read_choices

__all__ = [
    "NAME",
    "Config",
    "Replicate",
    "BudgetInput",
    "load",
    "preflight",
    "plan",
    "run_replicate",
    "summarise",
    "budget_order",
    "default_budgets",
    "CALIBRATORS",
    "FRACTIONS",
]

NAME = "budget"
#: Spec §5.3 grids: the LLMBar-size one for calibration halves of about 175-210 items, the other for larger ones.
SMALL_GRID = (10, 20, 30, 50, 75, 100, 150)
LARGE_GRID = (10, 20, 50, 100, 200, 300, 500, 1000)
#: Nominal calibration size (floor(calib_fraction * n_items)) up to which SMALL_GRID is used.
SMALL_GRID_MAX_CAL = 250
#: The budget order of split ``seed`` sorts the split uniforms of seed ``seed + ORDER_SEED_OFFSET``: a keyed hash
#: independent of the one that drew the halves, and far from any split seed a config plans.
ORDER_SEED_OFFSET = 1 << 40


def default_budgets(n_cal_nominal: int) -> tuple[tuple[int, ...], str]:
    """The spec §5.3 grid for a calibration half of about ``n_cal_nominal`` items, and its name."""
    if n_cal_nominal <= SMALL_GRID_MAX_CAL:
        return SMALL_GRID, "llmbar-size"
    return LARGE_GRID, "large"


def budget_order(
    group_keys: npt.ArrayLike, seed: int, calib_fraction: float
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Calibration items of split ``seed`` in budget order, and the evaluation items (ascending).

    Budget :math:`n_k` of the split is ``order[:n_k]``: nested in :math:`k` and disjoint from the evaluation half,
    which is the same for every budget (spec §5.3, §7 pitfall 6). The order sorts the keyed-hash uniforms of seed
    ``seed + ORDER_SEED_OFFSET`` (items of one group stay together; ties keep item order), so it is a pure
    function of the group keys and the seed, like the halves themselves.

    Examples
    --------
    >>> from judgecal_dist.splits import group_keys
    >>> order, evaluation = budget_order(group_keys([f"g{i}" for i in range(100)]), 3, 0.5)
    >>> len(order) + len(evaluation), bool(np.intersect1d(order, evaluation).size == 0)
    (100, True)
    """
    in_cal = calibration_mask(group_keys, [seed], calib_fraction)[0]
    u = split_uniforms(group_keys, [seed + ORDER_SEED_OFFSET])[0]
    cal = np.flatnonzero(in_cal)
    return cal[np.argsort(u[cal], kind="stable")], np.flatnonzero(~in_cal)


def load(config: Config, engine: EngineConfig) -> BudgetInput:
    """The dense labelled panel and the budget grid of the run (validated before the runner writes anything).

    Raises
    ------
    InputError
        If a planned split has an empty calibration or evaluation part, or (budget mode) no grid budget fits
        below the smallest calibration half.
    """
    panel = load_panel(
        config.data_url,
        sample=config.sample,
        orientation=config.orientation,
        orientation_seed=config.seed,
        dataset=config.dataset,
        storage_options=dict(engine.storage_options),
    )
    seeds = config.seeds
    others = tuple(read_choices(config.compare, engine.storage_options))
    if config.mode == "fraction":
        sizes = np.stack([calibration_mask(panel.group_keys, seeds, float(f)).sum(axis=1) for f in config.fractions])
        if sizes.min() < 2 or sizes.max() > panel.n_items - 2:
            raise InputError(
                f"{config.data}: labels: {panel.n_items} items are too few for fractions {list(config.fractions)}: "
                f"a split has {int(sizes.min())}..{int(sizes.max())} calibration items (need >= 2 on each side)"
            )
        return BudgetInput(panel=panel, budgets=(), dropped=(), grid="fractions", cal_sizes=sizes.T, others=others)
    sizes = calibration_mask(panel.group_keys, seeds, config.calib_fraction).sum(axis=1)
    if config.budgets:
        grid, name = tuple(sorted(set(config.budgets))), "config"
    else:
        grid, name = default_budgets(int(np.floor(config.calib_fraction * panel.n_items)))
    smallest = int(sizes.min())
    budgets = tuple(b for b in grid if b < smallest)
    if not budgets:
        raise InputError(
            f"{config.data}: labels: the smallest calibration half of the planned splits has {smallest} items, "
            f"no budget of {list(grid)} fits below it; set budgets= smaller values"
        )
    dropped = tuple(b for b in grid if b >= smallest)
    return BudgetInput(panel=panel, budgets=budgets, dropped=dropped, grid=name, cal_sizes=sizes, others=others)


def preflight(config: Config, data: BudgetInput) -> None:
    """Refuse, before anything is written, a panel without A/B verdicts or with only one (the split sizes and the
    budget grid were checked by :func:`load`, which needs them to build the grid)."""
    check_votes(data.panel, source=str(config.data))


def plan(config: Config, data: BudgetInput) -> list[Replicate]:
    return [Replicate(seed=s, config=config, budgets=data.budgets) for s in config.seeds]


def _one_coin(config: Config) -> OneCoin:
    return OneCoin(alpha0=config.alpha0, beta0=config.beta0, prior=config.class_prior)


def _calibrator(name: str, config: Config) -> Any:
    # The pipeline's calibrators (methods.pipeline, as every study builds them), reading config.calibrator_input.
    model = calibrator(name, Settings.of(config))
    return model.set_params(penalty=config.platt_penalty) if name == "platt" else model


def _scored_rows(
    config: Config,
    fit: tuple[npt.NDArray[np.int8], npt.NDArray[np.int8]],
    evaluation: tuple[npt.NDArray[np.int8], npt.NDArray[np.int8]],
    calibrators: tuple[str, ...],
) -> list[dict[str, Any]]:
    """One-coin fitted on ``fit`` = (votes, labels), then each calibrator on its in-sample scores (main protocol).

    Returns one row per calibrator (``none`` = the raw one-coin probability) with the evaluation metrics and the
    number of warnings the calibrator's fit raised (non-convergence, separation, a bound of the search), and
    whether the fitted map is the identity (``none`` counts as the identity).
    """
    (v_fit, y_fit), (v_eval, y_eval) = fit, evaluation
    n_votes, n_correct = count_judge_votes(v_fit, y_fit)
    agg = _one_coin(config).fit_counts(n_votes, n_correct, n_items=y_fit.size, n_positive=int(y_fit.sum()))
    # The calibrators read the one-coin log-odds (calibrator_input: logit, unclipped) or its P(A) clipped at eps;
    # the uncalibrated arm is the one-coin P(A) either way.
    score = agg.decision_function if config.calibrator_input == "logit" else (lambda v: agg.predict_proba(v)[:, 1])
    s_fit, s_eval, p_raw = score(v_fit), score(v_eval), agg.predict_proba(v_eval)[:, 1]
    rows = []
    for name in ("none", *calibrators):
        caught: list[warnings.WarningMessage] = []
        p, identity = p_raw, True
        if name != "none":
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                cal = _calibrator(name, config).fit(s_fit, y_fit)
            p, identity = cal.predict_proba(s_eval)[:, 1], _is_identity(cal)
        metrics = metric_table(y_eval, p, eps=config.eps, n_bins=config.n_bins)
        rows.append({"calibrator": name, **metrics, "identity_map": identity, "fit_warnings": len(caught)})
    return rows


def _is_identity(cal: Any) -> bool:
    # A fit that stayed at the identity map: with in-sample one-coin scores that separate the budget's items
    # (few labels, many judges), the penalised beta fit cannot leave it, which is the budget threshold of H.7.
    if isinstance(cal, BetaCalibration):
        params, target = (cal.a_, cal.b_, cal.c_), (1.0, 1.0, 0.0)
    elif isinstance(cal, PlattCalibrator):
        params, target = (cal.slope_, cal.intercept_), (1.0, 0.0)
    else:
        params, target = (cal.temperature_,), (1.0,)
    return bool(np.allclose(params, target, rtol=0.0, atol=1e-6))


def _budget_rows(panel: Panel, rep: Replicate) -> list[dict[str, Any]]:
    config = rep.config
    order, evaluation = budget_order(panel.group_keys, rep.seed, config.calib_fraction)
    v_eval, y_eval = panel.votes[evaluation], panel.labels[evaluation]
    all_cals = tuple(dict.fromkeys(("beta", *config.calibrators)))  # beta always: the arms compare with it
    topk_name = f"top{config.top_k}"
    rows = []
    for k, n in enumerate((*rep.budgets, order.size)):
        items = order[:n]
        v_fit, y_fit = panel.votes[items], panel.labels[items]
        n_votes, n_correct = count_judge_votes(v_fit, y_fit)
        kept = np.sort(
            top_k(n_votes, n_correct, panel.judge_ids, config.top_k, alpha0=config.alpha0, beta0=config.beta0)
        )
        key: dict[str, Any] = {"seed": rep.seed, "budget_index": k, "budget": int(n), "full_budget": n == order.size}
        key |= {"n_eval": int(evaluation.size), "aggregator": "one_coin"}
        for panel_name, cols, cals in (("all", slice(None), all_cals), (topk_name, kept, ("beta",))):
            fit = (v_fit[:, cols], y_fit)
            for row in _scored_rows(config, fit, (v_eval[:, cols], y_eval), cals):
                rows.append(key | {"panel": panel_name, "n_judges": int(fit[0].shape[1])} | row)
        # In item order, as the inclusion study passes its calibration half: stacking's folds follow the order.
        ranked = np.sort(items)
        for agg in (a for a in config.aggregators if a != "one_coin"):
            fit_sorted = (panel.votes[ranked], panel.labels[ranked])
            for row in _pipeline_rows(config, agg, fit_sorted, (v_eval, y_eval), all_cals):
                rows.append(key | {"aggregator": agg, "panel": "all", "n_judges": panel.n_judges} | row)
    return rows


def _pipeline_rows(
    config: Config,
    agg: str,
    fit: tuple[npt.NDArray[np.int8], npt.NDArray[np.int8]],
    evaluation: tuple[npt.NDArray[np.int8], npt.NDArray[np.int8]],
    calibrators: tuple[str, ...],
) -> list[dict[str, Any]]:
    """Another aggregator (the pipeline the inclusion study may recommend, stacking by default) fitted on ``fit`` as
    the inclusion study fits it (:func:`~judgecal_dist.methods.pipeline.aggregate`: stacking's calibrators read its
    out-of-fold scores), then each calibrator; one row per calibrator as :func:`_scored_rows`.

    A budget too small for the aggregator (stacking's folds need both labels) gives no rows: the arm starts at the
    first budget it can fit, and the report's table leaves the smaller budgets empty.
    """
    (v_fit, y_fit), (v_eval, y_eval) = fit, evaluation
    settings = Settings.of(config)
    rows = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            s_fit, s_eval, _ = aggregate(agg, settings, v_fit, y_fit, v_eval)
        except ValueError:
            return []
    for name in ("none", *calibrators):
        with warnings.catch_warnings(record=True) as cal_caught:
            warnings.simplefilter("always")
            cal = _calibrator(name, config) if name != "none" else None
            try:
                p = apply_calibrator(cal.fit(s_fit, y_fit) if cal is not None else None, s_eval, settings)
            except ValueError:
                continue
        metrics = metric_table(y_eval, p, eps=config.eps, n_bins=config.n_bins)
        identity = cal is None or _is_identity(cal)
        rows.append(
            {"calibrator": name, **metrics, "identity_map": identity, "fit_warnings": len(caught) + len(cal_caught)}
        )
    return rows


def _fraction_rows(panel: Panel, rep: Replicate) -> list[dict[str, Any]]:
    config = rep.config
    rows = []
    for f in config.fractions:
        in_cal = calibration_mask(panel.group_keys, [rep.seed], float(f))[0]
        fit = (panel.votes[in_cal], panel.labels[in_cal])
        evaluation = (panel.votes[~in_cal], panel.labels[~in_cal])
        key: dict[str, Any] = {
            "seed": rep.seed,
            "fraction": float(f),
            "n_cal": int(in_cal.sum()),
            "n_eval": int((~in_cal).sum()),
        }
        key |= {"aggregator": "one_coin", "panel": "all"}
        rows += [key | row for row in _scored_rows(config, fit, evaluation, ("beta",))]
    return rows


def run_replicate(data: BudgetInput, rep: Replicate) -> pd.DataFrame:
    """Evaluation metrics of split ``rep.seed`` at every budget (or fraction), arm and calibrator.

    The engine runs every replicate with one BLAS thread (:func:`judgecal_dist.engine.cluster.ray.single_threaded_blas`);
    the calibrators' L-BFGS-B fits are ~80x slower when OpenBLAS spreads them over threads.
    """
    rows = _fraction_rows(data.panel, rep) if rep.config.mode == "fraction" else _budget_rows(data.panel, rep)
    return pd.DataFrame(rows)


def summarise(config: Config, parts: pd.DataFrame, data: BudgetInput) -> StudyResult:
    """Means over splits with corrected resampled t intervals, the max-t test across budgets, figures, report."""
    if config.mode == "fraction":
        return budget_report.summarise_fractions(config, parts, data)
    return budget_report.summarise_budgets(config, parts, data)
