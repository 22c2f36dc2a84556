"""Adapter for repeated-sample RewardBench 2 score collections (``rb2-k8``, seed 004, spec/004.md §2).

Source: one JSON-lines file (plain or compressed) or a folder of them, one example per line::

    {id, subset, prompt_variant, k, <tier>_scores: n_responses x k (int | null), <tier>_errors: ..., cost:
     {<tier>_input_tokens, <tier>_output_tokens}, refused}

Mapping to the contracts (one dataset per file, named after the file stem, e.g. ``base_both_k8``, unless a
name is given):

* one item per (prompt_variant, subset, example id, response): ids repeat across subsets (spec §2.2), so
  ``item_id = "<prompt_variant>/<subset>/<id>/<response>"`` and ``group_id = "<prompt_variant>/<subset>/<id>"``
  (the responses of one example stay on one side of every split);
* ``judge_id`` = the tier (``full``, ``mini``, ``nano``: the ``<tier>_scores`` keys), ``sample`` = 0..k-1,
  ``score`` = the 1..10 score as float (null stays null), ``verdict`` null, ``rubric`` = subset;
* **token counts are per (example, tier)** (summed over the example's API calls, spec §2.2): they sit on the row of
  response 0, sample 0 of that example and tier and are null on its other rows, so that summing ``input_tokens``
  or ``output_tokens`` over any set of examples gives their true total;
* labels: ``label_score`` = 1.0 for response 0 (the chosen one), 0.0 for the others; ``label`` null;
* items: ``subset``, ``prompt_variant``, ``example_id``, ``response``;
* examples with ``refused: true`` go to the ``refused`` table (never dropped silently); examples with fewer than
  two responses are left out and listed in the report's ``rejected``.

Scores outside 1..10, a ``k`` that differs between rows, a response whose sample count differs from ``k`` and a
number of responses that differs between tiers are errors. ``rows_read`` counts JSON lines. The report's
``null_scores`` gives null scores per dataset and tier, ``null_reasons`` their ``<tier>_errors`` reasons, and
``duplicate_ids`` the ids that occur in more than one subset of a file.
"""

from __future__ import annotations

import json
import posixpath
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from judgecal_dist.errors import InputError
from judgecal_dist.io.adapters.report import AdapterResult, make_report
from judgecal_dist.io.filesystem import DECODE_ERRORS, open_fs, open_input, require_exists, strip_compression

__all__ = ["SCORE_RANGE", "read_rb2k8"]

#: Declared score range of the RewardBench 2 ratings prompt.
SCORE_RANGE: tuple[float, float] = (1.0, 10.0)
_SUFFIX = "_scores"
_UNPARSEABLE_PREFIX = "no_score"


def _nested_schema(fs: Any, path: str, url: str) -> pa.Schema:
    """Explicit types of the nested score and error fields, named after the first line's ``<tier>_scores`` keys.

    Left to inference, pyarrow's JSON reader can build invalid arrays for nested lists that are all null in one
    block (``<tier>_errors`` usually are), so their types are declared.
    """
    try:
        with open_input(fs, path) as fh:
            first = fh.readline()
        record = json.loads(first) if first.strip() else None
    except DECODE_ERRORS as err:  # json.JSONDecodeError is a ValueError
        raise InputError(f"{url}: (file): cannot read JSON lines (line 1: {type(err).__name__}: {err})") from err
    if not isinstance(record, dict):
        raise InputError(f"{url}: (all columns): empty file or first line not a JSON object")
    tiers = sorted(key[: -len(_SUFFIX)] for key in record if key.endswith(_SUFFIX))
    fields = []
    for tier in tiers:
        fields.append(pa.field(f"{tier}{_SUFFIX}", pa.list_(pa.list_(pa.float64()))))
        fields.append(pa.field(f"{tier}_errors", pa.list_(pa.list_(pa.string()))))
    return pa.schema(fields)


def _read_jsonl(fs: Any, path: str, url: str) -> pa.Table:
    options = pj.ParseOptions(explicit_schema=_nested_schema(fs, path, url), unexpected_field_behavior="infer")
    try:
        with open_input(fs, path) as fh:
            table = pj.read_json(fh, parse_options=options)
        table.validate(full=True)
    except (pa.ArrowInvalid, *DECODE_ERRORS) as err:
        raise InputError(f"{url}: (file): cannot read JSON lines ({type(err).__name__}: {err})") from err
    missing = [c for c in ("id", "subset", "prompt_variant", "k") if c not in table.column_names]
    if missing:
        raise InputError(f"{url}: {', '.join(missing)}: missing required field (found {table.column_names})")
    return table


def _example_keys(table: pa.Table, url: str) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """String id, subset, prompt_variant and the example key ``<prompt_variant>/<subset>/<id>``."""
    cols = []
    for name in ("id", "subset", "prompt_variant"):
        column = table.column(name).combine_chunks()
        try:
            column = column.cast(pa.string())
        except pa.ArrowInvalid as err:
            raise InputError(f"{url}: {name}: cannot read as text ({err})") from err
        if column.null_count:
            raise InputError(f"{url}: {name}: null values ({column.null_count} rows)")
        cols.append(column)
    ids, subsets, variants = cols
    return ids, subsets, variants, pc.binary_join_element_wise(variants, subsets, ids, "/")


def _check_k(table: pa.Table, keys: pa.Array, url: str) -> int:
    k = table.column("k").combine_chunks()
    values = pc.unique(k).to_pylist()
    if len(values) != 1 or values[0] is None or int(values[0]) < 1:
        first = pc.equal(k, values[0]) if values and values[0] is not None else pc.is_valid(k)
        odd = keys.filter(pc.invert(pc.fill_null(first, False))).slice(0, 3).to_pylist()
        raise InputError(f"{url}: k: differs between rows or is not positive (values {values[:5]}, e.g. {odd})")
    return int(values[0])


def _tier_scores(table: pa.Table, tier: str, keys: pa.Array, url: str) -> pa.ListArray:
    column = table.column(f"{tier}{_SUFFIX}").combine_chunks()
    if not pa.types.is_list(column.type) or not pa.types.is_list(column.type.value_type):
        raise InputError(f"{url}: {tier}{_SUFFIX}: expected a list of lists of scores, found {column.type}")
    if column.null_count:
        odd = keys.filter(pc.is_null(column)).slice(0, 3).to_pylist()
        raise InputError(
            f"{url}: {tier}{_SUFFIX}: missing for a tier of the file ({column.null_count} rows, e.g. {odd})"
        )
    return column


def _scores(column: pa.ListArray, tier: str, k: int, item_ids: pa.Array, url: str) -> pa.Array:
    responses = column.flatten()
    lengths = pc.list_value_length(responses).to_numpy(zero_copy_only=False)
    if (lengths != k).any():
        odd = item_ids.filter(pa.array(lengths != k)).slice(0, 3).to_pylist()
        raise InputError(
            f"{url}: {tier}{_SUFFIX}: samples per response differ from k={k} ({int((lengths != k).sum())} responses, "
            f"e.g. {odd})"
        )
    try:
        scores = responses.flatten().cast(pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise InputError(f"{url}: {tier}{_SUFFIX}: scores are not numbers ({err})") from err
    low, high = SCORE_RANGE
    outside = pc.fill_null(pc.or_(pc.less(scores, low), pc.greater(scores, high)), False)
    if pc.any(outside).as_py():
        idx = np.flatnonzero(outside.to_numpy(zero_copy_only=False))
        odd = [f"{item_ids[int(i) // k]}#{int(i) % k}" for i in idx[:3]]
        values = scores.take(pa.array(idx[:3])).to_pylist()
        raise InputError(
            f"{url}: {tier}{_SUFFIX}: scores outside [{low:g}, {high:g}] {values} ({len(idx)} values, e.g. {odd})"
        )
    return scores


def _null_reasons(table: pa.Table, tier: str, scores: pa.Array) -> Counter[str]:
    reasons: Counter[str] = Counter()
    null = pc.is_null(scores)
    if f"{tier}_errors" not in table.column_names:
        reasons["unknown"] = int(pc.sum(null).as_py() or 0)
        return reasons
    errors = table.column(f"{tier}_errors").combine_chunks().flatten().flatten()
    if len(errors) != len(scores):
        reasons["unknown"] = int(pc.sum(null).as_py() or 0)
        return reasons
    for reason in errors.filter(null).cast(pa.string()).to_pylist():
        reasons[reason or "unknown"] += 1
    return reasons


def _tokens(cost: pa.StructArray | None, tier: str, kind: str, n_rows: int) -> pa.Array:
    name = f"{tier}_{kind}_tokens"
    if cost is None or cost.type.get_field_index(name) < 0:
        return pa.nulls(n_rows, pa.int64())
    return cost.field(name).cast(pa.int64())


def _check_responses(columns: dict[str, pa.ListArray], keys: pa.Array, url: str) -> np.ndarray:
    """Responses per example; the same for every tier of the file."""
    tiers = list(columns)
    n_resp = pc.list_value_length(columns[tiers[0]]).to_numpy(zero_copy_only=False)
    for tier in tiers[1:]:
        other = pc.list_value_length(columns[tier]).to_numpy(zero_copy_only=False)
        if (other != n_resp).any():
            odd = keys.filter(pa.array(other != n_resp)).slice(0, 3).to_pylist()
            raise InputError(
                f"{url}: {tier}{_SUFFIX}: number of responses differs from {tiers[0]} "
                f"({int((other != n_resp).sum())} rows, e.g. {odd})"
            )
    return n_resp


class _Examples:
    """The accepted examples of one file, with the (example, response, sample) layout of their values."""

    def __init__(self, table: pa.Table, keep: np.ndarray, n_resp: np.ndarray, k: int, url: str) -> None:
        self.url, self.k = url, k
        mask = pa.array(keep)
        self.table = table.filter(mask)
        ids, subsets, variants, keys = (a.filter(mask) for a in _example_keys(table, url))
        counts = n_resp[keep]
        resp_row = np.repeat(np.arange(len(counts)), counts)
        self.response = np.arange(len(resp_row)) - np.repeat(np.cumsum(counts) - counts, counts)
        self.value_item = np.repeat(np.arange(len(resp_row)), k)
        self.value_row = resp_row[self.value_item]
        self.sample = np.tile(np.arange(k, dtype=np.int32), len(resp_row))
        take = pa.array(resp_row)
        self.group_ids = keys.take(take)
        self.item_ids = pc.binary_join_element_wise(self.group_ids, pa.array(self.response).cast(pa.string()), "/")
        self.items = {"subset": subsets.take(take), "prompt_variant": variants.take(take), "example_id": ids.take(take)}
        self.subsets = subsets

    def verdicts(self, name: str, tier: str, scores: pa.Array) -> pa.Table:
        """The tier's verdict rows; token counts on the row of response 0, sample 0 only (module docstring)."""
        n = len(scores)
        item, row = pa.array(self.value_item), pa.array(self.value_row)
        first = pa.array((self.response[self.value_item] == 0) & (self.sample == 0))
        cost = self.table.column("cost").combine_chunks() if "cost" in self.table.column_names else None
        tokens = {
            f"{kind}_tokens": pc.if_else(
                first, _tokens(cost, tier, kind, self.table.num_rows).take(row), pa.scalar(None, pa.int64())
            )
            for kind in ("input", "output")
        }
        return pa.table(
            {
                "dataset": pa.repeat(name, n),
                "item_id": self.item_ids.take(item),
                "group_id": self.group_ids.take(item),
                "judge_id": pa.repeat(tier, n),
                "sample": pa.array(self.sample, pa.int32()),
                "verdict": pa.nulls(n, pa.string()),
                "score": scores,
                "rubric": self.subsets.take(row),
                **tokens,
            }
        )

    def labels_and_items(self, name: str) -> tuple[pa.Table, pa.Table]:
        n = len(self.item_ids)
        labels = pa.table(
            {
                "dataset": pa.repeat(name, n),
                "item_id": self.item_ids,
                "label": pa.nulls(n, pa.string()),
                "label_score": pa.array((self.response == 0).astype(np.float64)),
            }
        )
        items = pa.table(
            {
                "dataset": pa.repeat(name, n),
                "item_id": self.item_ids,
                **self.items,
                "response": pa.array(self.response, pa.int32()),
            }
        )
        return labels, items


def _refused(table: pa.Table, refused: np.ndarray, name: str, url: str) -> pa.Table:
    mask = pa.array(refused)
    ids, subsets, variants, keys = (a.filter(mask) for a in _example_keys(table, url))
    return pa.table(
        {
            "dataset": pa.repeat(name, int(refused.sum())),
            "group_id": keys,
            "example_id": ids,
            "subset": subsets,
            "prompt_variant": variants,
        }
    )


def _read_file(fs: Any, path: str, url: str, name: str) -> dict[str, Any]:
    table = _read_jsonl(fs, path, url)
    ids, subsets, _, keys = _example_keys(table, url)
    k = _check_k(table, keys, url)
    tiers = sorted(c[: -len(_SUFFIX)] for c in table.column_names if c.endswith(_SUFFIX))
    if not tiers:
        raise InputError(f"{url}: <tier>{_SUFFIX}: no score field found (found {table.column_names})")
    columns = {tier: _tier_scores(table, tier, keys, url) for tier in tiers}
    n_resp = _check_responses(columns, keys, url)
    refused = np.zeros(table.num_rows, dtype=bool)
    if "refused" in table.column_names:
        refused = pc.fill_null(table.column("refused"), False).to_numpy().astype(bool)
    too_few = (n_resp < 2) & ~refused
    rejected = [
        {"file": url, "example": key, "reason": f"{n} responses, at least 2 needed"}
        for key, n in zip(keys.filter(pa.array(too_few)).to_pylist(), n_resp[too_few].tolist(), strict=True)
    ]
    keep = ~refused & ~too_few
    examples = _Examples(table, keep, n_resp, k, url)
    verdicts, null_scores, null_reasons = [], {}, {}
    for tier in tiers:
        scores = _scores(columns[tier].filter(pa.array(keep)), tier, k, examples.item_ids, url)
        null_scores[tier] = scores.null_count
        null_reasons[tier] = dict(_null_reasons(examples.table, tier, scores))
        verdicts.append(examples.verdicts(name, tier, scores))
    labels, items = examples.labels_and_items(name)
    per_id = pa.table({"id": ids, "subset": subsets}).group_by("id").aggregate([("subset", "count_distinct")])
    return {
        "tables": {
            "verdicts": pa.concat_tables(verdicts),
            "labels": labels,
            "items": items,
            "refused": _refused(table, refused, name, url),
        },
        "rows_read": table.num_rows,
        "rejected": rejected,
        "tiers": tiers,
        "null_scores": null_scores,
        "null_reasons": null_reasons,
        "duplicate_ids": int(pc.sum(pc.greater(per_id.column("subset_count_distinct"), 1)).as_py() or 0),
        "examples": int(keep.sum()),
    }


def _source_files(fs: Any, root: str, src: str) -> list[str]:
    if fs.isfile(root):
        return [root]
    files = sorted(
        p for p in fs.find(root) if strip_compression(posixpath.basename(p))[0].endswith((".jsonl", ".ndjson"))
    )
    if not files:
        raise InputError(f"{src}: (folder): no *.jsonl[.gz] file found")
    return files


def _stem(path: str) -> str:
    return strip_compression(posixpath.basename(path))[0].rsplit(".", 1)[0]


def _merge(parts: list[pa.Table]) -> pa.Table:
    """Concatenate tables; rows that are exactly equal (the same item from two files of one dataset) once."""
    table = pa.concat_tables(parts)
    if len(parts) == 1:
        return table
    return table.group_by(table.column_names, use_threads=False).aggregate([]).select(table.column_names)


def read_rb2k8(src: str, *, dataset: str | None = None, storage_options: dict[str, Any] | None = None) -> AdapterResult:
    """Read RB2-k8 JSON-lines file(s) into contract tables.

    Parameters
    ----------
    src : str
        URL of a ``.jsonl[.gz]`` file or of a folder of them.
    dataset : str, optional
        Dataset name for every file (default: each file's stem, e.g. ``base_both_k8``). Files merged under one
        name must not hold the same tier for the same example; their labels and item rows, identical by
        construction, are kept once.
    storage_options : dict, optional
        fsspec options for ``src``.

    Returns
    -------
    AdapterResult
        verdicts, labels, items, refused, judges (one per tier) and the report.

    Raises
    ------
    InputError
        Unreadable or empty file, malformed JSON line, missing field, ``k`` differing between rows, samples per
        response differing from ``k``, responses differing between tiers, scores outside 1..10.
    """
    fs, root = open_fs(src, storage_options)
    require_exists(fs, root, src)
    files = _source_files(fs, root, src)
    per_file = {}
    for path in files:
        url = fs.unstrip_protocol(path) if "://" in str(src) else path
        per_file[url] = _read_file(fs, path, url, dataset or _stem(path))
    names = {url: dataset or _stem(url) for url in per_file}
    tables = {"verdicts": pa.concat_tables([f["tables"]["verdicts"] for f in per_file.values()])}
    for table in ("labels", "items", "refused"):
        tables[table] = _merge([f["tables"][table] for f in per_file.values()])
    tiers = sorted({tier for f in per_file.values() for tier in f["tiers"]})
    tables["judges"] = pa.table({"judge_id": tiers, "tier": tiers})
    if tables["refused"].num_rows == 0:
        del tables["refused"]
    rejected = [r for f in per_file.values() for r in f["rejected"]]
    null_scores = {names[url]: f["null_scores"] for url, f in per_file.items()}
    report = make_report(
        "rb2-k8",
        src,
        datasets=sorted(set(names.values())),
        rows_read=sum(f["rows_read"] for f in per_file.values()),
        tables=tables,
        missing_verdicts=sum(
            n
            for f in per_file.values()
            for r in f["null_reasons"].values()
            for reason, n in r.items()
            if not reason.startswith(_UNPARSEABLE_PREFIX)
        ),
        unparseable_verdicts=sum(
            n
            for f in per_file.values()
            for r in f["null_reasons"].values()
            for reason, n in r.items()
            if reason.startswith(_UNPARSEABLE_PREFIX)
        ),
        rejected=rejected,
        files={
            url: {
                "dataset": names[url],
                "examples": f["examples"],
                "rows_read": f["rows_read"],
                "duplicate_ids": f["duplicate_ids"],
                "tiers": f["tiers"],
            }
            for url, f in per_file.items()
        },
        null_scores=null_scores,
        null_reasons={names[url]: f["null_reasons"] for url, f in per_file.items()},
        refused_examples=tables["refused"].num_rows if "refused" in tables else 0,
    )
    return AdapterResult(
        tables=tables, report=report, sources={"verdicts": str(src), "labels": str(src)}, score_range=SCORE_RANGE
    )
