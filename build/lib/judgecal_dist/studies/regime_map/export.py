"""The model the regime map exports: one menu's selected FCPS candidate as a ``judgecal.fcps/v1`` document.

The exported candidate is the one the study evaluated: the selection of the first split (``seed``) at the largest
budget (and the last interaction weight) in the recommended menu (``export: auto``: the table menu where the
table wins at the largest budget, the scalar menu where the scalar wins, the union menu where neither does) or in
the menu ``export`` names, fitted on that split's calibration block exactly as the study fitted it. Its judges are
the dataset's ``judge_id``s in path order (with position balancing the ``<judge>/ab`` verdicts, the item as
presented; the ``<judge>/ba`` ones are ignored judges); on generated data the generator's judges ``j0, j1, ...``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.errors import RunError
from judgecal_dist.methods.fcps.joint_table import HybridResidualShrinkage
from judgecal_dist.methods.fcps.scalar_families import make_family
from judgecal_dist.methods.fcps.select import Cells, fit_family, prefix_cells, prefix_squares
from judgecal_dist.models.fcps import FCPSModel, fcps_from_estimator
from judgecal_dist.studies.regime_map.config import NOT_EXPORTABLE
from judgecal_dist.studies.regime_map.recommend import verdict

if TYPE_CHECKING:
    from judgecal_dist.studies.regime_map.config import Config

__all__ = ["NOT_EXPORTABLE", "exported_menu", "selected_row", "export_candidate"]

_CALL_MENU = {"table": "table", "scalar": "scalar", "no clear winner": "union"}


def exported_menu(config: Config, paired: list[dict[str, Any]]) -> str:
    """``export``, or with ``auto`` the menu of the recommendation's call at the largest budget."""
    return str(config.export) if config.export != "auto" else _CALL_MENU[verdict(paired[-1])]


def selected_row(config: Config, parts: pd.DataFrame, menu: str) -> pd.Series:
    """The candidate ``menu`` selected on the first split at the largest budget (and the last interaction weight).

    Raises
    ------
    RunError
        The replicates hold no such selection (a run of an earlier version, or a menu it did not have).
    """
    where = (parts["seed"] == config.seed) & (parts["budget"] == max(config.budgets))
    if "interaction_weight" in parts:
        where &= parts["interaction_weight"] == parts["interaction_weight"].max()
    column = f"selected_{menu}"
    rows = parts[where & parts[column]] if column in parts else parts.iloc[0:0]
    if len(rows) != 1:
        raise RunError(f"regime_map: export: menu {menu!r} has no single selection on split {config.seed}; rerun")
    return rows.iloc[0]


def _judges(config: Config, m: int) -> tuple[list[str], list[str]]:
    """The data judge ids of the ``m`` code columns and the judges the model knowingly ignores."""
    if config.synthetic and not config.semi_real_source:
        return [f"j{i}" for i in range(m)], []
    if config.position_balance and config.schema == "pairwise":
        return [f"{j}/ab" for j in config.pool], [f"{j}/ba" for j in config.pool]
    return list(config.pool), []


def export_candidate(
    config: Config, row: pd.Series, paths: dict[str, np.ndarray], cal: Cells, options: dict[str, Any], menu: str
) -> FCPSModel:
    """The selected candidate ``row`` (``path, k, family``) refitted on ``cal`` with the study's ``options``."""
    order = np.asarray(paths[str(row["path"])], dtype=np.int64)
    k = int(row["k"])
    codes, n, s, _ = prefix_cells(cal, order[:k])
    family = str(row["family"])
    if family == "hybrid":  # the study scores it in closed form; the estimator gives the same numbers
        base = make_family(str(row["base"]), lam=options["ridge_lam"], C=options["C"], schema=cal.schema)
        hybrid = HybridResidualShrinkage(base, tau=float(row["tau"]), n_categories=cal.n_categories)
        estimator = hybrid.fit(codes, np.divide(s, n, out=np.zeros_like(s), where=n > 0), sample_weight=n)
    else:
        q = prefix_squares(cal, order[:k]) if cal.schema == "scalar" else None
        estimator = fit_family(family, codes, n, s, {**options, "schema": cal.schema}, q)
    judges, other = _judges(config, cal.codes.shape[1])
    path = [judges[i] for i in order]
    budget = max(config.budgets)
    return fcps_from_estimator(
        estimator,
        path=path,
        k=k,
        path_rule=str(row["path"]),
        ignored_judges=[*(j for j in judges if j not in path[:k]), *other],
        sample=int(config.sample),
        name=f"{family}{_base(row)} on {k} judge(s) of the {row['path']} path ({menu} menu, {budget} labels)",
        fitted_on={
            "dataset": None if config.synthetic else str(config.data),
            "labelled_items": int(round(cal.rows)),
            "sample": int(config.sample),
            "study": "regime_map",
        },
    )


def _base(row: pd.Series) -> str:
    return f" ({row['base']}, tau {float(row['tau']):g})" if row["family"] == "hybrid" else ""
