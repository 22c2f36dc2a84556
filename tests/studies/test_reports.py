"""Every study on small data, in process: its report opens with the answer, cites nothing a user lacks, names only
methods docs/methods.md explains, and every figure has titles, axis labels and readable ticks.

Figures are inspected as matplotlib objects when they are saved (``Figure.savefig`` is wrapped), so the test sees
exactly what the studies render, not a re-drawing of it.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from matplotlib.figure import Figure

from judgecal_dist.config import EngineConfig
from judgecal_dist.stats.ranges import metric_range
from judgecal_dist.studies.base import StudyResult, interval_note
from judgecal_dist.studies.recommendation import preview

ROOT = Path(__file__).resolve().parents[2]
METHODS_DOC = ROOT / "docs" / "methods.md"
#: What a user without our design documents cannot look up: spec sections, appendix items, numbered results.
CITATION = re.compile(
    r"\b[Ss]pec\b|§|\bH\.\d|\b(Theorem|Proposition|Lemma|Remark|Corollary|Appendix|Algorithm|Table|Eqs?\.)\s*\d"
    r"|\bpitfall \d|\bseed 00\d"
)
#: A machine path or URL in a figure's text.
PATH = re.compile(r"(^|[\s(`'\"])(/[\w.-]+){2,}|://|[A-Za-z]:\\")


def _inspect(fig: Figure) -> list[dict[str, Any]]:
    """Per axes of a rendered figure: its texts and tick labels (colour bars: their label)."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible() or not ax.has_data() and not ax.images and not getattr(ax, "_colorbar", None):
            continue
        colorbar = getattr(ax, "_colorbar", None)
        out.append(
            {
                "colorbar": colorbar is not None,
                "title": " ".join(t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right")) if t),
                "suptitle": fig._suptitle.get_text() if fig._suptitle is not None else "",
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "ticks": [
                    t.get_text()
                    for t in (*ax.get_xticklabels(which="both"), *ax.get_yticklabels(which="both"))
                    if t.get_visible()
                ],
                "texts": [t.get_text() for t in ax.texts],
            }
        )
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, tuple[StudyResult, dict[str, list[dict[str, Any]]]]]:
    """study -> (its StudyResult, figure name order -> axes inspections), every study run small in process."""
    from judgecal_dist.io.synthetic import generate_panel
    from judgecal_dist.studies.budget import study as budget
    from judgecal_dist.studies.continuous import study as continuous
    from judgecal_dist.studies.ensemble import study as ensemble
    from judgecal_dist.studies.inclusion import scale as inclusion_scale
    from judgecal_dist.studies.inclusion import study as inclusion
    from judgecal_dist.studies.itc import study as itc
    from judgecal_dist.studies.narrowband import study as narrowband
    from judgecal_dist.studies.regime_map import study as regime_map

    tmp = tmp_path_factory.mktemp("reports")
    panel, pairs = str(tmp / "panel"), str(tmp / "pairs")
    generate_panel(panel, n_items=400, n_judges=9, seed=3)
    generate_panel(pairs, n_items=400, n_judges=9, seed=5, pairs=True)
    runs: dict[str, tuple[Any, Callable[[], Any]]] = {
        "inclusion": (
            inclusion,
            lambda: inclusion.Config(
                data=panel,
                replicates=3,
                aggregators=("majority", "one_coin"),
                calibrators=("none", "platt", "beta"),
                panels=("all", "top3"),
                permutation_resamples=200,
            ),
        ),
        "inclusion_scale": (
            inclusion_scale,
            lambda: inclusion_scale.Config(data=panel, replicates=3, execution="dense", panels=("all", "top3")),
        ),
        "budget": (budget, lambda: budget.Config(data=pairs, replicates=3, max_t_resamples=200)),
        "budget_fraction": (
            budget,
            lambda: budget.Config(data=pairs, mode="fraction", replicates=2, fractions=(0.2, 0.5)),
        ),
        "narrowband": (narrowband, lambda: narrowband.Config(replicates=6)),
        "regime_map": (
            regime_map,
            lambda: regime_map.Config(
                data="synthetic:mixed",
                replicates=2,
                budgets=(64, 512),
                synthetic_test_rows=2000,
                families=("ridge_iso", "logistic"),
            ),
        ),
        "itc": (itc, lambda: itc.Config(data="synthetic:g2", replicates=3, synthetic_items=1000, budgets=(2, 4, 12))),
    }
    rb2 = ROOT.parent / "shared" / "data" / "rewardbench2_k8"
    if rb2.is_dir():  # the two studies of real RewardBench 2 files; skipped below without ../shared
        from judgecal_dist.io.ingest import ingest

        ingested = str(tmp / "rb2")
        ingest("rb2-k8", str(rb2), ingested)
        sliced = _rb2_slice(rb2, tmp / "rb2slice")
        runs["ensemble"] = (ensemble, lambda: ensemble.Config(data=ingested, replicates=5))
        runs["continuous"] = (
            continuous,
            lambda: continuous.Config(
                data=str(sliced),
                judges=("nano",),
                replicates=2,
                nuts_seeds=0,
                flow_epochs=2,
                flow_passes=2,
                budgets=(10, 40),
                test_groups=10,
                flow_batch=2,
            ),
        )
    out = {}
    seen: list[Figure] = []
    original = Figure.savefig

    def savefig(self: Figure, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)  # drawn: tick labels are final
        seen.append(_inspect(self))  # type: ignore[arg-type]
        return result

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Figure, "savefig", savefig)
        for name, (module, make) in runs.items():
            config = make()
            data = module.load(config, EngineConfig())
            parts = pd.concat([module.run_replicate(data, r) for r in module.plan(config, data)], ignore_index=True)
            seen.clear()
            result = module.summarise(config, parts, data)
            assert len(seen) == len(result.figures), f"{name}: a figure was not rendered through savefig"
            out[name] = (result, dict(zip(result.figures, list(seen), strict=True)))
    return out


def _rb2_slice(src: Path, dest: Path) -> Path:
    """The first 30 examples of every subset of the two base files (the same examples in both)."""
    dest.mkdir()
    files = ("base_both_k8.jsonl.gz", "base_nano_k8.jsonl.gz")
    keep: set[tuple[str, str]] = set()
    seen: Counter[str] = Counter()
    with gzip.open(src / files[0], "rt") as fh:
        for line in fh:
            row = json.loads(line)
            if seen[row["subset"]] < 30:
                seen[row["subset"]] += 1
                keep.add((row["subset"], str(row["id"])))
    for name in files:
        with gzip.open(src / name, "rt") as fh, gzip.open(dest / name, "wt") as out:
            out.writelines(line for line in fh if (lambda r: (r["subset"], str(r["id"])) in keep)(json.loads(line)))
    return dest


STUDIES = (
    "inclusion",
    "inclusion_scale",
    "budget",
    "budget_fraction",
    "narrowband",
    "regime_map",
    "itc",
    "ensemble",
    "continuous",
)


def _result(rendered: dict, study: str) -> tuple[StudyResult, dict]:
    if study not in rendered:
        pytest.skip(f"{study} needs ../shared/data/rewardbench2_k8")
    return rendered[study]


@pytest.mark.parametrize("study", STUDIES)
def test_report_opens_with_the_recommendation(rendered, study):
    result, _ = _result(rendered, study)
    lines = result.report.splitlines()
    assert lines[0].startswith("# ") and lines[2] == "## Recommendation", lines[:3]
    assert lines.count("## Recommendation") == 1, f"{study}: the Recommendation block is in the report twice"
    block = result.report.split("## Recommendation", 1)[1].split("\n\n", 2)[1]
    for field in ("**Use:**", "**Expected:**", "**Runner-up:**", "**Intervals:**"):
        assert field in block, f"{study}: {field} missing from the Recommendation block"
    assert re.search(r"\[-?\d", block.split("**Expected:**")[1]), f"{study}: no interval on the expected value"
    rec = result.extra["recommendation"]
    assert rec["support"] and set(rec["keys"]) <= set(rec["support"][0])
    keyed = [tuple(r[k] for k in rec["keys"]) for r in rec["support"]]
    assert len(set(keyed)) == len(keyed), f"{study}: supporting rows that look alike: {keyed}"


#: What interval_note (studies.base) says for each study: splits of one dataset, independent replicates, or a
#: bootstrap over the items of one evaluation.
INTERVALS = {
    "inclusion": {},
    "inclusion_scale": {},
    "budget": {},
    "budget_fraction": {},
    "narrowband": {"shared_items": False},
    "regime_map": {"shared_items": False},  # generated data here; real data: splits (tests/studies/regime_map)
    "itc": {"spread_over_splits": True},
    "ensemble": {"bootstrap_over": "examples", "resamples": 5},
    "continuous": {},
}


@pytest.mark.parametrize("study", STUDIES)
def test_report_says_which_interval_and_why(rendered, study):
    """The one sentence of studies.base.interval_note, in the Recommendation block and so in report.md."""
    result, _ = _result(rendered, study)
    note = interval_note(0.95, **INTERVALS[study])
    assert result.extra["recommendation"]["interval"] == note and f"**Intervals:** {note}" in result.report


@pytest.mark.parametrize("study", STUDIES)
def test_reports_and_console_cite_nothing_a_user_lacks(rendered, study):
    result, _ = _result(rendered, study)
    text = result.report + "\n" + preview(result.extra["recommendation"])
    hits = [line for line in text.splitlines() if CITATION.search(line)]
    assert not hits, f"{study}: citations of documents a user does not have: {hits[:3]}"
    assert "{'" not in result.report and "':" not in result.report, f"{study}: a raw Python dict in report.md"


def test_configs_cite_nothing_a_user_lacks():
    configs = sorted({*ROOT.glob("conf/**/*.yaml"), *ROOT.glob("judgecal_dist/**/*.yaml")})
    assert configs
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in configs
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if CITATION.search(line)
    ]
    assert not hits, f"citations of documents a user does not have: {hits[:5]}"


def _documented() -> set[str]:
    return set(re.findall(r"`([^`]+)`", METHODS_DOC.read_text()))


def test_methods_doc_covers_every_method_the_code_offers():
    from judgecal_dist.methods.fcps.paths import PATH_RULES
    from judgecal_dist.methods.fcps.select import FAMILY_LADDER, MENUS
    from judgecal_dist.methods.pipeline import AGGREGATORS, CALIBRATORS, PANELS
    from judgecal_dist.studies.continuous.study import CORRECTORS
    from judgecal_dist.studies.inclusion.search import SEARCHES
    from judgecal_dist.studies.itc.config import METHODS

    names = {*AGGREGATORS, *CALIBRATORS, *PANELS, *SEARCHES, *METHODS, *FAMILY_LADDER, *MENUS, *PATH_RULES}
    missing = sorted((names | set(CORRECTORS)) - _documented())
    assert not missing, f"docs/methods.md does not explain {missing}"
    assert not CITATION.search(METHODS_DOC.read_text())


#: The method columns of each study's summary.
METHOD_COLUMNS = {
    "inclusion": ("aggregator", "calibrator", "panel"),
    "inclusion_scale": ("aggregator", "calibrator", "panel"),
    "budget": ("aggregator", "calibrator", "panel"),
    "budget_fraction": ("aggregator", "calibrator", "panel"),
    "regime_map": ("menu", "selected_family", "selected_path"),
    "itc": ("method",),
    "ensemble": ("prompt_variant",),
    "continuous": ("corrector",),
}


@pytest.mark.parametrize("study", [*sorted(METHOD_COLUMNS), "narrowband"])
def test_methods_doc_covers_every_method_a_report_names(rendered, study):
    result, _ = _result(rendered, study)
    if study == "narrowband":  # one accuracy column per method: acc_<method>
        named = {c.removeprefix("acc_") for c in result.summary.columns if c.startswith("acc_") and "_ci_" not in c}
    else:
        named = {str(v) for c in METHOD_COLUMNS[study] for v in result.summary[c].dropna().unique()}
    rec = result.extra["recommendation"]
    named |= {w for w in re.findall(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+", f"{rec['use']} {rec['runner_up']}")}
    missing = sorted(named - _documented())
    assert not missing, f"{study}: docs/methods.md does not explain {missing}"


@pytest.mark.parametrize("study", STUDIES)
def test_every_figure_has_titles_labels_and_readable_ticks(rendered, study):
    _, figures = _result(rendered, study)
    assert figures, f"{study}: no figure"
    for name, axes in figures.items():
        assert axes, f"{study}/{name}: no axes with data"
        for i, ax in enumerate(axes):
            where = f"{study}/{name} axes {i}"
            sci = [t for t in ax["ticks"] if "times10^" in t.replace("\\", "").replace(" ", "")]
            assert not sci, f"{where}: unreadable tick labels {sci}"
            if ax["colorbar"]:
                assert ax["ylabel"] or ax["xlabel"], f"{where}: colour bar without a label"
                continue
            assert ax["title"] or ax["suptitle"], f"{where}: no title"
            assert ax["xlabel"] and ax["ylabel"], f"{where}: axis label missing ({ax['xlabel']!r}, {ax['ylabel']!r})"
            for text in (ax["title"], ax["suptitle"], ax["xlabel"], ax["ylabel"]):
                assert not PATH.search(text), f"{where}: a machine path in {text!r}"


def test_budget_report_gives_one_verdict_on_the_joint_and_per_budget_tests(rendered):
    """Beside the max-t result and the per-budget intervals, one sentence says which the report relies on; its
    reading of the per-budget intervals is the one the table's printed bounds give."""
    result, _ = _result(rendered, "budget")
    block = result.report.split("## Joint test across budgets", 1)[1].split("\n## ", 1)[0]
    bounds = [re.search(r"\[([-+]\d\.\d+), ([-+]\d\.\d+)\]", line) for line in block.splitlines() if line[:2] == "| "]
    printed = [(float(m.group(1)), float(m.group(2))) for m in bounds if m]
    assert printed and len(printed) == result.extra["max_t"]["K"]
    verdict = [line for line in block.splitlines() if line.startswith("One verdict:")]
    assert len(verdict) == 1 and "relies on the corrected per-budget intervals" in verdict[0]
    if all(low <= 0 <= high for low, high in printed):
        assert f"every one of the {len(printed)} corrected per-budget intervals contains 0" in verdict[0]
    rejected = "joint null rejected" in block
    assert ("rejects the joint null" in verdict[0]) == rejected
    assert ("they disagree" in verdict[0]) == (rejected == all(low <= 0 <= high for low, high in printed))


#: Where each study declares its paper's headline claims (mode-specific reports have their own declaration).
PAPER_CLAIMS = {
    "inclusion": "judgecal_dist.studies.inclusion.report:PAPER",
    "budget": "judgecal_dist.studies.budget.report:PAPER",
    "budget_fraction": "judgecal_dist.studies.budget.report:PAPER_FRACTIONS",
    "narrowband": "judgecal_dist.studies.narrowband.study:PAPER",
    "regime_map": "judgecal_dist.studies.regime_map.paper:PAPER",
    "itc": "judgecal_dist.studies.itc.report:PAPER",
    "continuous": "judgecal_dist.studies.continuous.paper:PAPER",
    "ensemble": "judgecal_dist.studies.ensemble.report:PAPER",
}


@pytest.mark.parametrize("study", sorted(PAPER_CLAIMS))
def test_report_sets_each_paper_claim_beside_ours(rendered, study):
    """The "The paper and here" section is in the report once, with every declared claim: a reproducible one as a
    table row with the paper's number, ours (or "not measured in this run") and a yes/no/n/a verdict; one whose data
    is absent listed by name as not reproducible."""
    import importlib

    from judgecal_dist.studies.report_kit import NOT_MEASURED

    result, _ = _result(rendered, study)
    module, _, name = PAPER_CLAIMS[study].partition(":")
    declared = getattr(importlib.import_module(module), name)
    assert result.report.count("\n## The paper and here\n") == 1, f"{study}: no (or two) paper-and-here sections"
    block = result.report.split("\n## The paper and here\n", 1)[1].split("\n## ", 1)[0]
    rows = {
        line.split(" | ")[0].removeprefix("| "): line.split(" | ") for line in block.splitlines() if line[:2] == "| "
    }
    absent = block.split("Not reproducible here", 1)[1] if "Not reproducible here" in block else ""
    for claim in declared.claims:
        if claim.key is None:
            assert f"- {claim.claim} (the paper: {claim.paper}): {claim.differs}." in absent, claim.claim
            continue
        cells = rows.get(claim.claim)
        assert cells is not None and len(cells) == 5, f"{study}: claim missing from the table: {claim.claim}"
        assert cells[1] == claim.paper and cells[3] in {"yes", "no", "n/a"}
        if cells[2] == NOT_MEASURED:  # an arm this run left out has no verdict
            assert cells[3] == "n/a", cells
        if cells[3] == "no":  # a difference always carries its one-line reason
            assert cells[4].strip(" |"), f"{study}: no reason beside a differing claim: {claim.claim}"


#: A printed interval: a number, then ``[low, high]`` (with the level inside or not).
PRINTED_INTERVAL = re.compile(r"\d[%)]? \[(?:\d+%: )?([-+]?\d[\d,]*\.?\d*), ([-+]?\d[\d,]*\.?\d*)\]")


def _recorded_intervals(node: Any, out: list[tuple[str, float, float]], sibling: str = "") -> None:
    """(metric, low, high) of every interval a result records: ``<m>_ci_low``/``_ci_high`` pairs (scalars or lists),
    ``ci_low``/``ci_high`` beside the metric they bound and ``<m>_ci`` pairs."""
    if isinstance(node, list):
        for item in node:
            _recorded_intervals(item, out, sibling)
        return
    if not isinstance(node, dict):
        return
    named = [k for k in node if metric_range(k) is not None and not k.endswith(("_ci_low", "_ci_high"))]
    for key, value in node.items():
        if key.endswith("ci_low") and f"{key[:-3]}high" in node:
            metric = key[: -len("_ci_low")] or (named[0] if named else sibling)
            lows, highs = value, node[f"{key[:-3]}high"]
            pairs = zip(lows, highs, strict=True) if isinstance(lows, list) else [(lows, highs)]
            out += [(metric, float(a), float(b)) for a, b in pairs if a is not None and b is not None]
        elif key.endswith("_ci") and isinstance(value, list | tuple) and len(value) == 2:
            out.append((key[:-3], float(value[0]), float(value[1])))
        _recorded_intervals(value, out, key)


@pytest.mark.parametrize("study", STUDIES)
def test_no_interval_leaves_its_metrics_range(rendered, study):
    """Every interval a study records (summary table, summary.json) lies in its metric's declared range, and every
    interval report.md prints is one of them (so the report prints none the range check did not see)."""
    result, _ = _result(rendered, study)
    family = study.split("_")[0]
    recorded: list[tuple[str, float, float]] = []
    for column in result.summary.columns:
        if column.endswith("_ci_low") and f"{column[:-3]}high" in result.summary:
            metric = column.removesuffix("_ci_low")
            pairs = result.summary[[column, f"{column[:-3]}high"]].to_numpy(dtype=float)
            recorded += [(metric, a, b) for a, b in pairs]
    _recorded_intervals(json.loads(json.dumps(result.extra, default=str)), recorded)
    _recorded_intervals(json.loads(json.dumps(result.records, default=str)), recorded)
    outside = []
    for metric, low, high in recorded:
        bounds = metric_range(metric, study=family)
        assert bounds is not None, f"{study}: {metric} has an interval but no declared range (stats.ranges)"
        if not (math.isnan(low) or bounds.contains(low) and bounds.contains(high)):
            outside.append(f"{metric} [{low:.4g}, {high:.4g}] outside [{bounds.low}, {bounds.high}]")
    assert not outside, f"{study}: {outside[:5]}"
    finite = [(a, b) for _, a, b in recorded if not math.isnan(a)]
    for match in PRINTED_INTERVAL.finditer(result.report):
        low, high = (float(x.replace(",", "")) for x in match.groups())
        tol = [0.5 * 10.0 ** -len(x.partition(".")[2]) + 1e-12 for x in match.groups()]
        found = any(abs(a * s - low) <= tol[0] and abs(b * s - high) <= tol[1] for a, b in finite for s in (1.0, 100.0))
        context = result.report[max(0, match.start() - 60) : match.end()].replace("\n", " ")
        # regime map's proxy diagnostics (AUC, gap) are percentile bootstraps, in range by construction, kept only
        # in the report
        found = found or study == "regime_map" and re.search(r"(AUC|gap) [-+]?[\d.]+ \[[^]]*\]$", context) is not None
        assert found, f"{study}: report.md prints an interval no summary records: ...{context}"
