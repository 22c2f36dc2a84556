r"""Judge drift between runs of the history: which judges changed, how, and how sure we are.

For every judge present in both the baseline and the current run and every measure of
:data:`~judgecal_dist.history.judges.MEASURES` (a proportion :math:`k / n`), the change
:math:`\hat p_1 - \hat p_0` gets Newcombe's hybrid-score interval [1]_ and a two-sided score test of
:math:`p_1 = p_0` (statsmodels ``confint_proportions_2indep`` / ``test_proportions_2indep``). The p-values of all
judges x measures of one comparison are adjusted together (Holm's step-down for the family-wise error rate [2]_,
or Benjamini-Hochberg for the false discovery rate), so the chance that a night with no change raises any flag
stays at or under ``alpha`` (Holm). A change is flagged when its adjusted p-value is at most ``alpha`` *and* its
size is at least ``min_change`` (a practically negligible shift on a huge table is significant, not news).
Judges present on one side only are flagged as ``new`` or ``vanished``.

The baseline is the previous succeeded run, a run id, or ``window:N``: the N succeeded runs before the current
one, whose counts are pooled (a steadier reference than one night).

References
----------
.. [1] R. G. Newcombe. Interval estimation for the difference between independent proportions: comparison of
   eleven methods. Statistics in Medicine 17(8), 873-890, 1998. doi:10.1002/(SICI)1097-0258(19980430)17:8<873::AID-SIM779>3.0.CO;2-I
.. [2] S. Holm. A simple sequentially rejective multiple test procedure. Scandinavian Journal of Statistics 6(2),
   65-70, 1979.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import warnings
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar

import numpy as np
import pandas as pd
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep, test_proportions_2indep

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.stats import ENGINES
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.history.judges import MEASURES
from judgecal_dist.history.store import history_files, history_url, read_history
from judgecal_dist.settings import CiLevel, TypedSettings, listed, number, one_of

__all__ = [
    "DriftSettings",
    "Comparison",
    "check_baseline",
    "select_runs",
    "compare_judges",
    "panel_shift",
    "choose_history_engine",
    "detect_drift",
]

log = logging.getLogger(__name__)

_WINDOW = re.compile(r"window:(\d+)")
#: How a flagged change is named, by measure and direction.
_KINDS = {
    ("accuracy", -1): "accuracy drop",
    ("accuracy", 1): "accuracy rise",
    ("agreement", -1): "agreement with the panel drop",
    ("agreement", 1): "agreement with the panel rise",
    ("share_A", -1): "position bias shift (fewer A verdicts)",
    ("share_A", 1): "position bias shift (more A verdicts)",
    ("parse_rate", -1): "parse failures",
    ("parse_rate", 1): "parse rate rise",
    ("coverage", -1): "coverage drop",
    ("coverage", 1): "coverage rise",
}
_PANEL_METRICS = ("nll", "ece")


class DriftSettings(TypedSettings):
    """Thresholds of ``judgecal drift``, checked when built (before anything is read or written).

    Attributes
    ----------
    alpha : float
        Level of the multiplicity-adjusted tests, in (0, 0.5].
    method : {"holm", "fdr_bh"}
        Holm (family-wise error) or Benjamini-Hochberg (false discovery rate) across judges x measures.
    min_change : float
        Smallest absolute change of a proportion that can be flagged, in [0, 1).
    ci_level : float
        Level of the intervals, in (0, 1).
    measures : tuple of str
        Measures compared (a subset of :data:`~judgecal_dist.history.judges.MEASURES`).
    """

    fix_hint: ClassVar[str] = "fix {key} in {source}, e.g. {key}: {example}"
    # The field types are the settings' declarations (calls), which mypy cannot read as types.

    alpha: Annotated[float, number(gt=0.0, le=0.5, description="level of the adjusted tests")] = 0.05
    method: Annotated[str, one_of(("holm", "fdr_bh"))] = "holm"
    min_change: Annotated[float, number(ge=0.0, lt=1.0, description="smallest flagged change of a proportion")] = 0.02
    ci_level: CiLevel = 0.95
    measures: Annotated[
        tuple[Annotated[str, one_of(MEASURES)], ...], listed(min_length=1, description="measures compared")
    ] = tuple(MEASURES)


@dataclasses.dataclass
class Comparison:
    """One drift comparison: the runs compared, per judge x measure changes, judge set changes and panel shift.

    ``series`` holds the flagged judges' history rows over all runs of the study (for the report's figures).
    """

    study: str
    current: str
    baseline: list[str]
    changes: pd.DataFrame
    new_judges: list[str]
    vanished_judges: list[str]
    panel: pd.DataFrame
    settings: DriftSettings
    series: pd.DataFrame = dataclasses.field(default_factory=pd.DataFrame)

    @property
    def flagged(self) -> pd.DataFrame:
        """The flagged judge x measure rows."""
        return self.changes[self.changes["flag"]] if not self.changes.empty else self.changes

    @property
    def raised(self) -> bool:
        """True when any change is flagged or a judge is new or vanished."""
        return bool(len(self.flagged) or self.new_judges or self.vanished_judges)


def _study_of(runs: pd.DataFrame, study: str | None, where: str) -> str:
    studies = sorted(runs["study"].unique())
    if study is None:
        if len(studies) > 1:
            raise ConfigError(
                f"{where}: several studies in the history ({', '.join(studies)}); choose one with --study"
            )
        return str(studies[0])
    if study not in studies:
        raise ConfigError(f"--study: {study!r} has no runs in {where} (found: {', '.join(studies) or 'none'})")
    return study


def check_baseline(baseline: str, *, source: str = "--baseline") -> int:
    """The window size of ``window:N`` (0 for ``previous`` or a run id); a malformed window is a ConfigError."""
    window = _WINDOW.fullmatch(baseline)
    if window and int(window.group(1)) >= 1:
        return int(window.group(1))
    if window:
        raise ConfigError(f"{source}: window size must be at least 1, got {baseline!r}")
    if baseline.startswith("window:") or not baseline.strip():
        raise ConfigError(f"{source}: {baseline!r} is not previous, window:N with N a positive integer, or a run id")
    return 0


def select_runs(runs: pd.DataFrame, *, current: str | None, baseline: str, where: str) -> tuple[str, list[str]]:
    """(current run id, baseline run ids) among the succeeded ``runs`` of one study, oldest first.

    ``current`` defaults to the latest succeeded run; ``baseline`` is ``previous``, ``window:N`` or a run id.
    Returns an empty baseline when the current run is the first.
    """
    done = runs[runs["status"] == "succeeded"].sort_values(["recorded_at", "run_id"], kind="stable")
    ids = done["run_id"].tolist()
    if not ids:
        raise InputError(f"{where}: no succeeded run recorded yet (run a study with this --output first)")
    current = current or ids[-1]
    if current not in ids:
        raise ConfigError(f"--current: run {current!r} is not a succeeded run in {where}; known: {', '.join(ids[-5:])}")
    before = ids[: ids.index(current)]
    size = check_baseline(baseline)
    if baseline == "previous":
        return current, before[-1:]
    if size:
        return current, before[-size:]
    if baseline not in ids or baseline == current:
        raise ConfigError(f"--baseline: run {baseline!r} is not another succeeded run in {where}; or use previous")
    return current, [baseline]


def _counts(judges: pd.DataFrame, run_ids: list[str]) -> pd.DataFrame:
    """Counts per judge summed over ``run_ids`` (one run: its counts; a window: pooled)."""
    columns = sorted({c for pair in MEASURES.values() for c in pair})
    rows = judges[judges["run_id"].isin(run_ids)]
    return rows.groupby("judge_id")[columns].sum()


def compare_judges(
    judges: pd.DataFrame, current: str, baseline: list[str], settings: DriftSettings
) -> tuple[pd.DataFrame, list[str], list[str]]:
    """Per judge x measure change with interval, raw and adjusted p-values and flag; new and vanished judges."""
    now, before = _counts(judges, [current]), _counts(judges, baseline)
    common = sorted(set(now.index) & set(before.index))
    rows = []
    for measure in settings.measures:
        num, den = MEASURES[measure]
        k1, n1 = now.loc[common, num].to_numpy(float), now.loc[common, den].to_numpy(float)
        k0, n0 = before.loc[common, num].to_numpy(float), before.loc[common, den].to_numpy(float)
        ok = (n1 > 0) & (n0 > 0)
        for i in np.flatnonzero(ok):
            rows.append((common[i], measure, k0[i], n0[i], k1[i], n1[i]))
    changes = pd.DataFrame(rows, columns=["judge_id", "measure", "k_baseline", "n_baseline", "k_current", "n_current"])
    changes = changes.assign(flag=pd.Series(dtype=bool)) if changes.empty else _test(changes, settings)
    return changes, sorted(set(now.index) - set(before.index)), sorted(set(before.index) - set(now.index))


def _test(changes: pd.DataFrame, settings: DriftSettings) -> pd.DataFrame:
    k0, n0 = changes["k_baseline"].to_numpy(), changes["n_baseline"].to_numpy()
    k1, n1 = changes["k_current"].to_numpy(), changes["n_current"].to_numpy()
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = confint_proportions_2indep(
            k1, n1, k0, n0, method="newcomb", compare="diff", alpha=1 - settings.ci_level
        )
        pvalue = np.asarray(test_proportions_2indep(k1, n1, k0, n0, method="score", compare="diff").pvalue, float)
    # Both proportions 0 (or both 1): the score statistic is 0/0; nothing changed, so p = 1.
    pvalue = np.where(np.isfinite(pvalue), pvalue, 1.0)
    adjusted = multipletests(pvalue, alpha=settings.alpha, method=settings.method)[1]
    change = k1 / n1 - k0 / n0
    flag = (adjusted <= settings.alpha) & (np.abs(change) >= settings.min_change)
    kind = [_KINDS[(m, 1 if c > 0 else -1)] for m, c in zip(changes["measure"], change, strict=True)]
    return changes.assign(
        baseline=k0 / n0,
        current=k1 / n1,
        change=change,
        change_ci_low=np.asarray(low, float),
        change_ci_high=np.asarray(high, float),
        p_value=pvalue,
        p_adjusted=adjusted,
        flag=flag,
        kind=np.where(flag, kind, ""),
    )


def panel_shift(results: pd.DataFrame, current: str, baseline: list[str]) -> pd.DataFrame:
    """The panel's calibrated NLL/ECE per summary row (method keys): baseline mean, current, change."""
    metrics = [m for m in _PANEL_METRICS if m in results.columns]
    if results.empty or not metrics:
        return pd.DataFrame()
    skip = {"run_id", "recorded_at", "study", "date", "dataset"}
    # Sorted: both history readers give the same columns, not necessarily in the same order.
    keys = sorted(c for c in results.columns if results[c].dtype == object and c not in skip)
    now = results[results["run_id"] == current].set_index(keys)[metrics]
    before = results[results["run_id"].isin(baseline)].groupby(keys)[metrics].mean()
    both = now.join(before, how="inner", lsuffix="_current", rsuffix="_baseline")
    for m in metrics:
        both[f"{m}_change"] = both[f"{m}_current"] - both[f"{m}_baseline"]
    both = both.reset_index()
    return both.sort_values(keys, kind="stable").reset_index(drop=True) if keys else both


def choose_history_engine(
    output: str, study: str | None, engine: str | None, config: EngineConfig, storage_options: Mapping[str, Any]
) -> str:
    """``"spark"`` or ``"local"`` to read the history of ``study``: ``auto`` reads through Spark above
    ``config.history_local_max_runs`` recorded runs (files of ``history/judges``), in memory up to it."""
    engine = engine or config.stats_engine
    if engine not in ENGINES:
        raise ConfigError(f"--engine: must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine != "auto":
        return engine
    runs = len(history_files(output, "judges", study=study, storage_options=storage_options))
    chosen = "local" if runs <= config.history_local_max_runs else "spark"
    log.info("history engine: %s (auto: %d runs, in memory up to %d)", chosen, runs, config.history_local_max_runs)
    return chosen


def _reader(engine: str, output: str, config: EngineConfig, options: Mapping[str, Any]) -> Callable[..., pd.DataFrame]:
    """``read(table, study=..., run_ids=..., judge_ids=...)`` on the chosen engine; both give equal frames."""
    if engine == "local":
        return functools.partial(read_history, output, storage_options=options)
    from judgecal_dist.engine.jobs.spark import get_session
    from judgecal_dist.history.spark_history import read_history_spark

    spark = get_session(master=config.spark_master, conf=dict(config.spark_conf))
    return functools.partial(read_history_spark, spark, output)


def _require_judges(judges: pd.DataFrame, study: str, current: str, before: list[str], where: str) -> None:
    """Refuse a comparison whose current run, or whole baseline, has no judges file (not every judge "vanished")."""
    have = set(judges["run_id"])
    absent = [run for run in [current] if run not in have] or ([] if have & set(before) else before)
    if absent:
        raise InputError(
            f"{where}/judges/study={study}: the judges table of run(s) {', '.join(absent)} is absent (the history "
            "is incomplete): rerun the same run id to repair it, or compare other runs with --current/--baseline"
        )


def detect_drift(
    output: str,
    *,
    study: str | None = None,
    baseline: str = "previous",
    current: str | None = None,
    settings: DriftSettings | None = None,
    storage_options: Mapping[str, Any] | None = None,
    engine: str | None = None,
    config: EngineConfig | None = None,
) -> Comparison:
    """Compare the current run of ``study`` in ``<output>/history`` with its baseline (see the module docstring).

    ``engine`` (default ``config.stats_engine``) reads the history in memory (``local``), through Spark
    (``spark``) or by its size (``auto``, see :func:`choose_history_engine`); the comparison is the same. Only the
    runs table and the compared runs' files are read, plus the flagged judges' rows over all runs (the figures).

    Raises
    ------
    ConfigError
        A setting out of range, an unknown study or run id, several studies and no ``study``, an unknown engine.
    InputError
        No history, or no succeeded run in it.
    """
    settings = settings or DriftSettings()
    config = config or EngineConfig()
    options = dict(config.storage_options if storage_options is None else storage_options)
    where = history_url(output)
    if not history_files(output, "runs", storage_options=options):
        raise InputError(f"{where}: no run history (run a study with --output {output} first)")
    read = _reader(choose_history_engine(output, study, engine, config, options), output, config, options)
    runs = read("runs")
    study = _study_of(runs, study, where)
    current, before = select_runs(runs[runs["study"] == study], current=current, baseline=baseline, where=where)
    judges = read("judges", study=study, run_ids=[current, *before])
    if not before or judges.empty:
        empty = pd.DataFrame(columns=["judge_id", "measure", "flag"]).astype({"flag": bool})
        return Comparison(study, current, before, empty, [], [], pd.DataFrame(), settings)
    _require_judges(judges, study, current, before, where)
    changes, new, vanished = compare_judges(judges, current, before, settings)
    results = read("results", study=study, run_ids=[current, *before])
    flagged = sorted(set(changes.loc[changes["flag"], "judge_id"])) if not changes.empty else []
    series = read("judges", study=study, judge_ids=flagged) if flagged else pd.DataFrame()
    panel = panel_shift(results, current, before)
    return Comparison(study, current, before, changes, new, vanished, panel, settings, series)
