"""What ``judgecal score`` asks of a model kind that reads the data table itself (every kind of
:data:`~judgecal_dist.models.documents.KINDS` but the panel pipeline and the continuous correctors).

Such a kind scores a whole ingested dataset in one call, on the engine ``score`` chose (``spark`` or ``local``,
the same rows either way), makes every check before returning (nothing is written until then), and turns its
scored rows into the summary tables. ``score`` stages the rows, writes the summaries and commits; it knows no
kind by name (:func:`judgecal_dist.scoring.apply.score_dataset`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import pandas as pd
import pyarrow as pa

from judgecal_dist.config import EngineConfig

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
    """

    kind: str

    @property
    def name(self) -> str: ...

    @property
    def judge_ids(self) -> list[str]: ...

    def score_table(
        self,
        data_url: str,
        *,
        engine: EngineConfig,
        engine_name: str,
        unknown_judges: str,
        min_judge_coverage: float,
    ) -> tuple[pa.Table, dict[str, Any]]:
        """Scored rows of ``data_url`` and the counts for the summary; nothing written.

        Parameters
        ----------
        data_url : str
            An ingested dataset root.
        engine : EngineConfig
            Spark settings and storage options.
        engine_name : {"spark", "local"}
            Where the table is reduced (the rows are the same on both).
        unknown_judges : {"error", "ignore"}
            What to do with verdicts of judges the model does not know.
        min_judge_coverage : float
            Least share of the model's judges that must have verdicts in the table.

        Raises
        ------
        InputError
            The table cannot be scored by this model (one line naming the table, column and fix).
        """
        ...

    def summaries(self, table: pa.Table) -> dict[str, pd.DataFrame]:
        """Summary tables by name (each written as ``summary/<name>.parquet`` and into ``summary.json``)."""
        ...
