"""Catalogue cases: study and engine settings validated before anything runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CFG = str(ROOT / "judgecal_dist" / "studies" / "configs" / "inclusion.yaml")
REGIME_MAP = str(ROOT / "judgecal_dist" / "studies" / "configs" / "regime_map.yaml")
ITC = str(ROOT / "judgecal_dist" / "studies" / "configs" / "itc.yaml")
#: A YAML alias bomb (under 500 bytes, about 387 million values once expanded).
BOMB = "study: inclusion\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{x}: &{x} [{', '.join([f'*{p}'] * 9)}]\n" for p, x in zip("abcdefgh", "bcdefghi", strict=True)
)


def run_with(tmp: Path, *settings: str, config: str = CFG) -> list[str]:
    """``judgecal run`` of ``config`` with ``--set`` settings (and a data URL), output under ``tmp/out``."""
    sets = [arg for item in ("data=x", *settings) for arg in ("--set", item)]
    return ["run", config, *sets, "--output", str(tmp / "out"), "--serial"]


def _write(tmp: Path, name: str, text: str) -> str:
    path = tmp / name
    path.write_text(text)
    return str(path)


def _rubric(tmp: Path) -> str:
    """Two documents of 1-5 rubric scores whose human score 7 is off the rubric."""
    import pyarrow as pa

    from judgecal_dist.io.dataset import write_dataset

    url = str(tmp / "rubric")
    items = ["s1", "s2", "s3", "s4"]
    verdicts = pa.table(
        {"dataset": ["d"] * 4, "item_id": items, "group_id": ["g1", "g1", "g2", "g2"], "judge_id": ["j"] * 4}
        | {"score": [1.0, 3.0, 5.0, 2.0]}
    )
    labels = pa.table({"dataset": ["d"] * 4, "item_id": items, "label": pa.array([None] * 4, pa.string())})
    write_dataset(
        url,
        {"verdicts": verdicts, "labels": labels.append_column("label_score", pa.array([1.0, 7.0, 3.0, 2.0]))},
        {"format": "test"},
    )
    return url


def _rubric_pool(tmp: Path) -> str:
    """Seven judges' 1-5 rubric scores on two documents (a semi-real source needs seven judges' verdicts)."""
    import pyarrow as pa

    from judgecal_dist.io.dataset import write_dataset

    url = str(tmp / "rubric7")
    rows = [(f"s{i}", f"g{i // 2}", f"j{j}", float(1 + (i + j) % 5)) for i in range(4) for j in range(7)]
    verdicts = pa.table(
        {"dataset": ["d"] * len(rows)}
        | {k: [r[n] for r in rows] for n, k in enumerate(("item_id", "group_id"))}
        | {"judge_id": [r[2] for r in rows], "score": [r[3] for r in rows]}
    )
    items = [f"s{i}" for i in range(4)]
    labels = pa.table({"dataset": ["d"] * 4, "item_id": items, "label": pa.array([None] * 4, pa.string())})
    write_dataset(url, {"verdicts": verdicts, "labels": labels}, {"format": "test"})
    return url


def _panel(tmp: Path) -> str:
    """A generated dataset of 40 items and two judges (ids ``judge-000``, ``judge-001``: no presentation order)."""
    from click.testing import CliRunner

    from judgecal_dist.cli import cli

    dest = tmp / "panel"
    argv = ["generate", "--items", "40", "--judges", "2", "--samples", "2", str(dest)]
    assert CliRunner().invoke(cli, argv).exit_code == 0
    return str(dest)


CASES: dict[str, Callable[[Path], list[str]]] = {
    "settings-n-bins": lambda t: run_with(t, "n_bins=0"),
    "settings-alpha0": lambda t: run_with(t, "alpha0=-1"),
    "settings-stacking-folds": lambda t: run_with(t, "stacking_folds=1"),
    "settings-ds-n-iter": lambda t: run_with(t, "ds_n_iter=0"),
    "settings-panels": lambda t: run_with(t, "panels=[all,top0]"),
    "settings-panels-scalar": lambda t: run_with(t, "panels=top3"),
    "settings-ci-level": lambda t: run_with(t, "ci_level=2"),
    "settings-replicates-cap": lambda t: run_with(t, "replicates=1e8"),
    "settings-resamples-cap": lambda t: run_with(t, "permutation_resamples=1000000"),
    "settings-unknown-choice": lambda t: run_with(t, "aggregators=[majority,median]"),
    "settings-cross-field": lambda t: run_with(
        t, config=_write(t, "budget.yaml", "study: budget\nmode: budget\nreplicates: 1\n")
    ),
    "settings-mapping-entry": lambda t: run_with(
        t, "prices.full=[-1,4]", config=str(ROOT / "judgecal_dist" / "studies" / "configs" / "ensemble.yaml")
    ),
    "settings-yaml-alias-bomb": lambda t: run_with(t, config=_write(t, "bomb.yaml", BOMB)),
    "settings-engine-range": lambda t: [*run_with(t), "--conf", _write(t, "e.yaml", "ray_num_cpus: 0\n")],
    "settings-synthetic-unread": lambda t: run_with(t, "data=synthetic:parity", "lam=0.5", config=REGIME_MAP),
    "settings-main-families": lambda t: run_with(
        t, "families=[ridge_iso,logistic]", "main_families=[mean_iso]", config=REGIME_MAP
    ),
    "settings-real-unread": lambda t: run_with(t, "growth_noise=0.1", config=REGIME_MAP),
    "settings-rubric-position-balance": lambda t: run_with(t, "verdict_schema=scalar", config=REGIME_MAP),
    "settings-rubric-label-score": lambda t: run_with(
        t,
        f"data={_rubric(t)}",
        "verdict_schema=scalar",
        "position_balance=false",
        "pool=[j]",
        "budgets=[2]",
        "replicates=2",
        config=REGIME_MAP,
    ),
    "settings-rubric-budgets": lambda t: run_with(t, "data=synthetic:scalar", config=REGIME_MAP),
    "settings-rubric-unread": lambda t: run_with(
        t, "data=synthetic:scalar", "budgets=[64]", "growth_a=0.5", config=REGIME_MAP
    ),
    "settings-verdict-schema-synthetic": lambda t: run_with(
        t, "data=synthetic:parity", "verdict_schema=scalar", config=REGIME_MAP
    ),
    "settings-semi-real-rubric": lambda t: run_with(
        t,
        "data=synthetic:additive",
        f"semi_real_source={_rubric_pool(t)}",
        "pool=[" + ",".join(f"j{j}" for j in range(7)) + "]",
        "position_balance=false",
        config=REGIME_MAP,
    ),
    "settings-regime-map-export": lambda t: run_with(t, "data=synthetic:parity", "export=jury", config=REGIME_MAP),
    "settings-cfps-large-pool": lambda t: run_with(
        t, "pool=[" + ",".join(f"j{i}" for i in range(13)) + "]", config=REGIME_MAP
    ),
    "settings-cold-start-sizes": lambda t: run_with(t, "cold_start_sizes=[64,16]", config=REGIME_MAP),
    "settings-alpha-grid-path": lambda t: run_with(t, "alpha_grid=[0,1]", "paths=[random]", config=REGIME_MAP),
    "settings-itc-pool-orders-synthetic": lambda t: run_with(t, "data=synthetic:g2", "pool_orders=true", config=ITC),
    "settings-itc-pool-orders-no-orders": lambda t: run_with(t, f"data={_panel(t)}", "pool_orders=true", config=ITC),
    "config-show-bad-setting": lambda t: ["config", "show", "inclusion", "--set", "eps=0.7"],
    "config-unknown-study": lambda t: ["config", "schema", "nope"],
}
