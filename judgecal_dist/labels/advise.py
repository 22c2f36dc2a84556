"""``judgecal advise``: which panel to run, which escalation policy, how many labels to buy.

The cost-quality frontier of panels: every subset of the judges is scored by the cross-fitted NLL and accuracy of
the default pipeline (one-coin + beta calibration) on the labelled items, the inclusion search's batched scoring
(one matrix product per fold for every subset, beta fitted for all subsets at once). Cross-fitting: the items are
cut into keyed folds (grouped items stay together); each fold's one-coin log-odds come from weights fitted on the
other folds, and beta calibration is cross-validated on those out-of-fold scores over the same folds, so no
item's loss uses its own label. The panel is picked by the recommendation engine's one-SE rule (the cheapest
panel whose NLL is within one standard error of the best), the escalation policy by the ensemble study's hard
variance routing, priced exactly as the ensemble study prices its tiers (:func:`~judgecal_dist.methods.repeated.
ensemble.example_cost`). Labels for a target width use the :math:`1/\\sqrt{n}` scaling of the intervals.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from judgecal_dist.engine.votes.codec import binary_codes, codes_of
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.dataset import dataset_tables, read_dataset_table
from judgecal_dist.io.filesystem import open_fs
from judgecal_dist.io.pairs import derived_pairs, holds_pointwise_scores
from judgecal_dist.io.schema import MISSING_CODE, SUCCESS, VOTE_A
from judgecal_dist.io.score_collections import Collection, load_collections
from judgecal_dist.labels.advise_frontier import panel_frontier, pick_panel
from judgecal_dist.methods.repeated import ensemble as ens
from judgecal_dist.methods.repeated.routing import HardVarianceRouting
from judgecal_dist.splits import group_keys
from judgecal_dist.stats.intervals import proportion_interval

__all__ = [
    "AdviseSettings",
    "PanelData",
    "parse_settings",
    "load_votes",
    "table_prices",
    "judge_costs",
    "escalation_policies",
    "labels_for_width",
]

#: Settings a costs file or ``--set`` may hold (a typo is refused, naming the key).
KEYS = ("costs", "prices", "target_width", "folds", "seed", "level", "cheap_tier", "full_tier", "max_judges")


@dataclass(frozen=True)
class AdviseSettings:
    """What ``advise`` reads besides the data.

    Attributes
    ----------
    costs : dict
        Judge id -> cost of one call (one verdict on one item); overrides the judges table's ``cost_per_call``.
    prices : dict
        Tier -> (input, output) price per million tokens, for repeated-sample score data (seed 004's tiers): the
        judge ``<tier>/<variant>`` then costs its collection's mean one-sample cost, and escalation is priced.
    target_width : float or None
        Wanted width of the chosen panel's accuracy interval (labels to buy are said for it).
    """

    costs: dict[str, float] = field(default_factory=dict)
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    target_width: float | None = None
    folds: int = 5
    seed: int = 0
    level: float = 0.95
    cheap_tier: str = "mini"
    full_tier: str = "full"
    max_judges: int = 12


def _number(key: str, value: Any, *, positive: bool = False) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        out = math.nan
    if not math.isfinite(out) or out < 0 or (positive and out == 0):
        bound = "> 0" if positive else ">= 0"
        raise ConfigError(f"{key}: must be a finite number {bound}, got {value!r}; set e.g. --set {key}=0.01")
    return out


def parse_settings(raw: dict[str, Any]) -> AdviseSettings:
    """Validated settings from a mapping (a costs file merged with ``--set``); refuses unknown keys by name."""
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown setting; known: {', '.join(KEYS)}")
    costs = raw.get("costs") or {}
    prices = raw.get("prices") or {}
    if not isinstance(costs, dict) or not isinstance(prices, dict):
        raise ConfigError("costs/prices: must map a judge (tier) to a number, e.g. --set costs.judge_a=0.01")
    parsed_prices = {}
    for tier, pair in prices.items():
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise ConfigError(f"prices.{tier}: must be [input, output] $ per million tokens, e.g. [0.75, 4.5]")
        parsed_prices[str(tier)] = (_number(f"prices.{tier}", pair[0]), _number(f"prices.{tier}", pair[1]))
    width = raw.get("target_width")
    out = AdviseSettings(
        costs={str(j): _number(f"costs.{j}", c) for j, c in costs.items()},
        prices=parsed_prices,
        target_width=None if width is None else _number("target_width", width, positive=True),
        folds=int(_number("folds", raw.get("folds", 5), positive=True)),
        seed=int(_number("seed", raw.get("seed", 0))),
        level=_number("level", raw.get("level", 0.95), positive=True),
        cheap_tier=str(raw.get("cheap_tier", "mini")),
        full_tier=str(raw.get("full_tier", "full")),
        max_judges=int(_number("max_judges", raw.get("max_judges", 12), positive=True)),
    )
    if out.folds < 2 or out.level >= 1 or (out.target_width is not None and out.target_width >= 1):
        raise ConfigError("folds >= 2, level in (0, 1) and target_width in (0, 1) (an accuracy width); fix the value")
    return out


@dataclass(frozen=True)
class PanelData:
    """Labelled items x judges: votes 1 = A, 0 = B, -1 = none; labels 1 = A; keys of the items' groups."""

    judge_ids: npt.NDArray[Any]
    votes: npt.NDArray[np.int8]
    labels: npt.NDArray[np.int8]
    keys: npt.NDArray[np.int64]
    collections: tuple[Collection, ...] = ()
    info: dict[str, Any] = field(default_factory=dict)


def load_votes(url: str, storage_options: dict[str, Any] | None = None) -> PanelData:
    """The labelled panel of ``url``: every dataset of it, sample 0 of each judge (an rb2-k8 score dataset gives
    its response pairs, as the itc study derives them, and keeps its collections for escalation)."""
    options = dict(storage_options or {})
    collections: tuple[Collection, ...] = ()
    if holds_pointwise_scores(url, options):
        table, labels, _ = derived_pairs(url, orientation_seed=0, storage_options=options)
        verdicts = table.select(["dataset", "item_id", "group_id", "judge_id", "sample", "verdict"]).to_pandas()
        collections = tuple(load_collections(url, storage_options=options)[0])
    else:
        verdicts = read_dataset_table(
            url,
            "verdicts",
            ["dataset", "item_id", "group_id", "judge_id", "sample", "verdict"],
            storage_options=options,
        ).to_pandas()
        labels = read_dataset_table(url, "labels", ["dataset", "item_id", "label"], storage_options=options).to_pandas()
    label_codes = codes_of(labels["label"])
    labels = labels[binary_codes(label_codes) != MISSING_CODE].drop_duplicates(["dataset", "item_id"])
    first = verdicts[verdicts["sample"] == verdicts["sample"].min()]
    first = first.assign(code=binary_codes(codes_of(first["verdict"])))
    wide = first.pivot_table(index=["dataset", "item_id"], columns="judge_id", values="code", aggfunc="first")
    keyed = labels.set_index(["dataset", "item_id"])
    wide = wide.reindex(keyed.index)
    if not len(wide) or wide.shape[1] == 0:
        raise InputError(f"{url}: labels: no item labelled A or B has a verdict; ingest labels for judged items")
    groups = first.drop_duplicates(["dataset", "item_id"]).set_index(["dataset", "item_id"])["group_id"]
    group = groups.reindex(keyed.index).fillna(pd.Series(keyed.index.get_level_values(1), index=keyed.index))
    return PanelData(
        judge_ids=np.asarray(wide.columns, dtype=object),
        votes=wide.fillna(-1).to_numpy(dtype=np.int8),
        labels=(codes_of(keyed["label"]) == VOTE_A).astype(np.int8),
        keys=group_keys((keyed.index.get_level_values(0) + "/" + group.astype(str)).to_numpy(dtype=str)),
        collections=collections,
        info={"items": int(len(wide)), "judges": int(wide.shape[1])},
    )


def _collection_costs(data: PanelData, settings: AdviseSettings) -> dict[str, float]:
    """``<tier>/<variant>`` -> mean one-sample cost of its collection (the ensemble study's k = 1 $/ex)."""
    out = {}
    for c in data.collections:
        for tier, ts in c.tiers.items():
            if tier in settings.prices:
                p_in, p_out = settings.prices[tier]
                cost = ens.example_cost(
                    ts.input_tokens, ts.output_tokens, k=1, n_collected=ts.n_samples, price_in=p_in, price_out=p_out
                )
                out[f"{tier}/{c.prompt_variant}"] = float(np.mean(cost))
    return out


def table_prices(url: str, data: PanelData, storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Tier prices from the judges table (``cost_per_mtok_in``/``_out`` of a judge whose ``tier`` holds repeated
    samples), used when the settings give no ``prices``."""
    tiers = {t for c in data.collections for t in c.tiers}
    options = dict(storage_options or {})
    if not tiers or "judges" not in dataset_tables(url, storage_options=options):
        return {}
    frame = read_dataset_table(url, "judges", storage_options=options).to_pandas()
    frame = frame[frame["tier"].isin(tiers)].dropna(subset=["cost_per_mtok_in", "cost_per_mtok_out"])
    return {str(r.tier): [r.cost_per_mtok_in, r.cost_per_mtok_out] for r in frame.itertuples()}


def judge_costs(
    url: str, data: PanelData, settings: AdviseSettings, storage_options: dict[str, Any] | None = None
) -> dict[str, float]:
    """Each judge's cost per call: the settings' map over the priced tiers over the judges table's column.

    Raises
    ------
    ConfigError
        A cost for a judge not in the data, a price for a tier not in it, or a judge left without a cost.
    """
    judges = [str(j) for j in data.judge_ids]
    unknown = sorted(set(settings.costs) - set(judges))
    if unknown:
        raise ConfigError(f"costs.{unknown[0]}: no judge {unknown[0]!r} in {url}; known judges: {', '.join(judges)}")
    tiers = {t for c in data.collections for t in c.tiers}
    stray = sorted(set(settings.prices) - tiers)
    if stray:
        raise ConfigError(f"prices.{stray[0]}: no tier {stray[0]!r} in {url}; tiers there: {sorted(tiers) or 'none'}")
    table: dict[str, float] = {}
    if "judges" in dataset_tables(url, storage_options=dict(storage_options or {})):
        frame = read_dataset_table(url, "judges", storage_options=dict(storage_options or {})).to_pandas()
        if "cost_per_call" in frame:
            for j, c in zip(frame["judge_id"], frame["cost_per_call"], strict=True):
                if c is not None and not pd.isna(c):
                    table[str(j)] = _number(f"{url}/judges: cost_per_call of {j}", c)
    costs = table | _collection_costs(data, settings) | settings.costs
    missing = [j for j in judges if j not in costs]
    if missing:
        raise ConfigError(
            f"costs: no cost for judge(s) {missing[:3]}; set --set costs.{missing[0]}=<cost per call>, a costs "
            "file, or a cost_per_call column in the judges table"
        )
    return {j: costs[j] for j in judges}


def escalation_policies(data: PanelData, settings: AdviseSettings) -> pd.DataFrame:
    """Per collection with both tiers priced: the hard variance routing sweep (ensemble study) and its pick.

    The pick is the cheapest point of the sweep's cost-accuracy frontier whose accuracy reaches the lower end of
    the best point's interval. Columns: the sweep's plus ``dataset, prompt_variant, cost_cheap, cost_full,
    chosen``.
    """
    cheap_name, full_name = settings.cheap_tier, settings.full_tier
    parts = []
    for c in data.collections:
        if not {cheap_name, full_name} <= set(c.tiers) or not {cheap_name, full_name} <= set(settings.prices):
            continue
        cheap_t, full_t = c.tiers[cheap_name], c.tiers[full_name]
        cost = {}
        for name, ts in ((cheap_name, cheap_t), (full_name, full_t)):
            p_in, p_out = settings.prices[name]
            cost[name] = float(
                ens.example_cost(
                    ts.input_tokens,
                    ts.output_tokens,
                    k=ts.n_samples,
                    n_collected=ts.n_samples,
                    price_in=p_in,
                    price_out=p_out,
                ).mean()
            )
        both = cheap_t.present & full_t.present
        sweep = HardVarianceRouting().fit(
            cheap_t.scores[both],
            full_t.scores[both],
            c.chosen[both],
            cost_cheap=cost[cheap_name],
            cost_full=cost[full_name],
        )
        front = sweep.frontier_
        best = front.loc[front["accuracy"].idxmax()]
        low = proportion_interval(round(best["accuracy"] * best["n"]), int(best["n"]), confidence=settings.level).low
        pick = front[front["accuracy"] >= low].sort_values("cost", kind="stable").iloc[0]
        parts.append(
            sweep.sweep_.assign(
                dataset=c.dataset,
                prompt_variant=c.prompt_variant,
                cost_cheap=cost[cheap_name],
                cost_full=cost[full_name],
                on_frontier=sweep.sweep_["theta"].isin(set(front["theta"])),
                chosen=sweep.sweep_["theta"] == pick["theta"],
            )
        )
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def labels_for_width(low: float, high: float, n: int, target: float) -> int:
    """Labels giving an interval of width ``target`` where ``n`` labels gave ``[low, high]`` (width ~ 1/sqrt(n))."""
    return int(math.ceil(n * ((high - low) / target) ** 2))


def _escalation_records(table: pd.DataFrame, data: PanelData, settings: AdviseSettings) -> list[dict[str, Any]]:
    records = []
    for _, row in table[table["chosen"]].iterrows():
        c = next(
            x for x in data.collections if x.dataset == row["dataset"] and x.prompt_variant == row["prompt_variant"]
        )
        record = {
            k: row[k] for k in ("dataset", "prompt_variant", "theta", "p_escalate", "cost", "accuracy", "cost_full")
        }
        records.append(record | {"n": int(row["n"]), "n_samples_full": c.tiers[settings.full_tier].n_samples})
    return records


def _label_need(chosen: pd.Series, settings: AdviseSettings) -> dict[str, Any] | None:
    if settings.target_width is None:
        return None
    low, high, n = float(chosen["accuracy_ci_low"]), float(chosen["accuracy_ci_high"]), int(chosen["n_items"])
    needed = labels_for_width(low, high, n, settings.target_width)
    return {
        "target_width": settings.target_width,
        "width_now": high - low,
        "have": n,
        "needed": needed,
        "to_buy": max(0, needed - n),
    }


def _advice(
    data_url: str,
    data: PanelData,
    settings: AdviseSettings,
    costs: dict[str, float],
    frontier: pd.DataFrame,
    escalation: pd.DataFrame,
) -> dict[str, Any]:
    """The advice document (``advice.json``; the page renders it)."""
    chosen, best = pick_panel(frontier, settings.level)
    return {
        "data": data_url,
        "n_items": int(data.votes.shape[0]),
        "n_judges": int(len(data.judge_ids)),
        "level": settings.level,
        "folds": settings.folds,
        "search": str(frontier["search"].iloc[0]),
        "chosen": chosen.to_dict(),
        "best": best.to_dict(),
        "escalation": _escalation_records(escalation, data, settings) if len(escalation) else [],
        "escalation_reason": "no collection holds repeated samples of both tiers with prices "
        f"(`{settings.cheap_tier}` and `{settings.full_tier}`; set prices.<tier>=[input, output])",
        "cheap_tier": settings.cheap_tier,
        "full_tier": settings.full_tier,
        "labels": _label_need(chosen, settings),
        "costs": costs,
        "cost_unit": "$" if settings.prices else "cost units",
        "cost_source": (
            "a judge of repeated-sample score data costs its tier's mean one-sample cost per example (every "
            "response scored once; the example's response pairs share it), from the tier prices."
            if settings.prices
            else "each judge's cost per call from the settings or the judges table's cost_per_call."
        ),
    }


def advise(
    data_url: str,
    output: str,
    *,
    settings_file: str | None = None,
    overrides: tuple[str, ...] = (),
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the advice for ``data_url`` to ``output`` (:mod:`.advise_report`); return the advice document.

    Every setting is validated and the output folder claimed before anything is written; a committed result of
    the same inputs is returned as it is.
    """
    from judgecal_dist.config import apply_overrides, load_yaml
    from judgecal_dist.io.filesystem import fingerprint_inputs
    from judgecal_dist.io.ownership import refuse_output_inside
    from judgecal_dist.io.records import to_json
    from judgecal_dist.labels import advise_report as page

    refuse_output_inside(output, "--output", {"--data": data_url})
    raw = apply_overrides(load_yaml(settings_file) if settings_file else {}, overrides)
    settings = parse_settings(raw)
    options = dict(storage_options or {})
    marker = page.claim(output, options)
    data = load_votes(data_url, options)
    if not raw.get("prices"):
        settings = parse_settings({**raw, "prices": table_prices(data_url, data, options)})
    costs = judge_costs(data_url, data, settings, options)
    inputs = {"data": fingerprint_inputs(data_url, options), "settings": raw, "costs": costs}
    fs, root = open_fs(output, options)
    committed = marker is not None and fs.exists(f"{root.rstrip('/')}/{SUCCESS}")  # _SUCCESS comes last
    found = marker.get("inputs") if marker else None
    if page.OWNER.reuse(output.rstrip("/"), found, inputs, committed=committed, overwrite=overwrite):
        return dict(json.loads(fs.cat_file(f"{root.rstrip('/')}/advice.json")))
    frontier = panel_frontier(
        list(data.judge_ids),
        data.votes,
        data.labels,
        data.keys,
        costs,
        folds=settings.folds,
        seed=settings.seed,
        level=settings.level,
        max_judges=settings.max_judges,
    )
    escalation = escalation_policies(data, settings)
    advice = _advice(data_url, data, settings, costs, frontier, escalation)
    parts: dict[str, Any] = {
        "report.md": page.render_markdown(advice, frontier),
        "frontier.parquet": frontier,
        "figures/frontier.png": page.frontier_figure(frontier, advice),
    }
    if len(escalation):
        parts["escalation.parquet"] = escalation
    parts["advice.json"] = to_json(advice)
    page.write_advice(output, marker, inputs, parts, options)
    return advice
