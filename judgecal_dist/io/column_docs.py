"""What each column of the data contracts means: the one source of the catalog's column comments and of
``docs/tables.md`` (a test checks that page against this module and :mod:`judgecal_dist.io.schema`).

Types and nullability live in :data:`~judgecal_dist.io.schema.SCHEMAS`; the free tables (``items``,
``refused``) declare only their key columns, every further column being the adapter's metadata.
"""

from __future__ import annotations

import textwrap

__all__ = ["COLUMN_DOCS", "LONG_INPUT_DOCS", "LONG_INPUT_RULES", "TABLE_DOCS", "column_comment", "long_input_help"]

#: One line per table: what one row is.
TABLE_DOCS: dict[str, str] = {
    "verdicts": "one row per item x judge x sample: what a judge said about an item",
    "labels": "one row per item: the reference answer",
    "judges": "one row per judge: its family, tier and price (optional)",
    "items": "one row per item: the adapter's item metadata, e.g. subset (optional)",
    "refused": "examples an adapter kept aside, e.g. refused by a provider, never dropped silently (optional)",
}

COLUMN_DOCS: dict[str, dict[str, str]] = {
    "verdicts": {
        "dataset": "dataset name (one ingested dataset may hold several)",
        "item_id": "item key within the dataset, e.g. LLMBar Natural/12 (subset/0-based index)",
        "group_id": "items sharing it (swapped or linked copies) stay on one side of every split; defaults to item_id",
        "judge_id": "judge key; LLMBar: backbone/strategy/order, order ab = presented as given, ba = presented swapped",
        "sample": "repeat number of the same judge on the same item, 0 when one sample",
        "verdict": "pairwise verdict in the ORIGINAL numbering, also for swapped (ba) judges: A = the first "
        "output is better, B = the second, tie = neither; null = missing or unparseable",
        "score": "scalar score for score schemas (e.g. RewardBench 2: 1-10); null = unparseable or none",
        "rubric": "the rubric or subset the verdict was made under, when the source has one",
        "input_tokens": "prompt tokens billed for the verdict (RewardBench 2: per example and tier, on its "
        "first row only, so sums are totals)",
        "output_tokens": "completion tokens billed for the verdict (same convention as input_tokens)",
    },
    "labels": {
        "dataset": "dataset name",
        "item_id": "item key, as in verdicts",
        "label": "reference verdict in the verdicts' alphabet and original numbering (A, B, tie); null = none",
        "label_score": "reference score for score schemas (RewardBench 2: 1.0 = the chosen response, 0.0 = not)",
    },
    "judges": {
        "judge_id": "judge key, as in verdicts",
        "family": "model family or backbone (LLMBar: the backbone)",
        "tier": "tier or prompting strategy (LLMBar: the strategy)",
        "cost_per_mtok_in": "price per million input tokens",
        "cost_per_mtok_out": "price per million output tokens",
        "cost_per_call": "cost of one verdict on one item (all its samples); read by judgecal advise",
    },
    "items": {
        "dataset": "dataset name",
        "item_id": "item key, as in verdicts; further columns are the adapter's metadata (LLMBar: subset, "
        "index; RewardBench 2: subset, prompt_variant, example_id, response)",
    },
    "refused": {
        "dataset": "dataset name; further columns are the source's fields of the example kept aside",
    },
}


def column_comment(table: str, column: str) -> str | None:
    """The meaning of ``table.column``, or None for a free metadata column."""
    return COLUMN_DOCS.get(table, {}).get(column)


#: What ``judgecal ingest --format long`` reads, per input table: (its columns, ``?`` = optional; what it holds).
#: ``docs/tables.md`` and ``judgecal ingest --help`` show it; a test checks both against it.
LONG_INPUT_DOCS: dict[str, tuple[str, str]] = {
    "verdicts": (
        "dataset?, item_id, judge_id, verdict, group_id?, sample?, score?, rubric?, input_tokens?, output_tokens?; "
        "or crowd-kit's task, worker, label",
        "required; one row per item x judge (x sample); verdict A, B, tie or 1/0 (1 = A), empty = missing",
    ),
    "labels": (
        "dataset?, item_id, label?, label_score?; or crowd-kit's task, label",
        "optional (--labels FILE reads it from elsewhere); one row per labelled item; label A, B, tie or 1/0, "
        "empty = none; no labels table, no rows or no label column: every item is unlabelled",
    ),
    "judges": (
        "judge_id, family?, tier?, cost_per_mtok_in?, cost_per_mtok_out?, cost_per_call?",
        "optional; one row per judge",
    ),
    "items": ("dataset?, item_id, any further columns", "optional; item metadata"),
}
#: How the long input's columns are checked and defaulted, one sentence each (help and docs show them).
LONG_INPUT_RULES: tuple[str, ...] = (
    "A missing dataset column is --dataset, else the verdicts' only dataset, else SRC's name without suffixes",
    "A missing group_id is item_id, a missing sample 0; sample and token counts are integers from 0 up to their type's "
    "largest (sample: 2147483647)",
    "A value out of range or of the wrong type is refused naming the file, the column and its first row (rows "
    "count from 1, the header not counted; in a Parquet folder, across its parts in name order)",
)


def long_input_help(width: int = 78) -> str:
    """The long input format as ``judgecal ingest --help`` shows it (``\\b`` keeps click from rewrapping)."""
    paragraphs = [
        "--format long reads SRC, a folder of <table>.<csv|tsv|jsonl|parquet>[.gz] files or Parquet "
        "folders, or one verdicts file; columns marked ? may be left out (docs/tables.md):"
    ]
    for table, (columns, meaning) in LONG_INPUT_DOCS.items():
        paragraphs.append(f"{table}: {columns}. {meaning[0].upper()}{meaning[1:]}.")
    paragraphs += [f"{rule}." for rule in LONG_INPUT_RULES]
    blocks = [
        "\b\n" + "\n".join(textwrap.wrap(p, width, subsequent_indent="  ", break_on_hyphens=False)) for p in paragraphs
    ]
    return "\n\n".join(blocks)
