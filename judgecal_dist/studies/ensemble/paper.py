"""The ensemble study's paper-and-here rows: the paper's accuracies and costs beside this run's."""

from __future__ import annotations

import pandas as pd

from judgecal_dist.studies.report_kit import (
    Claim,
    Here,
    PaperClaims,
    interval,
)

__all__ = ["PAPER", "paper_here"]


_SAME_FILES = "procedure: the same files; a different join of the tiers or of refused examples changes n"
#: The ensemble study's headline claims of its paper: accuracy of the reference conditions on the shared files.
PAPER = PaperClaims(
    "An Empirical Investigation of Practical LLM-as-a-Judge Improvement Techniques on RewardBench 2",
    (
        Claim("Full model, one sample, base prompt (the baseline)", "71.7% ± 2.1", "full/base/1", _SAME_FILES),
        Claim("Full model, mean of 8 samples", "81.5% ± 1.8", "full/base/8", _SAME_FILES),
        Claim(
            "Full model, 8 samples with the task criteria in the prompt (the paper's best)",
            "83.6% ± 1.7",
            "full/criteria/8",
            _SAME_FILES,
        ),
        Claim("Mini model, mean of 8 samples", "79.2% ± 2.0", "mini/base/8", _SAME_FILES),
        Claim("Nano model, mean of 8 samples", "71.4% ± 2.1", "nano/base/8", _SAME_FILES),
        Claim(
            "Calibration-context prompts (a scored reference example in the prompt) and their combination with "
            "criteria",
            "72.4-73.8% at one sample, 82.6% combined at 8",
            None,
            "the scores under those prompts are not in the shared files",
        ),
    ),
)
_PAPER_ACCURACY = {"full/base/1": 0.717, "full/base/8": 0.815, "full/criteria/8": 0.836, "mini/base/8": 0.792}
_PAPER_ACCURACY["nano/base/8"] = 0.714


def paper_here(overall: pd.DataFrame) -> dict[str, Here]:
    """Each reference condition's accuracy with its interval; agrees when it rounds to the paper's 0.1 points."""
    out = {}
    for key, paper in _PAPER_ACCURACY.items():
        tier, variant, k = key.split("/")
        rows = overall[(overall["tier"] == tier) & (overall["prompt_variant"] == variant) & (overall["k"] == int(k))]
        if len(rows):
            r = rows.iloc[0]
            out[key] = Here(
                f"{interval(r['accuracy'], r['accuracy_ci_low'], r['accuracy_ci_high'], '.3f')} (n {r['n']}, {r['join']})",
                agrees=bool(abs(r["accuracy"] - paper) <= 0.0005 + 1e-9),
            )
    return out
