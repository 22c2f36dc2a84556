"""The judge checks every kind of model runs on a table before scoring it: unknown judges and coverage.

Kept apart from :mod:`~judgecal_dist.scoring.apply` so the model kinds that read a table themselves
(:mod:`judgecal_dist.models`) use the same checks without importing the score command.
"""

from __future__ import annotations

from collections.abc import Sequence

from judgecal_dist.errors import InputError

__all__ = ["check_judges", "check_coverage"]


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
    data_judges: Sequence[str], model_judges: Sequence[str], *, where: str, floor: float, what: str
) -> list[str]:
    """The model's judges without verdicts in the data; an error when they leave less than ``floor`` of them.

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
            "unscored) with --min-judge-coverage 0"
        )
    return absent
