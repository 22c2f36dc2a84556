"""Paired continuous scores for the continuous-calibration study (spec 001 §8.3) from RewardBench 2 k=8 data.

One item = (prompt variant, subset, example id, response) — the adapter's ``item_id``; ``id`` alone is not unique.
Rubric = RewardBench 2 subset. Reference :math:`y` = mean of the non-null ``full`` samples of the item; judge
:math:`j` = sample 0 of a cheaper tier (``mini``, ``nano``; a null sample 0 drops the item for that judge, never
substituted). Judge ``full`` is the leave-one-out control: :math:`j` = full sample 0, :math:`y` = mean of full
samples 1..7 (the judge's own sample never enters its reference). Scores are mapped from [1, 10] to [1, 5] by
:math:`x \\mapsto 1 + 4(x - 1)/9`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from judgecal_dist.errors import InputError
from judgecal_dist.io.adapters.rb2k8 import SCORE_RANGE, read_rb2k8
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.synthetic_judge import strict_compressing_judge

__all__ = ["SYNTHETIC", "arm_scores", "load_paired_scores", "rescale"]

SYNTHETIC = "synthetic"
#: Key of the synthetic judge's random stream (spawned with the seed, so budgets share the draws).
_SYNTH_KEY = 7001

COLUMNS = ["dataset", "item_id", "group_id", "judge_id", "sample", "score", "rubric"]


def rescale(x: pd.Series | float, low: float = SCORE_RANGE[0], high: float = SCORE_RANGE[1]) -> pd.Series | float:
    """Affine map of [low, high] onto [1, 5] (spec 001 §2)."""
    return 1.0 + 4.0 * (x - low) / (high - low)


def _verdicts(url: str, storage_options: dict | None) -> pd.DataFrame:
    try:
        table = read_dataset_table(url, "verdicts", columns=COLUMNS, storage_options=storage_options)
    except InputError:
        table = read_rb2k8(url, storage_options=storage_options).tables["verdicts"]
    return table.select(COLUMNS).to_pandas() if isinstance(table, pa.Table) else table


def load_paired_scores(
    url: str, *, judges: tuple[str, ...], variant: str = "base", storage_options: dict | None = None
) -> pd.DataFrame:
    """Rows ``rubric, item_id, group_id, judge_id, j, y`` (both on [1, 5]) for each judge tier in ``judges``.

    ``url`` is an ingested dataset or the raw RB2-k8 file/folder. Raises InputError naming the url and column
    when the reference tier or a judge tier is absent, or a judge has no paired item.
    """
    verdicts = _verdicts(url, storage_options)
    verdicts = verdicts[verdicts["item_id"].str.startswith(f"{variant}/")]
    tiers = sorted(verdicts["judge_id"].unique())
    missing = [t for t in ("full", *judges) if t not in tiers]
    if missing:
        raise InputError(f"{url}: judge_id: tiers {missing} not found for prompt variant {variant!r} (found {tiers})")
    full = verdicts[verdicts["judge_id"] == "full"].dropna(subset=["score"])
    keys = ["item_id", "group_id", "rubric"]
    reference = full.groupby(keys, sort=True)["score"].mean().rename("y").reset_index()
    loo = full[full["sample"] > 0].groupby(keys, sort=True)["score"].mean().rename("y").reset_index()
    parts = []
    for judge in judges:
        rows = verdicts[(verdicts["judge_id"] == judge) & (verdicts["sample"] == 0)].dropna(subset=["score"])
        rows = rows.drop_duplicates("item_id")  # a tier present in two files holds the same sample 0
        ref = loo if judge == "full" else reference
        paired = rows[["item_id", "score"]].rename(columns={"score": "j"}).merge(ref, on="item_id", how="inner")
        if paired.empty:
            raise InputError(f"{url}: score: judge {judge!r} has no item paired with a full-tier reference")
        parts.append(paired.assign(judge_id=judge))
    out = pd.concat(parts, ignore_index=True)
    out["j"], out["y"] = rescale(out["j"]), rescale(out["y"])
    return out[["rubric", "item_id", "group_id", "judge_id", "j", "y"]].sort_values(
        ["judge_id", "item_id"], ignore_index=True
    )


def arm_scores(scores: pd.DataFrame, arm: str, seed: int) -> pd.DataFrame:
    """The paired rows of ``arm``; for the synthetic arm with the judge drawn for ``seed`` (same draw at every budget)."""
    rows = scores[scores["judge_id"] == arm].reset_index(drop=True)
    if arm == SYNTHETIC:
        rng = np.random.default_rng(np.random.SeedSequence([seed, _SYNTH_KEY]))
        rows = rows.assign(j=strict_compressing_judge(rows["y"].to_numpy(), rng))
    return rows
