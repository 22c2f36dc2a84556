"""What ``judgecal score`` asks of a model kind that scores a whole table rather than one panel row at a time
(every kind of :data:`~judgecal_dist.models.documents.KINDS` but the panel pipeline and the continuous correctors).

Such a kind is data plus pure maths: it names what it reads (``reads``), scores a batch of those coded rows with
a method of its own (numpy / Arrow in, columns out) and turns its scored rows into the summary tables. It reads no
file and chooses no engine: :func:`judgecal_dist.scoring.tables.score_table` reads the input, runs the batch
method in this process or in the Spark tasks (the same rows either way) and makes the checks; ``score`` stages the
rows, writes the summaries and commits; it knows no kind by name.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import pandas as pd
import pyarrow as pa

__all__ = ["TableModel"]


@runtime_checkable
class TableModel(Protocol):
    """A model kind that scores a dataset table itself (``judgecal.davidson/v2``, ``judgecal.escalation/v2``, ...).

    Attributes
    ----------
    kind : str
        The kind's name in :data:`~judgecal_dist.models.documents.KINDS`.
    name : str
        A readable name for logs and the summary.
    judge_ids : list of str
        The judges (or tiers) whose verdicts it reads.
    reads : str
        Its input, one of :data:`judgecal_dist.scoring.tables.READERS`: ``item_votes`` (packed verdict codes of
        ``judge_ids`` per item, scored by ``score_packed``), ``rubric_scores`` (1-5 scores per item,
        ``score_rubric``), ``vote_counts`` (A/tie/B counts per item and judge, ``score_counts``) or
        ``collections`` (score collections of rb2-k8 tiers, ``route``).
    """

    kind: str

    @property
    def reads(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def judge_ids(self) -> list[str]: ...

    def summaries(self, table: pa.Table) -> dict[str, pd.DataFrame]:
        """Summary tables by name (each written as ``summary/<name>.parquet`` and into ``summary.json``)."""
        ...
