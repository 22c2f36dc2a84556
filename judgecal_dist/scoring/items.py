"""Every item of a verdict table scored by a binary panel, checked as ``judgecal score`` checks it: the one way the
commands that need the panel's ``p`` per item get it (``score`` writes these rows; ``label select`` and ``label
estimate`` use them as the proxy without writing them).

:class:`TableChecks` holds the judge, sample and coverage checks of both engines; :func:`prepare_local` reads and
codes the table in this process (:class:`ScoredBatches` runs the kernel lazily); :func:`score_items_local` is both,
as one table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.votes.codec import VERDICT_COLUMNS, ItemVotes, encode
from judgecal_dist.errors import InputError
from judgecal_dist.io.dataset import read_dataset_table
from judgecal_dist.io.schema import VERDICT_CATEGORIES
from judgecal_dist.progress import Progress
from judgecal_dist.scoring.artifact import Calibration
from judgecal_dist.scoring.checks import MIN_JUDGE_COVERAGE, check_coverage, check_judges, check_votes_cast
from judgecal_dist.scoring.kernel import items_schema, score_batch

if TYPE_CHECKING:  # pyspark is the spark extra: in-process scoring never imports it
    from judgecal_dist.engine.votes.spark import ScanTally

__all__ = ["TableChecks", "prepare_local", "ScoredBatches", "score_items_local"]

_LOCAL_CHUNK_ITEMS = 200_000  # items scored per numpy call in memory (bounds the float64 copy of the votes)
#: Verdict columns read dictionary-encoded in memory: the codec maps each distinct string once.
_DICTIONARY_COLUMNS = ["dataset", "item_id", "group_id", "judge_id", "verdict"]


# -- checks (both engines) ----------------------------------------------------------------------------------------------------
@dataclass
class TableChecks:
    """The judge, sample and coverage checks of both engines, and the counts they leave for the summary."""

    model: Calibration
    data_url: str
    sample: int
    unknown: str
    min_coverage: float
    data_judges: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)

    def judges(self, data_judges: list[str]) -> None:
        """Refuse unknown judges (unless ignored) and a table covering too few of the model's judges."""
        if not data_judges:
            raise InputError(f"{self.data_url}: verdicts: sample: no verdict rows with sample={self.sample}")
        where = f"{self.data_url}: verdicts"
        self.data_judges = sorted(data_judges)
        # Judges the model saw when fitting but left out of its panel are known: their verdicts are not scored.
        known = [*self.model.judge_ids, *self.model.ignored_judges]
        self.extra = check_judges(self.data_judges, known, where=where, unknown=self.unknown)
        check_coverage(
            self.data_judges, self.model.judge_ids, where=where, floor=self.min_coverage, what=f"sample={self.sample}"
        )

    @property
    def absent(self) -> list[str]:
        return sorted(set(self.model.judge_ids) - set(self.data_judges))

    def tally(self, tally: ScanTally) -> None:
        """:meth:`judges` from what the Spark scan tasks tallied, with the errors of the in-memory path."""
        if tally.bad_rows:
            raise InputError(
                f"{self.data_url}: verdicts: verdict: {tally.bad_rows} rows with a category outside "
                f"{VERDICT_CATEGORIES} (e.g. {sorted(tally.bad_examples)})"
            )
        self.judges(sorted(tally.judges) if tally.rows else [])

    def counts(self, tables: dict[str, pd.DataFrame]) -> dict[str, Any]:
        datasets = tables["datasets"]
        return {
            "items": int(datasets["n_items"].sum()),
            "items_without_votes": int(datasets["items_without_votes"].sum()),
            # null, not 0, when the model records no calibration items (in_calibration is null on every row)
            "items_in_calibration": (
                int(datasets["items_in_calibration"].sum()) if self.model.fitted_items is not None else None
            ),
            "datasets": len(datasets),
            "judge_coverage": round(1.0 - len(self.absent) / len(self.model.judge_ids), 6),
            "unknown_judges_ignored": self.extra,
            "model_judges_absent": self.absent,
        }


# -- in process ------------------------------------------------------------------------------------------------
def prepare_local(model: Calibration, data_url: str, engine: EngineConfig, sample: int, checks: TableChecks) -> Any:
    """Read and check the table in memory (before anything is written); the scored batches, lazily."""
    options = engine.storage_options
    verdicts = read_dataset_table(
        data_url, "verdicts", VERDICT_COLUMNS, storage_options=options, dictionary_columns=_DICTIONARY_COLUMNS
    )
    labels = read_dataset_table(data_url, "labels", ["dataset", "item_id", "label"], storage_options=options)
    rows = encode(verdicts, model.judge_ids, sample=sample)  # the vote codec, as the Spark tasks run it
    del verdicts
    checks.judges(rows.judges_seen)
    rows.reject_unknown(where=f"{data_url}: verdicts")
    check_votes_cast(rows.code, where=f"{data_url}: verdicts", what=f"sample={sample}")
    return ScoredBatches(model, ItemVotes.from_rows(rows, labels, len(model.judge_ids)))


class ScoredBatches:
    """Scored batches of in-memory item votes, kept for the summaries (one pass of the kernel)."""

    def __init__(self, model: Calibration, items: Any) -> None:
        self.model, self.items = model, items
        self.batches: list[pa.RecordBatch] = []

    def __iter__(self) -> Any:
        items, n = self.items, len(self.items.labels)
        progress = Progress(n, label="score: items")
        for start in range(0, n, _LOCAL_CHUNK_ITEMS):
            stop = min(start + _LOCAL_CHUNK_ITEMS, n)
            keys = {
                k: items.keys[k].slice(start, stop - start).combine_chunks() for k in ("dataset", "item_id", "group_id")
            }
            batch = score_batch(self.model, keys, items.votes[start:stop], items.labels[start:stop])
            self.batches.append(batch)
            progress.advance(stop - start)
            yield batch


def score_items_local(
    model: Calibration,
    data_url: str,
    *,
    engine: EngineConfig | None = None,
    sample: int = 0,
    unknown_judges: str = "error",
    min_judge_coverage: float = MIN_JUDGE_COVERAGE,
) -> tuple[pa.Table, TableChecks]:
    """Every item of ``data_url`` scored in this process (rows of :func:`~judgecal_dist.scoring.kernel.items_schema`),
    with the checks that passed (their counts); nothing is written.

    Raises
    ------
    InputError
        As ``judgecal score``: no verdicts at ``sample``, unknown judges (with ``"error"``), too few of the model's
        judges, no A/B verdict.
    """
    checks = TableChecks(model, data_url, sample, unknown_judges, float(min_judge_coverage))
    prepared = prepare_local(model, data_url, engine or EngineConfig(), sample, checks)
    return pa.Table.from_batches(list(prepared), items_schema(model)), checks
