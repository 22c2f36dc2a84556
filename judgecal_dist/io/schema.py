"""The data contracts of ARCHITECTURE.md as pyarrow schemas, plus the category alphabets.

Tables (each stored as a folder of Parquet files under an ingested dataset root):

``verdicts``  one row per item x judge x sample; key (dataset, item_id, judge_id, sample).
``labels``    one row per item; key (dataset, item_id).
``judges``    optional; key (judge_id).
``items``     optional item metadata (e.g. RewardBench 2 ``subset``, ``prompt_variant``); key (dataset, item_id).
``refused``   optional; examples an adapter kept aside (e.g. refused by a provider), never dropped silently.

A dataset root also holds ``_ingest.json`` (adapter counts) and ``_SUCCESS`` (written last).
"""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "TABLES",
    "SUCCESS",
    "COLUMN_DEFAULTS",
    "VERDICT_CATEGORIES",
    "VERDICTS_SCHEMA",
    "LABELS_SCHEMA",
    "JUDGES_SCHEMA",
    "ITEMS_KEY",
    "TABLE_KEYS",
    "REQUIRED_COLUMNS",
    "SCHEMAS",
    "FREE_TABLES",
    "VERDICT_CODES",
    "MISSING_CODE",
    "UNKNOWN_CODE",
    "VOTE_A",
    "VOTE_B",
    "VOTE_CODING",
]

#: Every table a dataset root may hold, in writing order; ``judges``, ``items`` and ``refused`` are optional.
TABLES: tuple[str, ...] = ("verdicts", "labels", "judges", "items", "refused")
#: The marker a writer puts last (datasets and result runs alike); readers trust a folder only with it.
SUCCESS = "_SUCCESS"

#: The pairwise alphabet: ``A`` = the first output is better, ``B`` = the second, ``tie``; null = missing/unparseable.
VERDICT_CATEGORIES: tuple[str, ...] = ("A", "B", "tie")

#: Integer codes used by every numeric path (Spark jobs, in-memory statistics, dense panels). Missing is -1.
VERDICT_CODES: dict[str, int] = {"B": 0, "A": 1, "tie": 2}
MISSING_CODE: int = -1
#: Code of a non-null category outside the alphabet (the codec maps unknown strings to it; the kernels reject it).
UNKNOWN_CODE: int = -2

#: Binary votes of the dense item x judge matrices: the verdict code of ``A`` or ``B``; any other verdict (``tie``,
#: null, unparseable) and an absent (item, judge) pair is :data:`MISSING_CODE` (spec 000 §3.0).
VOTE_A: int = VERDICT_CODES["A"]
VOTE_B: int = VERDICT_CODES["B"]
#: The vote coding a saved calibration declares (``vote_codes`` of ``judgecal.calibration/v2``).
VOTE_CODING: dict[str, int | str] = {"A": VOTE_A, "B": VOTE_B, "missing": MISSING_CODE, "tie": "missing"}

VERDICTS_SCHEMA = pa.schema(
    [
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("judge_id", pa.string(), nullable=False),
        pa.field("sample", pa.int32(), nullable=False),
        pa.field("verdict", pa.string()),
        pa.field("score", pa.float64()),
        pa.field("rubric", pa.string()),
        pa.field("input_tokens", pa.int64()),
        pa.field("output_tokens", pa.int64()),
    ]
)

LABELS_SCHEMA = pa.schema(
    [
        pa.field("dataset", pa.string(), nullable=False),
        pa.field("item_id", pa.string(), nullable=False),
        pa.field("label", pa.string()),
        pa.field("label_score", pa.float64()),
    ]
)

JUDGES_SCHEMA = pa.schema(
    [
        pa.field("judge_id", pa.string(), nullable=False),
        pa.field("family", pa.string()),
        pa.field("tier", pa.string()),
        pa.field("cost_per_mtok_in", pa.float64()),
        pa.field("cost_per_mtok_out", pa.float64()),
        pa.field("cost_per_call", pa.float64()),
    ]
)

SCHEMAS: dict[str, pa.Schema] = {"verdicts": VERDICTS_SCHEMA, "labels": LABELS_SCHEMA, "judges": JUDGES_SCHEMA}

ITEMS_KEY: tuple[str, ...] = ("dataset", "item_id")

TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "verdicts": ("dataset", "item_id", "judge_id", "sample"),
    "labels": ("dataset", "item_id"),
    "judges": ("judge_id",),
    "items": ITEMS_KEY,
}

#: Columns a reader must find; the others of the schema are optional and filled (:data:`COLUMN_DEFAULTS`, else null).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "verdicts": ("dataset", "item_id", "judge_id"),
    "labels": ("dataset", "item_id", "label"),
    "judges": ("judge_id",),
}

#: Values of optional columns a stored table lacks: a string names the column to copy (``group_id`` defaults to
#: ``item_id``: an item without linked copies is its own group), a number is a constant.
COLUMN_DEFAULTS: dict[str, str | int] = {"group_id": "item_id", "sample": 0}

#: Tables without a fixed schema: their required string columns; any further column is free metadata.
FREE_TABLES: dict[str, tuple[str, ...]] = {"items": ITEMS_KEY, "refused": ("dataset",)}
