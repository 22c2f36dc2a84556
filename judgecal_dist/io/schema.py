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
    "VERDICT_CATEGORIES",
    "VERDICTS_SCHEMA",
    "LABELS_SCHEMA",
    "JUDGES_SCHEMA",
    "ITEMS_KEY",
    "TABLE_KEYS",
    "REQUIRED_COLUMNS",
    "SCHEMAS",
    "VERDICT_CODES",
    "MISSING_CODE",
]

#: The pairwise alphabet: ``A`` = the first output is better, ``B`` = the second, ``tie``; null = missing/unparseable.
VERDICT_CATEGORIES: tuple[str, ...] = ("A", "B", "tie")

#: Integer codes used by every numeric path (Spark jobs, in-memory statistics, dense panels). Missing is -1.
VERDICT_CODES: dict[str, int] = {"B": 0, "A": 1, "tie": 2}
MISSING_CODE: int = -1

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

#: Columns a reader must find; the others of the schema are optional and filled with nulls
#: (``group_id`` defaults to ``item_id``, ``sample`` to 0).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "verdicts": ("dataset", "item_id", "judge_id"),
    "labels": ("dataset", "item_id", "label"),
    "judges": ("judge_id",),
}
