r"""Finite-calibration regime map (FCPS, spec 002): which aggregator family can N labels afford?

Per split (seed) and calibration budget ``B``: paths are built on the selection block, every candidate
``(path, k, family)`` is fitted on the budget's calibration block (the table of spec 002 Eq. 12 and the scalar
families of §3.5), and each menu (``table``, ``scalar``, ``union``) selects its candidate on validation MSE;
test MSE and the support diagnostics (entropy-effective support, plug-in cell pressure, unseen-pattern rate)
are reported for the selected candidates. ``summarise`` gives one record per (budget, menu) and the paired
``table_vs_scalar`` differences (scalar MSE - table MSE), plus the figures (regime map, risk vs k per path,
unseen rate vs budget).

``data`` is an ingested dataset URL (LLMBar with ``position_balance: true`` gives the position-balanced rows of
spec 002 §6.3), or ``synthetic:additive|mixed|parity|xor|and|scalar``: the calibration-growth generator of §7.1 and
the XOR/AND toy of §7.2 (fresh i.i.d. blocks per replicate and budget, the fixed pool path); with
``semi_real_source: URL`` the judges' outputs are resampled from that dataset's real ``pool`` patterns instead
(§7.3). With ``interaction_weights`` (synthetic xor, and or parity) every replicate also sweeps the interaction
strength :math:`\eta_w = (1 - w)\,\eta_{\mathrm{add}} + w\,\eta_{\mathrm{regime}}` (Table 25): the weights of one
budget share the judges' outputs and the label uniforms (common random numbers), so the sweep is paired. Every
constant the paper lost takes the spec's recommended value; they are config keys, so the manifest records them.

References
----------
.. [1] Y. Li. A Finite-Calibration Regime Map for LLM Judge Panels (FCPS). Seed 002; spec 002.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs import stats
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.growth import (
    N_JUDGES,
    draw_growth_outputs,
    draw_labels,
    draw_semi_real_outputs,
)
from judgecal_dist.io.rubric_panel import draw_rubric_panel
from judgecal_dist.io.schema import VERDICT_CODES
from judgecal_dist.methods.fcps.paths import JudgePath
from judgecal_dist.methods.fcps.select import MENUS, Cells, evaluate_candidates, menu_families, select_candidate
from judgecal_dist.models.fcps import FORMAT
from judgecal_dist.studies.base import StudyResult
from judgecal_dist.studies.recommendation import exported_model
from judgecal_dist.studies.regime_map import report as regime_map_report
from judgecal_dist.studies.regime_map.cfps import cfps_rows
from judgecal_dist.studies.regime_map.cold_start import cold_start_rows, load_cold
from judgecal_dist.studies.regime_map.config import LLMBAR7, RUBRIC, SINGLE, Config, extra_menus
from judgecal_dist.studies.regime_map.data import RealInput, balanced_cells, load_real, load_rubric
from judgecal_dist.studies.regime_map.diagnostics import decomposition_columns, growth_population, synthetic_eta
from judgecal_dist.studies.regime_map.export import export_candidate, exported_menu, selected_row
from judgecal_dist.studies.regime_map.sensitivity import alpha_rows
from judgecal_dist.studies.regime_map.split_check import load_variants, variant_rows

__all__ = [
    "NAME",
    "SINGLE",
    "extra_menus",
    "LLMBAR7",
    "Config",
    "Replicate",
    "SyntheticInput",
    "load",
    "plan",
    "run_replicate",
    "summarise",
]

NAME = "regime_map"


@dataclass(frozen=True)
class SyntheticInput:
    """Calibration-growth input: the regime and, for the semi-real variant, the real pattern distribution."""

    regime: str
    patterns: np.ndarray | None = None
    weights: np.ndarray | None = None
    info: dict | None = None


@dataclass(frozen=True)
class Replicate:
    seed: int
    config: Config


def _semi_real_source(config: Config, source: str, engine: EngineConfig) -> tuple[np.ndarray, np.ndarray]:
    """Row patterns of ``source``'s pool (position-balanced when configured) and their counts."""
    if len(config.pool) != N_JUDGES:
        raise ConfigError(f"pool: the semi-real generator needs {N_JUDGES} judges, got {len(config.pool)}")
    pool = list(config.pool)
    judges = [f"{j}/{o}" for o in ("ab", "ba") for j in pool] if config.position_balance else pool
    cells = stats.pattern_cells(source, judges, sample=config.sample, full_patterns=True, config=engine)
    cells = cells.assign(replicate=0, block=0, n_labelled=cells["n"], label_sum=0, label_ties=0)
    rows = balanced_cells(cells, len(pool), config.position_balance)
    codes = rows[[f"j{i}" for i in range(len(pool))]].to_numpy(dtype=np.int64)
    if not np.isin(codes, list(VERDICT_CODES.values())).any():  # e.g. a 1-5 rubric dataset: scores, no verdicts
        raise InputError(
            f"semi_real_source: {config.semi_real_source}: the pool has no A, B or tie verdict there (only err), so "
            "there are no patterns to resample; point it at a pairwise dataset (1-5 rubric data: use its URL as data)"
        )
    return codes, rows["n"].to_numpy(dtype=np.float64)


def load(config: Config, engine: EngineConfig) -> RealInput | SyntheticInput:
    """Validate the input and, for real data, count every split's block patterns in one engine pass."""
    seeds = config.seeds
    if config.synthetic:
        regime = config.regime
        if config.semi_real_source:
            patterns, weights = _semi_real_source(config, config.semi_real_source, engine)
            return SyntheticInput(regime, patterns, weights, {"source_patterns": len(patterns)})
        return SyntheticInput(regime, info={})
    sizes = (config.selection_rows, config.validation_rows, config.test_rows)
    if config.schema == "scalar":
        return load_rubric(
            config.data_url,
            config.pool,
            seeds=seeds,
            budgets=config.budgets,
            sizes=sizes,
            sample=config.sample,
            engine=engine,
        )
    data = load_real(
        config.data_url,
        config.pool,
        seeds=seeds,
        budgets=config.budgets,
        sizes=sizes,
        balanced=config.position_balance,
        sample=config.sample,
        engine=engine,
    )
    if config.cold_start_sizes:
        data = replace(data, cold=load_cold(config, engine, seeds))
    if config.split_variants:
        data = replace(data, variants=load_variants(config, engine, seeds))
    return data


def plan(config: Config, data: Any) -> list[Replicate]:
    return [Replicate(seed=s, config=config) for s in config.seeds]


def _synthetic_block(data: SyntheticInput, config: Config, n: int, rng: np.random.Generator, weight: float) -> Cells:
    if data.regime == RUBRIC:
        return Cells.from_rows(*draw_rubric_panel(n, rng), schema="scalar")
    if data.patterns is not None and data.weights is not None:
        codes = draw_semi_real_outputs(n, rng, data.patterns, data.weights)
    else:
        codes = draw_growth_outputs(n, rng, gamma=config.growth_gamma)
    return Cells.from_rows(codes, draw_labels(synthetic_eta(config, codes, weight, data.regime), rng))


def _blocks(
    data: Any, rep: Replicate, budget: int, weight: float = 1.0
) -> tuple[dict[str, np.ndarray], Cells, Cells, Cells]:
    config = rep.config
    if isinstance(data, SyntheticInput):
        rng = np.random.default_rng([rep.seed, budget])  # the same draws for every interaction weight
        val = _synthetic_block(data, config, config.synthetic_validation_rows, rng, weight)
        test = _synthetic_block(data, config, config.synthetic_test_rows, rng, weight)
        cal = _synthetic_block(data, config, budget, rng, weight)
        return {"pool": np.arange(N_JUDGES)}, cal, val, test
    split = data.splits.get(rep.seed)
    if split is None:
        raise InputError(f"split {rep.seed}: no cells were counted for it (was it planned by load?)")
    paths = {
        rule: JudgePath(rule, lam=config.lam, budget=budget, random_state=rep.seed, n_categories=split.sel.n_categories)
        .fit(split.sel.codes, split.sel.s / split.sel.n, sample_weight=split.sel.n)
        .path_
        for rule in config.paths
    }
    return paths, split.cal[budget], split.val, split.test


def _families(config: Config) -> tuple[str, ...]:
    extra = tuple(f"table_{f}" for f in config.fallbacks)
    return (
        "table",
        *config.families,
        *extra,
        *(("hybrid",) if config.hybrid_taus else ()),
        *(("jury",) if config.jury and config.schema == "pairwise" else ()),
    )


def fit_options(config: Config) -> dict[str, Any]:
    """The candidates' hyperparameters, as :func:`~judgecal_dist.methods.fcps.select.evaluate_candidates` reads them."""
    return {
        "alpha": config.alpha,
        "fallback": config.fallback,
        "ridge_lam": config.ridge_lam,
        "C": config.logistic_c,
        "hybrid_taus": config.hybrid_taus,
    }


def run_replicate(data: Any, rep: Replicate) -> pd.DataFrame:
    """Every candidate's validation/test MSE and diagnostics at every budget, with each menu's selection flag."""
    config = rep.config
    options = fit_options(config)
    extra = extra_menus(config)
    menus = {m: (menu_families(m, config.families), "val_mse") for m in MENUS} | extra
    frames = []
    weights = config.interaction_weights or (None,)
    for budget, weight in ((b, w) for w in weights for b in config.budgets):
        paths, cal, val, test = _blocks(data, rep, budget, 1.0 if weight is None else weight)
        frame = evaluate_candidates(paths, cal, val, test, families=_families(config), max_k=config.max_k, **options)
        if config.cfps and config.schema == "pairwise" and not isinstance(data, SyntheticInput):
            frontier = cfps_rows(data.splits[rep.seed].sel, cal, val, test, budget, config, options)
            frame = pd.concat([frame.assign(subset=""), frontier], ignore_index=True)
        for menu, (families, metric) in menus.items():
            chosen = select_candidate(frame, families, metric)
            frame[f"selected_{menu}"] = frame.index == chosen.name
        if isinstance(data, SyntheticInput) and config.decomposition and config.schema == "pairwise":
            law = growth_population(config, 1.0 if weight is None else weight, data.patterns, data.weights)
            frame = decomposition_columns(frame, paths, cal, law, options, config.population_rows)
        if config.single_judges and not isinstance(data, SyntheticInput):
            m = cal.codes.shape[1]
            singles = {f"{SINGLE}{config.pool[j]}": np.array([j]) for j in range(m)}
            single = evaluate_candidates(singles, cal, val, test, families=("table",), max_k=1, **options)
            frame = pd.concat(
                [frame, single.assign(**{f"selected_{menu}": False for menu in menus})], ignore_index=True
            )
        if config.alpha_grid and not isinstance(data, SyntheticInput):
            grid = alpha_rows(paths["information_first"], cal, val, test, config, options)
            frame = pd.concat([frame, grid.assign(**{f"selected_{menu}": False for menu in menus})], ignore_index=True)
        frame.insert(0, "budget", int(budget))
        if weight is not None:
            frame.insert(0, "interaction_weight", float(weight))
        frame.insert(0, "seed", rep.seed)
        frame["cal_rows"], frame["val_rows"], frame["test_rows"] = cal.rows, val.rows, test.rows
        frames.append(frame)
    if not isinstance(data, SyntheticInput) and rep.seed in data.cold:
        cold = cold_start_rows(data.cold[rep.seed], data.splits[rep.seed].test, config, rep.seed)
        frames.append(cold.assign(**{f"selected_{menu}": False for menu in menus}))
    if not isinstance(data, SyntheticInput) and data.variants:
        split_rows = variant_rows(data.variants, config, rep.seed, options)
        frames.append(split_rows.assign(**{f"selected_{menu}": False for menu in menus}))
    out = pd.concat(frames, ignore_index=True)
    for text in ("base", "subset", "cold_path", "fallback"):  # the text columns some row kinds lack
        if text in out:
            out[text] = out[text].fillna("")
    return out


def summarise(config: Config, parts: pd.DataFrame, data: Any) -> StudyResult:
    """Records per (budget, menu), paired table-vs-scalar differences, figures, the report and the exported model
    (:mod:`~judgecal_dist.studies.regime_map.export`), which the Recommendation names."""
    result = regime_map_report.summarise(config, parts, data)
    menu = exported_menu(config, result.extra["table_vs_scalar"])
    row = selected_row(config, parts, menu)
    weight = float(row["interaction_weight"]) if "interaction_weight" in row else 1.0
    paths, cal, _, _ = _blocks(data, Replicate(seed=config.seed, config=config), max(config.budgets), weight)
    model = export_candidate(config, row, paths, cal, fit_options(config), menu)
    line = exported_model(model.name, FORMAT, "<menu> (auto, or a menu of this run: table, scalar, union, ...)")
    line += f"; the selection of split {config.seed} at {max(config.budgets)} labels, fitted on its calibration block"
    line += f" (test MSE there {float(row['test_mse']):.4f})"
    recommendation = replace(result.recommendation, exported=line) if result.recommendation else None
    return replace(result, model={"model.json": model.document}, recommendation=recommendation)
