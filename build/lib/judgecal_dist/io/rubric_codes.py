"""Stored 1-5 rubric scores as the scalar-schema codes of :mod:`judgecal_dist.methods.fcps` (0..4 = scores 1..5).

One coding for every reader of ``verdicts.score``: the regime map's rubric data and ``judgecal score`` of a rubric
model, so a model scores exactly the patterns it was fitted on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

__all__ = ["ERR", "rubric_codes"]

#: The code of a judge without a parseable score (a null score or no row for the item).
ERR = 5


def rubric_codes(
    verdicts: pd.DataFrame, items: pd.DataFrame, keys: Sequence[str], judges: Sequence[str]
) -> npt.NDArray[np.int64]:
    """Codes of shape ``(len(items), len(judges))``: each judge's score rounded and clipped to 1..5, minus 1, for
    the items ``items[keys]`` in their order; :data:`ERR` where the score is null or the (item, judge) row absent.

    ``verdicts`` holds ``keys``, ``judge_id`` and ``score`` rows of one sample.
    """
    mine = verdicts[verdicts["judge_id"].isin(list(judges))]
    code = np.clip(np.round(mine["score"].to_numpy(dtype=np.float64)), 1, 5) - 1.0
    wide = mine.assign(code=np.where(np.isnan(code), float(ERR), code)).pivot_table(
        index=list(keys), columns="judge_id", values="code", aggfunc="first"
    )
    index = pd.MultiIndex.from_frame(items[list(keys)]) if len(keys) > 1 else pd.Index(items[keys[0]])
    return wide.reindex(index=index, columns=list(judges)).fillna(float(ERR)).to_numpy().astype(np.int64)
