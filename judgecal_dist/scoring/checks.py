"""The judge checks every kind of model runs on a table before scoring it: unknown judges, coverage, votes cast.

Kept apart from :mod:`~judgecal_dist.scoring.apply` so the model kinds that read a table themselves
(:mod:`judgecal_dist.models`) use the same checks without importing the score command.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from judgecal_dist.errors import InputError
from judgecal_dist.io.schema import VOTE_A, VOTE_B

__all__ = [
    "MIN_JUDGE_COVERAGE",
    "UNKNOWN_JUDGES",
    "check_settings",
    "check_judges",
    "check_coverage",
    "check_votes_cast",
]

#: Default floor on the share of the model's judges that must have verdicts in a table (``score``, the notebook).
MIN_JUDGE_COVERAGE = 0.5


#: What score does with verdicts of judges the model does not know: refuse the table, or leave them out.
UNKNOWN_JUDGES = ("error", "ignore")


def check_settings(unknown_judges: str, min_judge_coverage: float) -> None:
    """Refuse an ``unknown_judges`` choice or a ``min_judge_coverage`` outside [0, 1] (before anything is read)."""
    if unknown_judges not in UNKNOWN_JUDGES:
        raise InputError(f"unknown_judges: must be one of {UNKNOWN_JUDGES}, got {unknown_judges!r}")
    if isinstance(min_judge_coverage, bool) or not 0.0 <= float(min_judge_coverage) <= 1.0:
        raise InputError(f"--min-judge-coverage: must be in [0, 1], got {min_judge_coverage!r}")


def check_judges(data_judges: Sequence[str], model_judges: Sequence[str], *, where: str, unknown: str) -> list[str]:
    """The data's judges outside ``model_judges``; an error unless ``unknown == "ignore"``.

    Raises
    ------
    InputError
        Some judges are unknown and ``unknown == "error"``.
    """
    extra = sorted(set(data_judges) - set(model_judges))
    if extra and unknown != "ignore":
        raise InputError(
            f"{where}: judge_id: {len(extra)} judge(s) not in the model (e.g. {extra[:3]}); score only the model's "
            "judges with --ignore-unknown-judges (their verdicts are then left out)"
        )
    return extra


def check_coverage(
    data_judges: Sequence[str],
    model_judges: Sequence[str],
    *,
    where: str,
    floor: float,
    what: str,
    override: str = "--min-judge-coverage 0",
) -> list[str]:
    """The model's judges without verdicts in the data; an error when they leave less than ``floor`` of them.

    ``override`` is how the caller's user lowers the floor (the CLI's option, the notebook's keyword).

    Raises
    ------
    InputError
        The share of the model's judges with verdicts (at ``what``) is below ``floor``.
    """
    absent = sorted(set(model_judges) - set(data_judges))
    coverage = 1.0 - len(absent) / len(model_judges)
    if coverage < floor:
        raise InputError(
            f"{where}: judge_id: {len(absent)} of the model's {len(model_judges)} judges have no verdicts "
            f"at {what} (e.g. {absent[:3]}), coverage {coverage:.0%} below {floor:.0%}: "
            "the model cannot score this table; score it anyway (items without a model judge's vote left "
            f"unscored) with {override}"
        )
    return absent


def check_votes_cast(codes: npt.NDArray[np.integer], *, where: str, what: str) -> None:
    """Refuse verdict rows (their vote codes) none of which is A or B (every one null or a tie): every item would be
    unscored, so the table is refused before anything is written instead of committing an output of nulls."""
    if len(codes) and not np.any((codes == VOTE_A) | (codes == VOTE_B)):
        raise InputError(
            f"{where}: verdict: no A or B verdict in the {len(codes)} rows with {what} (every one null or a tie), so "
            "no item could be scored; check the verdict column of the source you ingested (or --sample)"
        )
