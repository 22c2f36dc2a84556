r"""The split-proportion check of the regime map (spec 002 §6.4, Table 15).

With ``split_variants`` set, every split is planned again with the selection and validation blocks reweighted
(``selection_heavy``: selection 1.5x, validation 0.5x of the configured rows; ``validation_heavy``: the reverse;
their sum and the test rows fixed) and the ``full`` menu (the table and the main scalar families, every path and
k) is selected on the variant's validation block at the largest budget. Rows carry ``path =
"split:<variant>"`` and are set aside by the summaries; the report sets their test MSE beside the default split's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from judgecal_dist.config import EngineConfig
from judgecal_dist.methods.fcps.paths import JudgePath
from judgecal_dist.methods.fcps.select import evaluate_candidates, select_candidate
from judgecal_dist.studies.regime_map.data import SplitCells, load_real
from judgecal_dist.studies.report_kit import markdown_table, mean_se

if TYPE_CHECKING:
    from judgecal_dist.studies.regime_map.config import Config

__all__ = ["SPLIT", "VARIANTS", "variant_sizes", "load_variants", "variant_rows", "variant_report"]

#: Path prefix of the split-variant rows.
SPLIT = "split:"
#: Variant -> (selection, validation) multipliers of the configured block rows.
VARIANTS = {"selection_heavy": (1.5, 0.5), "validation_heavy": (0.5, 1.5)}


def variant_sizes(config: Config, variant: str) -> tuple[int, int, int]:
    """(selection, validation, test) rows of a variant; the selection + validation total is kept."""
    sel_x, _ = VARIANTS[variant]
    total = config.selection_rows + config.validation_rows
    sel = int(round(sel_x * config.selection_rows))
    return sel, total - sel, config.test_rows


def load_variants(config: Config, engine: EngineConfig, seeds: list[int]) -> dict[str, dict[int, SplitCells]]:
    """The blocks of every split under each variant (one pattern job per variant, the largest budget only)."""
    out = {}
    for variant in config.split_variants:
        data = load_real(
            str(config.data),
            config.pool,
            seeds=seeds,
            budgets=(max(config.budgets),),
            sizes=variant_sizes(config, variant),
            balanced=config.position_balance,
            sample=config.sample,
            engine=engine,
        )
        out[variant] = data.splits
    return out


def variant_rows(
    variants: dict[str, dict[int, SplitCells]], config: Config, seed: int, options: dict[str, Any]
) -> pd.DataFrame:
    """The ``full`` menu's validation-selected candidate of each variant at the largest budget."""
    budget = max(config.budgets)
    main = tuple(f for f in config.main_families if f in config.families)
    rows = []
    for variant, splits in variants.items():
        split = splits[seed]
        paths = {
            rule: JudgePath(rule, lam=config.lam, budget=budget, random_state=seed)
            .fit(split.sel.codes, split.sel.s / split.sel.n, sample_weight=split.sel.n)
            .path_
            for rule in config.paths
        }
        frame = evaluate_candidates(
            paths, split.cal[budget], split.val, split.test, families=("table", *main), max_k=config.max_k, **options
        )
        row = select_candidate(frame, ("table", *main)).copy()
        row["path"] = f"{SPLIT}{variant}"
        row["seed"], row["budget"] = seed, budget
        row["val_rows"], row["test_rows"] = split.val.rows, split.test.rows
        rows.append(row)
    return pd.DataFrame(rows).reset_index(drop=True)


def variant_report(parts: pd.DataFrame, rows: pd.DataFrame) -> tuple[list[dict[str, Any]], list[str]]:
    """Test MSE ± SE of the ``full`` menu under the default split and each variant, at the largest budget."""
    budget = int(rows["budget"].max())
    records = []
    if "selected_full" in parts:
        default = parts[(parts["budget"] == budget) & parts["selected_full"]]["test_mse"].to_numpy(dtype=np.float64)
        records.append({"split": "default", "test_mse": float(default.mean()), "se": _se(default)})
    for variant in VARIANTS:
        v = rows[rows["path"] == f"{SPLIT}{variant}"]["test_mse"].to_numpy(dtype=np.float64)
        if v.size:
            records.append({"split": variant, "test_mse": float(v.mean()), "se": _se(v)})
    lines = [
        "",
        f"## Split proportions (full menu, B = {budget})",
        "",
        "selection_heavy: selection rows x 1.5 and validation rows x 0.5; validation_heavy: the reverse (their "
        "sum and the test rows fixed). Test MSE ± SE over splits.",
        "",
        *markdown_table(["split", "test MSE"], [[r["split"], mean_se(r["test_mse"], r["se"])] for r in records]),
        "",
        "Paper, LLMBar (its own seven judges): selection-heavy 0.196, default 0.187, validation-heavy 0.184.",
    ]
    return records, lines


def _se(v: np.ndarray) -> float:
    return float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan
