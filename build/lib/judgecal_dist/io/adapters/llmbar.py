"""Adapter for the LLMBar evaluator-output release (Zeng et al., ICLR 2024).

Source layout (any fsspec URL; JSON plain or compressed, compression inferred from the suffix)::

    <subset>/dataset.json[.gz]                                   [{input, output_1, output_2, label}, ...]
    <subset>/evaluators/<backbone>/<strategy>/result.json[.gz]   the same list, each element with ``results``

``<subset>`` is a path (``Natural``, ``Adversarial/Neighbor``, ...); when ``src`` is one subset folder itself, the
subset is named after that folder. Mapping to the contracts:

* one judge per ``<backbone>/<strategy>/<order>``: order ``ab`` is the ``swap = False`` verdict, ``ba`` the
  ``swap = True`` one (the release already maps ``winner`` back to the original numbering);
* ``item_id`` = ``group_id`` = ``<subset>/<index>`` (0-based position in ``dataset.json``);
* verdicts and labels in the original numbering: ``A`` = output_1 better (winner or label 1), ``B`` = output_2;
  any other winner (e.g. null) is an unparseable verdict, stored as null; a missing ``swap = ...`` entry is a
  missing verdict, stored as null;
* the final verdicts of an element are those of the **last** element of ``results`` that is an object with
  ``swap = ...`` keys (text elements such as generated metrics come first; ``Swap`` strategies hold two rounds);
* judges: ``family`` = backbone, ``tier`` = strategy; items: ``subset`` and ``index``;
* a configuration whose ``result.json`` is absent from some subsets has no rows for those items (they are not
  missing verdicts: the judge never saw them): the report lists each such judge under ``absent_judges`` with
  ``items_absent`` and ``subsets``, counts the rows under ``absent_verdicts``, and the ingest warns (``--strict``
  refuses).

The raw ``score_1``/``score_2`` of the ``Rating*`` strategies are not kept (the contract has one score per row).
``rows_read`` in the report counts (item, evaluator) records.

References
----------
.. [1] Z. Zeng, J. Yu, T. Gao, Y. Meng, T. Goyal, D. Chen. Evaluating Large Language Models at Evaluating
   Instruction Following. ICLR 2024. arXiv:2310.07641.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

import pyarrow as pa

from judgecal_dist.errors import InputError
from judgecal_dist.io.adapters.report import AdapterResult, IngestWarning, make_report
from judgecal_dist.io.filesystem import open_fs, read_json_file, require_exists

__all__ = ["ORDERS", "read_llmbar"]

#: Judge order suffix -> the release's key for that presentation order.
ORDERS: dict[str, str] = {"ab": "swap = False", "ba": "swap = True"}
_WINNERS = {"1": "A", "2": "B"}
_LABELS = {1: "A", 2: "B", "1": "A", "2": "B"}
_DATASET_RE = re.compile(r"^(?:(?P<subset>.+)/)?dataset\.json(\.[a-z0-9]+)?$")
_RESULT_RE = re.compile(
    r"^(?:(?P<subset>.+)/)?evaluators/(?P<backbone>[^/]+)/(?P<strategy>[^/]+)/result\.json(\.[a-z0-9]+)?$"
)


def _final_verdicts(results: Any) -> dict[str, Any] | None:
    """The last element of ``results`` that is an object with ``swap = ...`` keys (None when there is none)."""
    if not isinstance(results, list):
        return None
    for element in reversed(results):
        if isinstance(element, dict) and any(str(key).startswith("swap = ") for key in element):
            return element
    return None


def _discover(fs: Any, root: str, src: str) -> tuple[dict[str, str], list[tuple[str, str, str, str]]]:
    datasets: dict[str, str] = {}
    results: list[tuple[str, str, str, str]] = []
    own = posixpath.basename(root)  # a single subset folder given as src is named after itself
    for path in sorted(fs.find(root)):
        rel = posixpath.relpath(path, root)
        if match := _RESULT_RE.match(rel):
            results.append((match["subset"] or own, match["backbone"], match["strategy"], path))
        elif match := _DATASET_RE.match(rel):
            datasets[match["subset"] or own] = path
    if not datasets:
        raise InputError(f"{src}: dataset.json: no <subset>/dataset.json(.gz) found; is this an LLMBar release?")
    orphans = sorted({subset for subset, *_ in results} - set(datasets))
    if orphans:
        raise InputError(
            f"{src}: dataset.json: evaluator results without a dataset file ({len(orphans)}, e.g. {orphans[:3]})"
        )
    return datasets, results


def _labels(fs: Any, path: str, subset: str) -> list[str]:
    records = read_json_file(fs, path)
    if not isinstance(records, list) or not records:
        raise InputError(f"{path}: (file): expected a non-empty JSON list of items")
    labels = [_LABELS.get(r.get("label")) if isinstance(r, dict) else None for r in records]
    bad = [f"{subset}/{i}" for i, label in enumerate(labels) if label is None]
    if bad:
        raise InputError(f"{path}: label: not 1 or 2 ({len(bad)} rows, e.g. {bad[:3]})")
    return [str(label) for label in labels]


def _absent_judges(
    src: str, labels: dict[str, list[str]], result_files: list[tuple[str, str, str, str]]
) -> tuple[dict[str, dict[str, Any]], list[IngestWarning]]:
    """Per judge id, the subsets holding no result file of its configuration and their item count; a warning."""
    present: dict[tuple[str, str], dict[str, str]] = {}
    for subset, backbone, strategy, path in result_files:
        present.setdefault((backbone, strategy), {})[subset] = posixpath.basename(path)
    absent: dict[str, dict[str, Any]] = {}
    for (backbone, strategy), files in sorted(present.items()):
        subsets = [subset for subset in labels if subset not in files]
        for order in ORDERS if subsets else ():
            absent[f"{backbone}/{strategy}/{order}"] = {
                "items_absent": sum(len(labels[subset]) for subset in subsets),
                "subsets": subsets,
            }
    if not absent:
        return absent, []
    (backbone, strategy), files = next((key, f) for key, f in sorted(present.items()) if len(f) < len(labels))
    subset = next(s for s in labels if s not in files)
    name = f"{subset}/evaluators/{backbone}/{strategy}/{next(iter(files.values()))}"
    rows = sum(entry["items_absent"] for entry in absent.values())
    warning = IngestWarning(
        message=(
            f"{src}: {name}: not found: judge {backbone}/{strategy} (ab, ba) has no result file in subset {subset}, "
            f"so its {len(labels[subset])} items there are absent, not missing verdicts ({len(absent)} judge ids "
            f"absent from some subsets, {rows} verdict rows in all)"
        ),
        fix=f"restore {name}, or ingest without --strict to keep these judges with their absent items listed",
        note="each judge's absent items and subsets are under absent_judges in the report",
    )
    return absent, [warning]


def read_llmbar(
    src: str, *, dataset: str | None = None, storage_options: dict[str, Any] | None = None
) -> AdapterResult:
    """Read an LLMBar release folder into contract tables.

    Parameters
    ----------
    src : str
        URL of the release folder (holding ``Natural/``, ``Adversarial/...``).
    dataset : str, optional
        Dataset name; ``"llmbar"`` by default.
    storage_options : dict, optional
        fsspec options for ``src``.

    Returns
    -------
    AdapterResult
        verdicts, labels, judges, items and the report (``subsets``: items per subset, ``evaluators``: count of
        backbone/strategy configurations, ``absent_judges`` and ``absent_verdicts``), with a warning when a
        configuration's result file is absent from some subsets.

    Raises
    ------
    InputError
        ``src`` does not exist or has no dataset files; a file cannot be read; a label is not 1 or 2; a result
        file's length or labels disagree with its ``dataset.json``.
    """
    name = dataset or "llmbar"
    fs, root = open_fs(src, storage_options)
    require_exists(fs, root, src)
    root = root.rstrip("/")
    dataset_files, result_files = _discover(fs, root, src)
    labels = {subset: _labels(fs, path, subset) for subset, path in dataset_files.items()}
    cols: dict[str, list[Any]] = {"item_id": [], "judge_id": [], "verdict": []}
    missing = unparseable = rows_read = 0
    for subset, backbone, strategy, path in result_files:
        records = read_json_file(fs, path)
        expected = labels[subset]
        if not isinstance(records, list) or len(records) != len(expected):
            found = len(records) if isinstance(records, list) else type(records).__name__
            raise InputError(f"{path}: (file): {found} elements, but {subset}/dataset.json has {len(expected)}")
        for index, record in enumerate(records):
            rows_read += 1
            if not isinstance(record, dict) or _LABELS.get(record.get("label")) != expected[index]:
                raise InputError(
                    f"{path}: label: disagrees with {subset}/dataset.json (1 rows, e.g. ['{subset}/{index}'])"
                )
            final = _final_verdicts(record.get("results")) or {}
            for order, key in ORDERS.items():
                entry = final.get(key)
                verdict = _WINNERS.get(str(entry.get("winner"))) if isinstance(entry, dict) else None
                if entry is None:
                    missing += 1
                elif verdict is None:
                    unparseable += 1
                cols["item_id"].append(f"{subset}/{index}")
                cols["judge_id"].append(f"{backbone}/{strategy}/{order}")
                cols["verdict"].append(verdict)
    n = len(cols["item_id"])
    verdicts = pa.table({"dataset": pa.repeat(name, n), **cols})
    item_ids = [f"{subset}/{i}" for subset, subset_labels in labels.items() for i in range(len(subset_labels))]
    label_table = pa.table(
        {"dataset": [name] * len(item_ids), "item_id": item_ids, "label": [x for ls in labels.values() for x in ls]}
    )
    items = pa.table(
        {
            "dataset": [name] * len(item_ids),
            "item_id": item_ids,
            "subset": [subset for subset, ls in labels.items() for _ in ls],
            "index": pa.array([i for ls in labels.values() for i in range(len(ls))], pa.int32()),
        }
    )
    configs = sorted({(backbone, strategy) for _, backbone, strategy, _ in result_files})
    judges = pa.table(
        {
            "judge_id": [f"{b}/{s}/{order}" for b, s in configs for order in ORDERS],
            "family": [b for b, _ in configs for _ in ORDERS],
            "tier": [s for _, s in configs for _ in ORDERS],
        }
    )
    tables = {"verdicts": verdicts, "labels": label_table, "judges": judges, "items": items}
    absent, warnings = _absent_judges(src, labels, result_files)
    report = make_report(
        "llmbar",
        src,
        datasets=[name],
        rows_read=rows_read,
        tables=tables,
        missing_verdicts=missing,
        unparseable_verdicts=unparseable,
        rejected=[],
        subsets={subset: len(ls) for subset, ls in labels.items()},
        evaluators=len(configs),
        absent_verdicts=sum(entry["items_absent"] for entry in absent.values()),
        absent_judges=absent,
    )
    return AdapterResult(tables=tables, report=report, sources={"verdicts": src, "labels": src}, warnings=warnings)
