r"""Seeded synthetic judge panels, written chunk by chunk as an ingested dataset (same layout as ``ingest``).

Model (per judge :math:`j`, item :math:`i`, sample :math:`s`). Every judge has a target accuracy :math:`a_j`
(a share ``below_chance`` of judges below 0.5), a family :math:`f(j)`, an unsure rate :math:`u` and a position
bias :math:`b` (the probability of answering ``A`` when unsure). A latent

.. math::

    z_{jis} = \sqrt{\rho}\, Z_{f(j) i} + \sqrt{1-\rho}\,\bigl(\sqrt{\kappa}\, Z_{ji} + \sqrt{1-\kappa}\, Z_{jis}\bigr),
    \qquad Z \sim \mathcal N(0, 1) \text{ i.i.d.},

is standard normal, so with :math:`c_j = a_j - u/2` the judge is *sure and right* when
:math:`z < \Phi^{-1}(c_j)`, *unsure* when :math:`\Phi^{-1}(c_j) \le z < \Phi^{-1}(c_j + u)` (then it answers
``A`` with probability :math:`b`), and *sure and wrong* otherwise. With balanced labels,
:math:`P(\text{verdict} = \text{label}) = c_j + u/2 = a_j` exactly, whatever :math:`\rho` (``family_corr``: a
per-family per-item shared error draw, so errors are correlated within a family) and :math:`\kappa`
(``sample_corr``: how much repeated samples of one judge on one item agree). Finally a verdict becomes ``tie``
with probability ``tie_rate`` and null (missing) with probability ``missing_rate``, independently, so
:math:`a_j` is also the accuracy among non-missing, non-tie verdicts; the report stores it per judge.

Labels are ``A``/``B`` with probability 1/2 (null for a ``1 - label_fraction`` share of items). With
``pairs=True`` items come as swapped copies ``<g>/ab`` and ``<g>/ba`` sharing ``group_id`` ``<g>``, with opposite
labels. With ``scores=True`` each verdict carries a confidence score in (0, 1): :math:`\mathrm{expit}(\pm m)`,
:math:`m = 0.5 + |N(0, 1)|`, positive for ``A``, negative for ``B``, 0.5 for ``tie``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from scipy.special import expit, ndtri

from judgecal_dist.errors import ConfigError
from judgecal_dist.io.dataset import committed_inputs, read_report
from judgecal_dist.io.ownership import Ownership
from judgecal_dist.io.records import to_json
from judgecal_dist.io.schema import VERDICT_CODES
from judgecal_dist.io.writer import REPORT, ROWS_PER_PART, DatasetWriter
from judgecal_dist.progress import Progress
from judgecal_dist.splits import SEED_MAX

__all__ = ["generate_panel", "JUDGE_PARAMS"]

#: Dictionary of the verdict codes (index = code of :data:`~judgecal_dist.io.schema.VERDICT_CODES`).
log = logging.getLogger(__name__)

#: A generated panel is generate's by its report, which records the settings it was drawn with.
OWNER = Ownership(REPORT, "", "generate", "DEST", ())

_ALPHABET = pa.array(sorted(VERDICT_CODES, key=VERDICT_CODES.__getitem__))
_A, _B, _TIE = VERDICT_CODES["A"], VERDICT_CODES["B"], VERDICT_CODES["tie"]
_BELOW_CHANCE_RANGE = (0.30, 0.48)


def _strings(values: Sequence[str], codes: npt.NDArray[np.integer[Any]]) -> pa.Array:
    """``values[codes]`` as a plain string array, built in C++ (no Python string per row)."""
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), pa.array(values)).cast(pa.string())


def _judges(
    rng: np.random.Generator,
    n_judges: int,
    families: int | Sequence[str],
    accuracy_range: tuple[float, float],
    below_chance: float,
    unsure_rate: float,
) -> dict[str, Any]:
    names = [f"family-{f}" for f in range(families)] if isinstance(families, int) else list(families)
    if not names:
        raise ConfigError("families: at least one family is needed")
    accuracy = rng.uniform(*accuracy_range, size=n_judges)
    below = rng.permutation(n_judges)[: round(below_chance * n_judges)]
    accuracy[below] = rng.uniform(*_BELOW_CHANCE_RANGE, size=len(below))
    sure = accuracy - unsure_rate / 2
    if (sure < 0).any() or (sure + unsure_rate > 1).any():
        raise ConfigError(
            f"unsure_rate: {unsure_rate} does not fit accuracies in [{accuracy.min():.3f}, {accuracy.max():.3f}]: "
            "need unsure_rate / 2 <= accuracy <= 1 - unsure_rate / 2"
        )
    return {
        "judge_id": [f"judge-{j:03d}" for j in range(n_judges)],
        "family_names": names,
        "family": np.arange(n_judges) % len(names),
        "accuracy": accuracy,
        "t_right": ndtri(sure),
        "t_unsure": ndtri(sure + unsure_rate),
    }


#: Per-judge settings ``judge_params`` may override (the drift generator changes judges night by night).
JUDGE_PARAMS = ("accuracy", "position_bias", "missing_rate", "judge_id")


def _override(judges: dict[str, Any], judge_params: Mapping[str, Mapping[str, Any]], rates: dict[str, float]) -> None:
    """Apply ``judge_params`` (judge id -> settings of :data:`JUDGE_PARAMS`) to the drawn judges, in place."""
    n = len(judges["judge_id"])
    judges["position_bias"] = np.full(n, rates["position_bias"])
    judges["missing_rate"] = np.full(n, rates["missing_rate"])
    index = {judge: j for j, judge in enumerate(judges["judge_id"])}
    for judge, params in judge_params.items():
        unknown = sorted(set(params) - set(JUDGE_PARAMS))
        if judge not in index or unknown:
            raise ConfigError(f"judge_params: {judge}: unknown judge or settings {unknown}; settings: {JUDGE_PARAMS}")
        j = index[judge]
        for name in ("accuracy", "position_bias", "missing_rate"):
            if name in params:
                value = float(params[name])
                if not 0.0 <= value <= 1.0:
                    raise ConfigError(f"judge_params: {judge}: {name}: must be in [0, 1], got {value}")
                judges[name][j] = value
        if "judge_id" in params:
            judges["judge_id"][j] = str(params["judge_id"])
    sure = judges["accuracy"] - rates["unsure_rate"] / 2
    if (sure < 0).any() or (sure + rates["unsure_rate"] > 1).any():
        raise ConfigError("judge_params: accuracy: need unsure_rate / 2 <= accuracy <= 1 - unsure_rate / 2")
    judges["t_right"], judges["t_unsure"] = ndtri(sure), ndtri(sure + rates["unsure_rate"])


def _check(n_items: int, n_judges: int, n_samples: int, pairs: bool, rates: dict[str, float], seed: int) -> None:
    if not 0 <= seed <= SEED_MAX:  # the studies' seed range (int64-safe), checked before anything is written
        raise ConfigError(f"seed: must be an integer in [0, {SEED_MAX}], got {seed}")
    if n_items < 1 or n_judges < 1 or n_samples < 1:
        raise ConfigError(f"n_items, n_judges, n_samples: must be positive, got {n_items}, {n_judges}, {n_samples}")
    if pairs and n_items % 2:
        raise ConfigError(f"n_items: must be even with pairs=True, got {n_items}")
    for name, value in rates.items():
        if not 0.0 <= value <= 1.0:
            raise ConfigError(f"{name}: must be in [0, 1], got {value}")


class _Panel:
    """Draws one chunk of items at a time; every random number comes from one seeded generator, in order."""

    def __init__(self, rng: np.random.Generator, judges: dict[str, Any], **params: Any) -> None:
        self.rng, self.judges, self.p = rng, judges, params

    def labels(self, n: int) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.bool_]]:
        """Label codes and labelled mask of ``n`` items (swapped copies get opposite labels)."""
        n_groups = n // 2 if self.p["pairs"] else n
        first = np.where(self.rng.random(n_groups) < 0.5, _A, _B).astype(np.int8)
        labelled = self.rng.random(n_groups) < self.p["label_fraction"]
        if self.p["pairs"]:
            first = np.stack([first, np.where(first == _A, _B, _A)], axis=1).ravel().astype(np.int8)
            labelled = np.repeat(labelled, 2)
        return first, labelled

    def verdicts(self, truth: npt.NDArray[np.int8]) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float64] | None]:
        """Verdict codes (missing = -1) of shape (items, judges, samples), and scores when asked for."""
        rng, j, p = self.rng, self.judges, self.p
        n, n_judges, n_samples = len(truth), len(j["accuracy"]), p["n_samples"]
        rho, kappa = p["family_corr"], p["sample_corr"]
        shared = rng.standard_normal((n, len(j["family_names"])))[:, j["family"]]
        own = rng.standard_normal((n, n_judges))
        z = np.sqrt(rho) * shared[:, :, None]
        if n_samples == 1:
            z = z + np.sqrt(1 - rho) * own[:, :, None]
        else:
            noise = rng.standard_normal((n, n_judges, n_samples))
            z = z + np.sqrt(1 - rho) * (np.sqrt(kappa) * own[:, :, None] + np.sqrt(1 - kappa) * noise)
        right = z < j["t_right"][None, :, None]
        unsure = ~right & (z < j["t_unsure"][None, :, None])
        label = truth[:, None, None]
        wrong_code = np.where(label == _A, _B, _A)
        guess = np.where(rng.random(z.shape) < j["position_bias"][None, :, None], _A, _B)
        codes = np.where(right, label, np.where(unsure, guess, wrong_code)).astype(np.int8)
        if p["tie_rate"] > 0:
            codes[rng.random(z.shape) < p["tie_rate"]] = _TIE
        if (j["missing_rate"] > 0).any():
            codes[rng.random(z.shape) < j["missing_rate"][None, :, None]] = -1
        scores = None
        if p["scores"]:
            sign = np.select([codes == _A, codes == _B], [1.0, -1.0], 0.0)
            scores = expit(sign * (0.5 + np.abs(rng.standard_normal(z.shape))))
            scores[codes < 0] = np.nan
        return codes, scores


def _item_ids(start: int, n: int, pairs: bool) -> tuple[list[str], list[str]]:
    if not pairs:
        ids = [f"item-{i:09d}" for i in range(start, start + n)]
        return ids, ids
    groups = [f"pair-{g:09d}" for g in range(start // 2, (start + n) // 2)]
    return [f"{g}/{order}" for g in groups for order in ("ab", "ba")], [g for g in groups for _ in range(2)]


def _verdict_chunk(
    dataset: str, item_ids: list[str], group_ids: list[str], judge_ids: list[str], codes: np.ndarray, scores: Any
) -> pa.Table:
    n, n_judges, n_samples = codes.shape
    rows = codes.size
    flat = codes.ravel()
    item_code = np.repeat(np.arange(n), n_judges * n_samples)
    verdict = pa.DictionaryArray.from_arrays(pa.array(flat.astype(np.int32), mask=flat < 0), _ALPHABET)
    score = pa.nulls(rows, pa.float64()) if scores is None else pa.array(scores.ravel(), from_pandas=True)
    return pa.table(
        {
            "dataset": pa.repeat(dataset, rows),
            "item_id": _strings(item_ids, item_code),
            "group_id": _strings(group_ids, item_code),
            "judge_id": _strings(judge_ids, np.tile(np.repeat(np.arange(n_judges), n_samples), n)),
            "sample": pa.array(np.tile(np.arange(n_samples, dtype=np.int32), n * n_judges)),
            "verdict": verdict.cast(pa.string()),
            "score": score,
            "rubric": pa.nulls(rows, pa.string()),
            "input_tokens": pa.nulls(rows, pa.int64()),
            "output_tokens": pa.nulls(rows, pa.int64()),
        }
    )


def generate_panel(
    dest: str,
    *,
    n_items: int,
    n_judges: int,
    seed: int = 0,
    n_samples: int = 1,
    label_fraction: float = 1.0,
    families: int | Sequence[str] = 4,
    family_corr: float = 0.4,
    sample_corr: float = 0.6,
    accuracy_range: tuple[float, float] = (0.55, 0.9),
    below_chance: float = 0.1,
    unsure_rate: float = 0.1,
    position_bias: float = 0.65,
    missing_rate: float = 0.02,
    tie_rate: float = 0.0,
    scores: bool = False,
    pairs: bool = False,
    dataset: str = "synthetic",
    chunk_items: int | None = None,
    validate: bool = True,
    overwrite: bool = False,
    storage_options: dict[str, Any] | None = None,
    judge_params: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Generate a seeded synthetic panel (model in the module docstring) and write it as a dataset at ``dest``.

    Parameters
    ----------
    dest : str
        Dataset root URL.
    n_items, n_judges : int
        Panel size; ``n_items * n_judges * n_samples`` verdict rows.
    seed : int, default 0
        Seed of ``numpy.random.default_rng``; the same seed and arguments give identical files.
    n_samples : int, default 1
        Repeated samples per (item, judge).
    label_fraction : float, default 1.0
        Share of items with a label (the others have a null label).
    families : int or sequence of str, default 4
        Number (or names) of judge families; judge ``j`` is in family ``j mod len(families)``.
    family_corr, sample_corr : float
        :math:`\\rho` and :math:`\\kappa` of the model.
    accuracy_range : (float, float), default (0.55, 0.9)
        Range of the uniform accuracies of the judges that are not below chance.
    below_chance : float, default 0.1
        Share of judges with accuracy drawn in [0.30, 0.48].
    unsure_rate, position_bias : float
        :math:`u` and :math:`b` of the model.
    missing_rate, tie_rate : float
        Probability that a verdict is null, or ``tie``.
    scores : bool, default False
        Write a confidence score per verdict.
    pairs : bool, default False
        Items as swapped copies ``<g>/ab``, ``<g>/ba`` sharing ``group_id`` ``<g>`` (``n_items`` even).
    dataset : str, default "synthetic"
        Dataset name.
    chunk_items : int, optional
        Items per chunk (one Parquet part each); default keeps a chunk near ``ROWS_PER_PART`` rows. The files
        depend on it (draws happen chunk by chunk).
    validate : bool, default True
        Check each chunk against the verdicts contract before writing it.
    overwrite : bool, default False
        Replace a committed dataset at ``dest``. Without it, a panel generated with the same settings is returned
        as it is ("already complete") and any other committed dataset is refused.
    storage_options : dict, optional
        fsspec options for ``dest``.
    judge_params : mapping, optional
        Per judge id (as drawn, ``judge-000``...): ``accuracy``, ``position_bias``, ``missing_rate`` overriding the
        drawn or panel-wide value, and ``judge_id`` renaming the judge. The random draws are the same with or
        without it (unless it turns null verdicts on in a panel with ``missing_rate=0``), so a judge changed here
        leaves every other judge's verdicts as they were.

    Returns
    -------
    dict
        The report written to ``_ingest.json``: ``generator`` (all arguments), ``judges`` (per judge:
        ``judge_id``, ``family``, ``accuracy``), ``rows_written``, ``parts``.

    Raises
    ------
    ConfigError
        A size or rate out of range, ``n_items`` odd with ``pairs``, or accuracies incompatible with ``unsure_rate``.

    Notes
    -----
    Memory holds one chunk (about ``ROWS_PER_PART`` rows, a few tens of MB) plus one label and id per item.
    """
    rates = dict(
        label_fraction=label_fraction,
        family_corr=family_corr,
        sample_corr=sample_corr,
        below_chance=below_chance,
        unsure_rate=unsure_rate,
        position_bias=position_bias,
        missing_rate=missing_rate,
        tie_rate=tie_rate,
    )
    _check(n_items, n_judges, n_samples, pairs, rates, seed)
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    judges = _judges(rng, n_judges, families, accuracy_range, below_chance, unsure_rate)
    _override(judges, judge_params or {}, rates)
    panel = _Panel(rng, judges, n_samples=n_samples, pairs=pairs, scores=scores, **rates)
    step = chunk_items or max(1, ROWS_PER_PART // (n_judges * n_samples))
    step = step + (step % 2) if pairs else step
    generator: dict[str, Any] = {"n_items": n_items, "n_judges": n_judges, "seed": seed, "n_samples": n_samples}
    generator |= {"families": judges["family_names"], "accuracy_range": list(accuracy_range), "scores": scores}
    generator |= {"pairs": pairs, "chunk_items": step, **rates}
    inputs = json.loads(to_json({"generator": generator, "dataset": dataset, "judge_params": judge_params or {}}))
    if _already_generated(dest, inputs, overwrite, storage_options):
        return read_report(dest, storage_options=storage_options)
    with DatasetWriter(
        dest, overwrite=overwrite, storage_options=storage_options, validate=validate, score_range=(0.0, 1.0)
    ) as writer:
        label_parts = _write_verdicts(writer, panel, judges, dataset, n_items, step, pairs, f"generate {dest}: items")
        writer.write_table("labels", _labels_table(dataset, label_parts))
        family = [judges["family_names"][f] for f in judges["family"]]
        writer.write_table("judges", pa.table({"judge_id": judges["judge_id"], "family": family}))
        report = writer.commit(_report(dataset, generator, judges, family) | {"generated_from": inputs})
    log.info("generated %s in %.1f s (%s)", dest, time.perf_counter() - started, report["rows_written"])
    return report


def _already_generated(
    dest: str, inputs: dict[str, Any], overwrite: bool, storage_options: dict[str, Any] | None
) -> bool:
    """Whether ``dest`` holds a committed panel of the same settings (io.ownership's rule: then it is returned as it
    is; a committed panel of other settings is refused unless ``overwrite``)."""
    found, committed = committed_inputs(dest, "generated_from", storage_options)
    return OWNER.reuse(dest, found, inputs, committed=committed, overwrite=overwrite)


def _write_verdicts(
    writer: DatasetWriter,
    panel: _Panel,
    judges: dict[str, Any],
    dataset: str,
    n_items: int,
    step: int,
    pairs: bool,
    label: str,
) -> list[tuple[pa.Array, np.ndarray, np.ndarray]]:
    """Draw and write the verdicts chunk by chunk; returns each chunk's item ids, true labels and labelled mask."""
    label_parts: list[tuple[pa.Array, np.ndarray, np.ndarray]] = []
    progress = Progress(n_items, label=label)
    for start in range(0, n_items, step):
        n = min(step, n_items - start)
        item_ids, group_ids = _item_ids(start, n, pairs)
        truth, labelled = panel.labels(n)
        codes, chunk_scores = panel.verdicts(truth)
        writer.write_verdicts(_verdict_chunk(dataset, item_ids, group_ids, judges["judge_id"], codes, chunk_scores))
        label_parts.append((pa.array(item_ids, pa.string()), truth, labelled))
        progress.advance(n)
    return label_parts


def _labels_table(dataset: str, parts: list[tuple[pa.Array, np.ndarray, np.ndarray]]) -> pa.Table:
    """The ``labels`` table of the generated chunks (item ids, true labels, whether each is labelled)."""
    ids = pa.concat_arrays([part[0] for part in parts])
    truth = np.concatenate([part[1] for part in parts])
    labelled = np.concatenate([part[2] for part in parts])
    label = pa.DictionaryArray.from_arrays(pa.array(truth.astype(np.int32), mask=~labelled), _ALPHABET)
    return pa.table({"dataset": pa.repeat(dataset, len(ids)), "item_id": ids, "label": label.cast(pa.string())})


def _report(dataset: str, generator: dict[str, Any], judges: dict[str, Any], family: list[str]) -> dict[str, Any]:
    """The ingest report of a generated dataset: the generator's settings and each judge's family and accuracy."""
    return {
        "format": "synthetic",
        "datasets": [dataset],
        "generator": generator,
        "judges": [
            {"judge_id": j, "family": f, "accuracy": float(a)}
            for j, f, a in zip(judges["judge_id"], family, judges["accuracy"], strict=True)
        ],
    }
