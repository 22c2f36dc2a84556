r"""Input of the regime-map study: grouped FCPS blocks and their pattern cells (spec 002 §6.3, §6.4, §10).

Real data goes through the engine's one-pass pattern job
(:func:`judgecal_dist.engine.jobs.stats.pattern_cells` with a block table): the driver plans the blocks of every split
from the group sizes (a keyed-hash permutation of the groups, so every engine agrees), one job counts the full
pool patterns per (split, block), and each Ray replicate projects them onto its paths and prefixes.

Blocks per split (:func:`sized_blocks`): groups in the order of the split's keyed-hash uniforms
(:func:`judgecal_dist.splits.split_uniforms`, the hash that :func:`judgecal_dist.splits.assign_blocks` cuts by
fractions) fill test, then validation, then selection greedily by whole groups to their row targets; the rest,
in the same order, is the calibration pool, and budget ``B`` is the shortest prefix of the pool with ``>= B``
rows. Budgets are nested and sel/val/test are shared by all budgets of a split, so budget comparisons and
table-vs-scalar differences are paired. ``assign_blocks`` is not used directly: its fractions cannot hit the
row-count targets of spec 002 Table 1 exactly.

Position balancing (LLMBar, spec 002 §6.3): with pool judge ``J``, the ingested release holds ``J/ab`` (the
``swap = False`` verdict) and ``J/ba`` (``swap = True``, already in the original numbering). Row ``x/orig`` takes
``J/ab`` and ``Y = 1[label = A]``; row ``x/swap`` shows the outputs the other way round, so it takes ``J/ba`` with
A and B exchanged and ``Y = 1[label = B]``. Both rows share the item's group. One pattern job over the 2m judges
``J/ab, J/ba`` gives both rows of every item.

Scalar verdict schema (a 1-5 rubric, e.g. summaries scored for coherence; :func:`load_rubric`): each pool judge's
``verdicts.score`` is rounded and clipped to 1..5 (codes 0..4), a null or absent score is ``err`` (code 5), and the
target is :math:`Y = (\text{labels.label\_score} - 1)/4`. These datasets are read in memory through the dataset
reader and aggregated here (the engine's pattern job counts the 4-symbol pairwise alphabet with A/B labels only);
the same grouped block plan applies (a document's summaries share ``group_id``).

Tie labels (the gold says neither response is better) give :math:`Y = 1/2` on both rows of the pair, the value
the scalar encoding gives a ``tie`` verdict; a judge's ``tie`` verdict is its own symbol of the 4-symbol alphabet
(code 2) and stays ``tie`` on the swapped row. Cells then carry :math:`Q = \sum Y^2 \ne S` and the target
histogram over the levels 0, 1/2, 1 that accuracy and Spearman read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs import stats
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.rubric_codes import rubric_codes
from judgecal_dist.methods.fcps.select import Cells
from judgecal_dist.splits import group_keys, split_uniforms

__all__ = [
    "BLOCKS",
    "SplitCells",
    "RealInput",
    "sized_blocks",
    "block_table",
    "balanced_cells",
    "load_real",
    "load_rubric",
]

#: Block codes of the block table: selection, validation, test; calibration budget i has code CAL0 + i.
BLOCKS = {"sel": 0, "val": 1, "test": 2}
CAL0 = 3
#: Engine code swap for the swapped presentation: B (0) <-> A (1); tie (2) and err (3) stay.
_FLIP = np.array([1, 0, 2, 3], dtype=np.int64)
#: Target levels of pairwise rows: B better, tie, A better.
LEVELS = np.array([0.0, 0.5, 1.0])


@dataclass(frozen=True)
class SplitCells:
    """Pattern cells of one split: ``sel``, ``val``, ``test`` and the nested calibration block of each budget."""

    sel: Cells
    val: Cells
    test: Cells
    cal: dict[int, Cells]


@dataclass(frozen=True)
class RealInput:
    """What every real-data replicate receives: the cells of every planned split and provenance counts."""

    judges: tuple[str, ...]
    budgets: tuple[int, ...]
    splits: dict[int, SplitCells] = field(repr=False)
    info: dict = field(default_factory=dict)
    #: Cold-start rows per split (:func:`~judgecal_dist.studies.regime_map.cold_start.load_cold`), when configured.
    cold: dict = field(default_factory=dict, repr=False)
    #: Split-proportion variants: variant -> split cells (:func:`~judgecal_dist.studies.regime_map.split_check`).
    variants: dict = field(default_factory=dict, repr=False)


def sized_blocks(
    keys: npt.ArrayLike, rows: npt.ArrayLike, seed: int, sizes: Sequence[int], budgets: Sequence[int]
) -> npt.NDArray[np.int64]:
    """Block code of every group for split ``seed`` (:data:`BLOCKS`, ``CAL0 + i`` for budget i, -1 unused).

    Parameters
    ----------
    keys : array of int64
        ``xxhash64(group_id)`` of each group.
    rows : array of int
        Rows of each group (items, times 2 when position-balanced).
    sizes : (selection, validation, test) row targets.
    budgets : ascending calibration budgets in rows.

    Raises
    ------
    InputError
        Fewer than two groups, or a budget larger than the calibration pool left after the other blocks.

    Examples
    --------
    >>> from judgecal_dist.splits import group_keys
    >>> b = sized_blocks(group_keys([f"g{i}" for i in range(60)]), np.full(60, 2), 0, (20, 20, 40), (10, 30))
    >>> [int((b == c).sum()) * 2 for c in range(5)], int((b == -1).sum())
    ([20, 20, 40, 10, 20], 5)
    """
    keys, rows = np.asarray(keys, dtype=np.int64), np.asarray(rows, dtype=np.int64)
    if len(keys) < 2:
        raise InputError(f"groups: {len(keys)} group(s): grouped FCPS blocks need at least 2 groups (group_id)")
    order = np.argsort(split_uniforms(keys, [seed])[0], kind="stable")
    code = np.full(len(keys), -1, dtype=np.int64)
    pos = 0
    for block, target in zip(
        (BLOCKS["test"], BLOCKS["val"], BLOCKS["sel"]), (sizes[2], sizes[1], sizes[0]), strict=True
    ):
        filled = 0
        while filled < target and pos < len(order):
            code[order[pos]] = block
            filled += rows[order[pos]]
            pos += 1
        if filled < target:
            raise InputError(f"groups: too few rows for the blocks {list(sizes)} (sel/val/test), ran out at {filled}")
    pool = order[pos:]
    before = np.concatenate([[0], np.cumsum(rows[pool])[:-1]])  # pool rows before each group
    available = int(rows[pool].sum())
    if not len(pool) or max(budgets) > available:
        raise InputError(
            f"budgets: budget {max(budgets)} is larger than the {available} calibration rows left after the "
            f"selection/validation/test blocks {list(sizes)}; lower the budget or the block sizes"
        )
    b_min = np.searchsorted(np.asarray(budgets), before, side="right")  # smallest budget with before < B
    code[pool] = np.where(b_min < len(budgets), CAL0 + b_min, -1)
    return code


def block_table(groups: pd.DataFrame, seeds: Sequence[int], rows: npt.ArrayLike, sizes, budgets) -> pd.DataFrame:
    """The ``replicate, group_key, block`` table of every split (used groups only) for the pattern job."""
    frames = []
    for seed in seeds:
        code = sized_blocks(groups["group_key"].to_numpy(), rows, seed, sizes, budgets)
        used = code >= 0
        frames.append(
            pd.DataFrame({"replicate": seed, "group_key": groups["group_key"].to_numpy()[used], "block": code[used]})
        )
    return pd.concat(frames, ignore_index=True)


def _digits(pattern: npt.NDArray[np.int64], n_judges: int) -> npt.NDArray[np.int64]:
    return (pattern[:, None] >> (2 * np.arange(n_judges, dtype=np.int64))) & 3


def balanced_cells(cells: pd.DataFrame, m: int, balanced: bool) -> pd.DataFrame:
    """Row-level pattern cells (``codes`` per pool judge, ``n``, ``a``, ``h``) from the pattern job's item cells.

    ``a`` counts the rows with :math:`Y = 1` and ``h`` those with a tie label (:math:`Y = 1/2`). Without
    balancing the item pattern is the row pattern. With it, each item cell gives its ``orig`` row (the first ``m``
    digits, labels A count as Y = 1) and its ``swap`` row (the last ``m`` digits with A/B exchanged, labels B count
    as Y = 1); a tie label is 1/2 on both. Unlabelled items are dropped.
    """
    width = 2 * m if balanced else m
    digits = _digits(cells["pattern"].to_numpy(dtype=np.int64), width)
    n = cells["n_labelled"].to_numpy(dtype=np.float64)
    a = cells["label_sum"].to_numpy(dtype=np.float64)
    h = cells["label_ties"].to_numpy(dtype=np.float64) if "label_ties" in cells else np.zeros_like(n)
    keys = {c: cells[c].to_numpy() for c in ("replicate", "block")}
    parts = [(digits[:, :m], a)]
    if balanced:
        parts.append((_FLIP[digits[:, m:]], n - a - h))
    frame = pd.concat(
        [
            pd.DataFrame(codes, columns=[f"j{i}" for i in range(m)]).assign(**keys, n=n, a=aa, h=h)
            for codes, aa in parts
        ],
        ignore_index=True,
    )
    frame = frame[frame["n"] > 0]
    return frame.groupby(["replicate", "block", *[f"j{i}" for i in range(m)]], as_index=False, sort=True)[
        ["n", "a", "h"]
    ].sum()


def _cells(frame: pd.DataFrame, m: int) -> Cells:
    if frame.empty:
        raise InputError("blocks: a block of a split has no labelled row")
    merged = frame.groupby([f"j{i}" for i in range(m)], as_index=False, sort=True)[["n", "a", "h"]].sum()
    n, a, h = (merged[c].to_numpy(dtype=np.float64) for c in ("n", "a", "h"))
    codes = merged[[f"j{i}" for i in range(m)]].to_numpy(dtype=np.int64)
    if not h.any():
        return Cells(codes, n, a, a.copy())  # binary Y: Q = S
    # Tie labels: S = a + h/2, Q = a + h/4, and the histogram over the levels 0, 1/2, 1.
    return Cells(codes, n, a + h / 2, a + h / 4, levels=LEVELS, hist=np.stack([n - a - h, h, a], axis=1))


def load_real(
    url: str,
    pool: Sequence[str],
    *,
    seeds: Sequence[int],
    budgets: Sequence[int],
    sizes: Sequence[int],
    balanced: bool,
    sample: int = 0,
    engine: EngineConfig | None = None,
) -> RealInput:
    """Plan the blocks of every split and count their pool patterns in one pass of the pattern job.

    Raises
    ------
    ConfigError
        An empty or repeated pool.
    InputError
        Fewer than two groups, a budget beyond the calibration pool, or a pool judge absent from the verdicts.
    """
    engine = engine or EngineConfig()
    pool = [str(j) for j in pool]
    if not pool or len(set(pool)) != len(pool):
        raise ConfigError(f"pool: need distinct judge ids, got {pool}")
    groups = stats.group_sizes(url, sample, config=engine)
    if len(groups) < 2:
        hint = (
            ""
            if len(groups)
            else " (no item has a label; for a 1-5 rubric in labels.label_score set verdict_schema: scalar)"
        )
        raise InputError(
            f"{url}: verdicts: group_id: {len(groups)} group(s); grouped FCPS blocks need at least 2{hint}"
        )
    judges = [f"{j}/{o}" for o in ("ab", "ba") for j in pool] if balanced else pool
    rows = groups["n_items"].to_numpy(dtype=np.int64) * (2 if balanced else 1)
    table = block_table(groups, seeds, rows, sizes, budgets)
    cells = stats.pattern_cells(url, judges, sample=sample, blocks=table, full_patterns=True, config=engine)
    present = _digits(cells["pattern"].to_numpy(dtype=np.int64), len(judges)) != 3
    silent = [j for j, seen in zip(judges, present.any(axis=0), strict=True) if not seen]
    if silent:
        raise InputError(
            f"{url}: verdicts: judge_id: pool judges with no verdict: {silent[:5]} ({len(silent)}); for 1-5 rubric "
            "scores (verdicts.score) set verdict_schema: scalar"
        )
    frame = balanced_cells(cells, len(pool), balanced)
    m = len(pool)
    splits = {}
    for seed, part in frame.groupby("replicate", sort=True):
        blocks = {name: _cells(part[part["block"] == code], m) for name, code in BLOCKS.items()}
        cal = {b: _cells(part[(part["block"] >= CAL0) & (part["block"] <= CAL0 + i)], m) for i, b in enumerate(budgets)}
        splits[int(seed)] = SplitCells(sel=blocks["sel"], val=blocks["val"], test=blocks["test"], cal=cal)
    info = {
        "groups": len(groups),
        "rows": int(rows.sum()),
        "pattern_judges": len(judges),
        "position_balanced": balanced,
        "tie_labels": int(groups["n_tie_labels"].sum()),
    }
    return RealInput(judges=tuple(pool), budgets=tuple(budgets), splits=splits, info=info)


def _rubric_rows(
    url: str, pool: Sequence[str], sample: int, engine: EngineConfig
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], pd.Series]:
    """Per labelled item: its pool judges' scalar-schema codes, its target and its group id."""
    options = engine.storage_options
    verdicts = read_dataset_table(
        url, "verdicts", ["item_id", "group_id", "judge_id", "sample", "score"], storage_options=options
    ).to_pandas()
    labels = read_dataset_table(url, "labels", ["item_id", "label_score"], storage_options=options).to_pandas()
    verdicts = verdicts[verdicts["sample"] == sample]
    items = verdicts.drop_duplicates("item_id")[["item_id", "group_id"]]
    items = items.merge(labels.dropna(subset=["label_score"]), on="item_id", how="inner").sort_values("item_id")
    bad = items[~items["label_score"].between(1.0, 5.0)]
    if len(bad):
        raise InputError(
            f"{url}: labels: label_score: {len(bad)} score(s) outside the 1-5 rubric, e.g. item "
            f"{bad['item_id'].iloc[0]!r} = {bad['label_score'].iloc[0]:g}; the scalar schema reads a 1-5 score"
        )
    scored = verdicts[verdicts["judge_id"].isin(pool)]
    silent = [j for j in pool if not scored.loc[scored["judge_id"] == j, "score"].notna().any()]
    if silent:
        raise InputError(f"{url}: verdicts: score: pool judges with no score: {silent[:5]} ({len(silent)})")
    codes = rubric_codes(scored, items, ["item_id"], pool)
    return codes, (items["label_score"].to_numpy(dtype=np.float64) - 1.0) / 4.0, items["group_id"].astype(str)


def load_rubric(
    url: str,
    pool: Sequence[str],
    *,
    seeds: Sequence[int],
    budgets: Sequence[int],
    sizes: Sequence[int],
    sample: int = 0,
    engine: EngineConfig | None = None,
) -> RealInput:
    """The grouped blocks of every split of a scalar-schema (1-5 rubric) dataset, as :func:`load_real` plans them.

    Raises
    ------
    ConfigError
        An empty or repeated pool.
    InputError
        A ``label_score`` outside 1..5, a pool judge without any score, fewer than two groups or a budget beyond
        the calibration pool.
    """
    engine = engine or EngineConfig()
    pool = [str(j) for j in pool]
    if not pool or len(set(pool)) != len(pool):
        raise ConfigError(f"pool: need distinct judge ids, got {pool}")
    codes, y, group = _rubric_rows(url, pool, sample, engine)
    ids, inverse = np.unique(group.to_numpy(), return_inverse=True)
    rows = np.bincount(inverse.ravel(), minlength=len(ids))
    if len(ids) < 2:
        raise InputError(f"{url}: verdicts: group_id: {len(ids)} group(s); grouped FCPS blocks need at least 2")
    keys = group_keys(ids.tolist())
    splits = {}
    for seed in seeds:
        block = sized_blocks(keys, rows, seed, sizes, budgets)[inverse.ravel()]  # each row's block

        def cells(mask: npt.NDArray[np.bool_]) -> Cells:
            return Cells.from_rows(codes[mask], y[mask], schema="scalar")

        named = {name: cells(block == code) for name, code in BLOCKS.items()}
        cal = {b: cells((block >= CAL0) & (block <= CAL0 + i)) for i, b in enumerate(budgets)}
        splits[int(seed)] = SplitCells(sel=named["sel"], val=named["val"], test=named["test"], cal=cal)
    info = {"groups": len(ids), "rows": int(len(y)), "schema": "scalar", "target_levels": int(len(np.unique(y)))}
    return RealInput(judges=tuple(pool), budgets=tuple(budgets), splits=splits, info=info)
