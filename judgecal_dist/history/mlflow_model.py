"""The MLflow ``pyfunc`` flavour of an exported panel model (``judgecal.binary-pipeline/v1``).

An MLflow model logged by ``judgecal run|fit --mlflow`` holds the model JSON document as an artifact
(``model_document``) and this loader by code, never a pickle: :data:`ENTRY` is the models-from-code file MLflow
copies into the model and runs at load time, which sets a :class:`JudgecalPyfunc`. ``load_context`` reads the JSON
with :func:`judgecal_dist.models.load_model`; ``predict`` scores a pandas frame of verdict rows with
:func:`score_frame`, the calls ``judgecal score`` makes in process (the vote codec, then the scoring kernel), so its
``p`` equals the ``p`` of ``judgecal score`` on the same rows.

The input frame is long, one row per item x judge: ``item_id, judge_id, verdict`` (plus optional ``dataset``,
``group_id``, ``sample``) or crowd-kit's ``task, worker, label``; verdicts ``A``/``B``/``tie``/null or 1/0, as
``judgecal ingest --format long`` reads them (:func:`~judgecal_dist.io.adapters.long.long_columns`). The output has
one row per item: the columns of ``judgecal score``'s ``items/`` (``dataset, item_id, group_id, label, n_votes,
score, p, verdict, in_calibration``, one ``set_alpha_<a>`` per conformal level). Params: ``sample`` (default 0),
``unknown_judges`` (``error``, the default, or ``ignore``).

This module imports MLflow (the ``tracking`` extra); nothing else in the package imports it at import time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from mlflow.pyfunc import PythonModel

from judgecal_dist.engine.votes.codec import ItemVotes, encode
from judgecal_dist.errors import InputError
from judgecal_dist.io.adapters.long import category, long_columns
from judgecal_dist.models import load_model
from judgecal_dist.scoring.checks import check_judges
from judgecal_dist.scoring.kernel import score_batch

__all__ = ["ARTIFACT", "ENTRY", "JudgecalPyfunc", "input_example", "score_frame", "signature"]

#: The artifact key of the model JSON document inside the MLflow model.
ARTIFACT = "model_document"
#: The models-from-code file: MLflow copies it into the logged model and runs it to get the python model.
ENTRY = Path(__file__).with_name("mlflow_entry.py")
_WHERE = "mlflow pyfunc input"


def signature() -> Any:
    """The flavour's signature: its two params with their defaults; the input is not pinned to columns (it may be
    either layout, with verdicts as text or 1/0), so MLflow leaves it to :func:`score_frame` to check."""
    from mlflow.models import ModelSignature
    from mlflow.types import ParamSchema, ParamSpec

    params = ParamSchema([ParamSpec("sample", "long", 0), ParamSpec("unknown_judges", "string", "error")])
    return ModelSignature(inputs=None, outputs=None, params=params)


def input_example(judge_ids: list[str]) -> pd.DataFrame:
    """An input frame MLflow stores with the model to show its callers the layout: two items, every judge of the
    model voting on each."""
    items = ["item-1", "item-2"]
    return pd.DataFrame(
        {
            "item_id": [item for item in items for _ in judge_ids],
            "judge_id": list(judge_ids) * len(items),
            "verdict": ["A" if j % 2 == 0 else "B" for _ in items for j in range(len(judge_ids))],
        }
    )


def _verdict_rows(frame: pd.DataFrame) -> pa.Table:
    """The codec's verdict rows of a long pandas frame (ours or crowd-kit's), keys as text, verdicts A/B/tie."""
    if not isinstance(frame, pd.DataFrame):
        raise InputError(f"{_WHERE}: expected a pandas DataFrame of verdict rows, got {type(frame).__name__}")
    names = long_columns([str(c) for c in frame.columns], "verdicts", source=_WHERE)
    frame = frame.rename(columns=names)
    missing = [c for c in ("item_id", "judge_id", "verdict") if c not in frame.columns]
    if missing:
        raise InputError(
            f"{_WHERE}: {', '.join(missing)}: missing column (need item_id, judge_id, verdict or crowd-kit's task, "
            f"worker, label; got {list(frame.columns)[:6]})"
        )
    item_id = frame["item_id"].astype(str)
    columns = {
        "dataset": frame["dataset"].astype(str) if "dataset" in frame else pd.Series("", index=frame.index),
        "item_id": item_id,
        "group_id": frame["group_id"].astype(str) if "group_id" in frame else item_id,
        "judge_id": frame["judge_id"].astype(str),
        "sample": frame["sample"].astype("int64") if "sample" in frame else pd.Series(0, index=frame.index),
        "verdict": frame["verdict"].map(category),
    }
    table = pa.table({name: pa.array(values.tolist()) for name, values in columns.items() if name != "verdict"})
    return table.append_column("verdict", pa.array(columns["verdict"].tolist(), pa.string()))


def score_frame(model: Any, frame: pd.DataFrame, *, sample: int = 0, unknown_judges: str = "error") -> pd.DataFrame:
    """Score the items of a long frame of verdict rows with a loaded panel model, as ``judgecal score`` does.

    Parameters
    ----------
    model : judgecal_dist.models.BinaryPipeline
        A loaded panel model (:func:`judgecal_dist.models.load_model`).
    frame : pandas.DataFrame
        Verdict rows (see the module docstring).
    sample : int, default 0
        The verdict sample scored.
    unknown_judges : {"error", "ignore"}, default "error"
        Verdicts of judges the model lacks: refused, or left out.

    Returns
    -------
    pandas.DataFrame
        One row per item, the columns of ``judgecal score``'s ``items/``; no verdict rows at ``sample``: no rows.

    Raises
    ------
    InputError
        Not a frame, missing columns, a layout mix, a verdict outside the alphabet, unknown judges (``"error"``),
        or a model kind that is no panel pipeline.
    """
    if getattr(model, "kind", None) != "binary-pipeline":
        raise InputError(
            f"{getattr(model, 'source', 'model')}: a {getattr(model, 'kind', type(model).__name__)} model; the "
            "pyfunc flavour scores panel pipelines (judgecal.binary-pipeline/v1)"
        )
    rows = encode(_verdict_rows(frame), model.judge_ids, sample=sample)  # the vote codec, as score runs it
    unknown = check_judges(rows.judges_seen, model.judge_ids, where=_WHERE, unknown="ignore")
    if unknown and unknown_judges != "ignore":
        raise InputError(
            f"{_WHERE}: judge_id: {len(unknown)} judge(s) not in the model (e.g. {unknown[:3]}); score only the "
            "model's judges with params={'unknown_judges': 'ignore'} (their verdicts are then left out)"
        )
    rows.reject_unknown(where=_WHERE)
    items = ItemVotes.from_rows(rows, None, len(model.judge_ids))
    keys = {k: items.keys[k].combine_chunks() for k in ("dataset", "item_id", "group_id")}
    scored = score_batch(model, keys, items.votes, items.labels).to_pandas()
    scored["dataset"] = scored["dataset"].replace("", None)
    return scored


class JudgecalPyfunc(PythonModel):
    """The pyfunc python model: the model JSON document read at load, verdict rows scored at predict."""

    def load_context(self, context: Any) -> None:
        """Read the model document logged as the ``model_document`` artifact."""
        self.model = load_model(str(context.artifacts[ARTIFACT]))

    def predict(self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        """One scored row per item of ``model_input`` (see :func:`score_frame`)."""
        params = params or {}
        return score_frame(
            self.model,
            model_input,
            sample=int(params.get("sample", 0)),
            unknown_judges=str(params.get("unknown_judges", "error")),
        )
