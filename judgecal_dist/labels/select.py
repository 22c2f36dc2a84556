"""``judgecal label select``: the next items to label, drawn by the calibrated panel's uncertainty.

The panel's ``p`` per item comes from the scoring path (:mod:`judgecal_dist.scoring.items`, the rows ``judgecal
score`` writes), in this process below the engine's memory budget and on Spark above it
(:func:`judgecal_dist.engine.jobs.stats.choose_engine` decides by size, as for score). The candidates are the
scored items without a label in ``--data`` and not in an earlier queue (``--previous``, and committed queues in
the folders beside ``--output``). Their inclusion probabilities and the Poisson draw are
:mod:`judgecal_dist.methods.labels.sampling`'s; both engines compute the probabilities from the same global sums
(per stratum: items and the sum of :math:`\\sqrt{p(1-p)}`; the largest weights) and draw each item by a keyed hash
of (round seed, dataset, item_id) (the round seed a hash of ``--seed`` and the round, so each round draws
afresh), so they select the same items.

Output (any fsspec URL)::

    <output>/queue.parquet, queue.csv   dataset, item_id, inclusion_prob, stratum, p, round, [strata columns]
    <output>/selection.json             model, data fingerprint, budget, floor, strata, costs, seed, round, design,
                                        counts (candidates, queue size and its expectation, labelled, earlier queues)
    <output>/_JUDGECAL_QUEUE            marker: this folder is label select's (the one ownership rule)
    <output>/_SUCCESS                   written last

An item's overall probability of having been drawn across rounds is ``1 - prod_r (1 - pi_r)``; ``inclusion_prob``
is this round's, given it was not drawn before.
"""

from __future__ import annotations

import functools
import io
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from judgecal_dist.config import EngineConfig
from judgecal_dist.engine.jobs.stats import choose_engine
from judgecal_dist.engine.results.store import SUCCESS, RunStore
from judgecal_dist.errors import ConfigError, InputError
from judgecal_dist.io.dataset import dataset_files, dataset_tables, open_table, read_dataset_table
from judgecal_dist.io.filesystem import fingerprint_inputs, require_bucket
from judgecal_dist.io.ownership import Ownership, refuse_output_inside
from judgecal_dist.methods.labels import sampling
from judgecal_dist.models.binary import BinaryPipeline
from judgecal_dist.scoring.artifact import load_calibration
from judgecal_dist.scoring.checks import MIN_JUDGE_COVERAGE
from judgecal_dist.scoring.items import TableChecks, score_items_local
from judgecal_dist.scoring.kernel import items_ddl, score_partition
from judgecal_dist.scoring.tables import spark_runner
from judgecal_dist.splits import SEED_MAX

__all__ = ["OUTPUT_FORMAT", "MARKER", "OWNER", "Settings", "select_items"]

log = logging.getLogger(__name__)

OUTPUT_FORMAT = "judgecal.label-queue/v1"
MARKER, MARKER_FORMAT = "_JUDGECAL_QUEUE", "judgecal.label-queue-output/v1"
OWN_NAMES = ("queue.parquet", "queue.csv", "selection.json", SUCCESS)
OWNER = Ownership(MARKER, MARKER_FORMAT, "label select", "--output", OWN_NAMES)
#: The stratum of every item when no ``--strata`` column is given.
ALL = "all"


@dataclass(frozen=True)
class Settings:
    """What ``label select`` draws: checked before anything is read (:meth:`check`)."""

    budget: float
    seed: int = 0
    floor: float = 0.2
    strata: tuple[str, ...] = ()
    allocation: str = "neyman"
    label_cost: float | None = None
    proxy_cost: float | None = None
    sample: int = 0

    def check(self) -> None:
        """Refuse a setting outside its range, naming the option and the fix.

        Raises
        ------
        ConfigError
        """
        if not self.budget > 0:
            raise ConfigError(f"--budget: {self.budget:g}: must be positive (the expected number of labels)")
        if not 0.0 < self.floor <= 1.0:
            raise ConfigError(f"--floor: {self.floor:g}: must be in (0, 1] (the budget's share drawn uniformly)")
        if not 0 <= self.seed <= SEED_MAX:
            raise ConfigError(f"--seed: {self.seed}: must be in [0, {SEED_MAX}]")
        if self.allocation not in sampling.ALLOCATIONS:
            raise ConfigError(f"--allocation: {self.allocation!r}: must be one of {list(sampling.ALLOCATIONS)}")
        if (self.label_cost is None) != (self.proxy_cost is None):
            raise ConfigError("--label-cost/--proxy-cost: give both costs (cost-optimal split of --budget) or neither")
        for option, cost in (("--label-cost", self.label_cost), ("--proxy-cost", self.proxy_cost)):
            if cost is not None and not cost > 0:
                raise ConfigError(f"{option}: {cost:g}: must be positive (a cost per label / per item scored)")
        if len(set(self.strata)) != len(self.strata):
            raise ConfigError(f"--strata: {list(self.strata)}: a column is named twice")

    @property
    def costs(self) -> bool:
        return self.label_cost is not None


@dataclass
class _Earlier:
    """Items already labelled or queued, and the last round."""

    urls: list[str] = field(default_factory=list)
    keys: set[tuple[str, str]] = field(default_factory=set)
    round: int = 0


def select_items(
    model_url: str,
    data_url: str,
    output_url: str,
    settings: Settings,
    *,
    previous: Sequence[str] = (),
    engine: EngineConfig | None = None,
) -> dict[str, Any]:
    """Draw the next items to label and commit the queue at ``output_url`` (layout in the module docstring).

    Parameters
    ----------
    model_url : str
        A ``judgecal fit`` run folder (or model ``.json``) of a binary panel.
    data_url : str
        The ingested dataset whose unlabelled items are candidates.
    output_url : str
        The queue folder: new, empty, or one an earlier ``label select`` of the same inputs wrote.
    settings : Settings
        Budget, seed, floor, strata, allocation, costs, verdict sample.
    previous : sequence of str
        Earlier queue folders whose items are not drawn again.
    engine : EngineConfig, optional
        Engine choice (auto by size), Spark settings, storage options.

    Returns
    -------
    dict
        ``selection.json``'s content (plus ``skipped: True`` when the same inputs were already complete).

    Raises
    ------
    ConfigError, InputError
        Settings out of range, a model that is not a binary panel, an unknown strata column, a budget larger than
        the candidates, an output inside an input or holding files of others; nothing is written then.
    """
    engine = engine or EngineConfig()
    options = dict(engine.storage_options)
    model = _open_inputs(model_url, data_url, output_url, settings, previous, options)
    earlier = _earlier_queues(output_url, previous, options)
    inputs = {
        "model": model.source,
        "model_sha256": model.digest,
        "data": data_url,
        "data_sha256": fingerprint_inputs(data_url, options)["sha256"],
        "previous": earlier.urls,
        "settings": asdict(settings) | {"strata": list(settings.strata)},
    }
    store = RunStore(output_url, storage_options=options)
    files = [f for f in store.list_files() if not f.startswith("_tmp/")]
    marker = OWNER.read(store.url, files, store.read_bytes)
    found = (marker or {}).get("inputs")
    if OWNER.reuse(output_url, found, inputs, committed=store.succeeded, overwrite=None):
        return dict(store.read_json("selection.json")) | {"skipped": True}
    started = time.perf_counter()
    chosen = choose_engine(data_url, None, engine)
    if chosen == "spark":
        queue, design, counts = _queue_spark(model, data_url, settings, earlier, engine)
    else:
        candidates, counts = _candidates(model, data_url, settings, earlier, engine)
        _check_size(counts["candidates"], settings, data_url)
        queue, design = _draw(candidates, settings, earlier)
    queue = _finish(queue, earlier.round + 1)
    record = {
        "format": OUTPUT_FORMAT,
        "inputs": inputs,
        "engine": chosen,
        "round": earlier.round + 1,
        "design": design,
        "counts": counts | {"queue": queue.num_rows},
        "seconds": round(time.perf_counter() - started, 3),
    }
    _commit(store, marker, queue, record, inputs)
    log.info(
        "label select: %d items queued (round %d) on %s -> %s", queue.num_rows, record["round"], chosen, output_url
    )
    return record


def _open_inputs(
    model_url: str, data_url: str, output_url: str, settings: Settings, previous: Sequence[str], options: dict[str, Any]
) -> BinaryPipeline:
    """Every check before anything is read in bulk (settings, output, model kind, data, strata); the model."""
    settings.check()
    require_bucket(output_url, options)
    for option, url in [("--data", data_url), *(("--previous", p) for p in previous)]:
        refuse_output_inside(output_url, "--output", {option: url})
    model = load_calibration(model_url, storage_options=options)
    if not isinstance(model, BinaryPipeline):
        kind = getattr(model, "kind", type(model).__name__)
        raise InputError(
            f"--model: {model_url}: a {kind} model is not a binary panel; label select needs the model of "
            f"`judgecal fit` on A/B verdicts (its p per item is the proxy)"
        )
    dataset_files(data_url, "verdicts", storage_options=options)
    _check_strata(data_url, settings.strata, options)
    return model


def _check_strata(data_url: str, strata: Sequence[str], options: dict[str, Any]) -> None:
    """Refuse a strata column that neither the verdicts' ``dataset`` nor the ``items`` table holds."""
    wanted = [c for c in strata if c != "dataset"]
    if not wanted:
        return
    present = open_table(data_url, "items", storage_options=options)[1] if _has_items(data_url, options) else []
    missing = [c for c in wanted if c not in present]
    if missing:
        known = ["dataset", *sorted(c for c in present if c not in ("dataset", "item_id"))]
        raise InputError(
            f"{data_url}: items: --strata: no column(s) {missing} (known: {known}); name a column of the items table"
        )


def _has_items(data_url: str, options: dict[str, Any]) -> bool:
    return "items" in dataset_tables(data_url, storage_options=options)


def _earlier_queues(output_url: str, previous: Sequence[str], options: dict[str, Any]) -> _Earlier:
    """The items of earlier committed queues: those named, and those in the folders beside ``output_url`` (not
    a later round that names this one)."""
    earlier = _Earlier()
    urls = list(dict.fromkeys([*previous, *_beside(output_url, options)]))
    for url in urls:
        store = RunStore(url, storage_options=options)
        if not (store.exists(MARKER) and store.succeeded):
            raise InputError(f"--previous: {url}: not a committed label select queue (no {MARKER} or {SUCCESS})")
        record = store.read_json("selection.json")
        if url not in previous and _names(record, output_url):
            continue  # a later round beside us that drew after this one
        table = _read_queue(store)
        earlier.urls.append(url)
        earlier.keys |= set(zip(table["dataset"].to_pylist(), table["item_id"].to_pylist(), strict=True))
        earlier.round = max(earlier.round, int(record.get("round", 1)))
    return earlier


def _names(record: dict[str, Any], url: str) -> bool:
    return url.rstrip("/") in [u.rstrip("/") for u in record.get("inputs", {}).get("previous", [])]


def _beside(output_url: str, options: dict[str, Any]) -> list[str]:
    """Committed queues in the sibling folders of ``output_url`` (its parent's other children)."""
    store = RunStore(output_url, storage_options=options)
    parent, _, name = store.path.rpartition("/")
    if not parent or not store.fs.exists(parent):
        return []
    prefix = output_url.rstrip("/")[: -len(name)] if output_url.rstrip("/").endswith(name) else None
    found = []
    for entry in sorted(store.fs.ls(parent, detail=False)):
        child = str(entry).rstrip("/").rpartition("/")[2]
        folder = f"{parent}/{child}"
        if child != name and prefix is not None and store.fs.exists(f"{folder}/{MARKER}"):
            found += [f"{prefix}{child}"] if store.fs.exists(f"{folder}/{SUCCESS}") else []
    return found


def _read_queue(store: RunStore) -> pa.Table:
    import pyarrow.parquet as pq

    with store.fs.open(f"{store.path}/queue.parquet", "rb") as handle:
        return pq.read_table(handle, columns=["dataset", "item_id"])


def _candidates(
    model: BinaryPipeline,
    data_url: str,
    settings: Settings,
    earlier: _Earlier,
    engine: EngineConfig,
) -> tuple[pa.Table, dict[str, Any]]:
    """The scored items that are neither labelled nor queued before (dataset, item_id, p, strata columns)."""
    options = dict(engine.storage_options)
    scored, _ = score_items_local(model, data_url, engine=engine, sample=settings.sample)
    items = scored.select(["dataset", "item_id", "p"])
    labels = read_dataset_table(data_url, "labels", ["dataset", "item_id", "label"], storage_options=options)
    labelled = labels.filter(pc.is_valid(labels["label"]))
    is_labelled = _member(items, labelled)
    queued = _member(items, _key_table(earlier.keys)) if earlier.keys else np.zeros(items.num_rows, dtype=bool)
    unscored = ~pc.is_valid(items["p"]).to_numpy(zero_copy_only=False)
    keep = ~(is_labelled | queued | unscored)
    counts = {
        "items": items.num_rows,
        "labelled": int(is_labelled.sum()),
        "in_earlier_queues": int((queued & ~is_labelled).sum()),
        "without_votes": int((unscored & ~is_labelled & ~queued).sum()),
        "candidates": int(keep.sum()),
    }
    candidates = items.filter(pa.array(keep))
    strata = [c for c in settings.strata if c != "dataset"]
    if strata:
        extra = read_dataset_table(data_url, "items", ["dataset", "item_id", *strata], storage_options=options)
        candidates = candidates.join(extra, ["dataset", "item_id"], join_type="left outer")
    return candidates, counts


def _queue_spark(
    model: BinaryPipeline, data_url: str, settings: Settings, earlier: _Earlier, engine: EngineConfig
) -> tuple[pa.Table, dict[str, Any], dict[str, Any]]:
    """The queue on Spark: the scoring path's items, global sums to the driver, the plan, then the draw."""
    job, scorer = spark_runner("labels_select"), spark_runner()
    checks = TableChecks(model, data_url, settings.sample, "error", MIN_JUDGE_COVERAGE)
    items, tally = scorer.item_votes(engine, data_url, model.judge_ids, sample=settings.sample)
    score = functools.partial(score_partition, model=model)
    earlier_keys = _key_table(earlier.keys)
    rows = job.candidates(
        engine, data_url, items, score, items_ddl(model), strata=settings.strata, earlier=earlier_keys, everything=ALL
    )
    try:
        sums = job.stratum_sums(rows)
        checks.tally(tally.value)  # the judge and sample checks, from what the scan tallied
        counts, names, n_h, s_h, p_sum = _spark_counts(sums)
        _check_size(counts["candidates"], settings, data_url)
        n = counts["candidates"]

        def plan(budget: float) -> sampling.Design:
            top = functools.partial(job.top_weights, rows, names)
            floor, allocation = settings.floor, settings.allocation
            return sampling.plan_design(names, n_h, s_h, top, budget, floor=floor, allocation=allocation)

        design: dict[str, Any] = {"sampling": sampling.DESIGN, "allocation": settings.allocation}
        if settings.costs:
            assert settings.label_cost is not None and settings.proxy_cost is not None
            chosen = sampling.cost_split(
                n,
                settings.budget,
                settings.label_cost,
                settings.proxy_cost,
                p_sum / n,
                lambda b: (job.design_sums(rows, d := plan(b))["variance"], d),
            )
            labels, use_proxy, v_proxy, v_plain, planned = chosen
            flat = sampling.StratumWeights(1.0 / n, np.zeros(len(names)), np.zeros(len(names)))
            planned = planned if use_proxy else sampling.Design(tuple(names), flat, labels)
            design |= {"cost_optimal": dict(zip(_COST_KEYS, (labels, use_proxy, v_proxy, v_plain), strict=True))}
        else:
            planned = plan(settings.budget)
        moments = job.design_sums(rows, planned)
        design |= _size(moments["pi_sum"], moments["pi_var"])
        stream = sampling.round_seed(settings.seed, earlier.round + 1)
        return job.draw(rows, planned, stream, settings.strata), design, counts
    finally:
        rows.unpersist()


_COST_KEYS = ("labels", "use_proxy", "variance_with_proxy", "variance_labels_only")


def _spark_counts(sums: pd.DataFrame) -> tuple[dict[str, Any], list[str], np.ndarray, np.ndarray, float]:
    """The counts of the record and the per-stratum sums of the candidates (strata sorted by name)."""
    labelled, queued, scored = (sums[c].astype(bool) for c in ("labelled", "queued", "scored"))
    open_ = sums[~labelled & ~queued & scored].groupby("stratum")[["n", "sigma_sum", "p_sum"]].sum().sort_index()
    counts = {
        "items": int(sums["n"].sum()),
        "labelled": int(sums.loc[labelled, "n"].sum()),
        "in_earlier_queues": int(sums.loc[queued & ~labelled, "n"].sum()),
        "without_votes": int(sums.loc[~scored & ~labelled & ~queued, "n"].sum()),
        "candidates": int(open_["n"].sum()),
    }
    names = [str(x) for x in open_.index]
    return counts, names, open_["n"].to_numpy(), open_["sigma_sum"].to_numpy(), float(open_["p_sum"].sum())


def _key_table(keys: set[tuple[str, str]]) -> pa.Table:
    pairs = sorted(keys)
    return pa.table({"dataset": [d for d, _ in pairs], "item_id": [i for _, i in pairs]})


def _member(items: pa.Table, keys: pa.Table) -> np.ndarray:
    """Whether each (dataset, item_id) of ``items`` is among ``keys`` (vectorised over joined key strings)."""

    def joined(table: pa.Table) -> pa.Array:
        columns = [pc.cast(table[c], pa.string()) for c in ("dataset", "item_id")]
        return pc.binary_join_element_wise(*columns, sampling.ITEM_KEY_SEPARATOR)

    found = pc.is_in(
        joined(items), value_set=joined(keys).combine_chunks() if keys.num_rows else pa.array([], pa.string())
    )
    return np.asarray(pc.fill_null(found, False).to_numpy(zero_copy_only=False), dtype=bool)


def _strata_labels(candidates: pa.Table, strata: Sequence[str]) -> np.ndarray:
    """One string per item: ``col=value`` joined by ``|`` over the strata columns (``all`` without strata)."""
    if not strata:
        return np.full(candidates.num_rows, ALL, dtype=object)
    parts = [
        np.array([f"{c}={'' if v is None else v}" for v in candidates[c].to_pylist()], dtype=object) for c in strata
    ]
    out = parts[0]
    for part in parts[1:]:
        out = out + "|" + part
    return out


def _check_size(n: int, settings: Settings, data_url: str) -> None:
    """Refuse a budget larger than the candidates (or no candidate at all)."""
    if n == 0:
        raise InputError(f"{data_url}: no unlabelled scored item left to select; every item is labelled or queued")
    if not settings.costs and settings.budget > n:
        raise InputError(
            f"{data_url}: --budget: {settings.budget:g} labels asked but only {n} items are unlabelled, scored and "
            f"in no earlier queue; lower --budget to at most {n}"
        )


def _draw(candidates: pa.Table, settings: Settings, earlier: _Earlier) -> tuple[pa.Table, dict[str, Any]]:
    """The inclusion probabilities and the Poisson draw in this process: the queue's rows and the design."""
    p = candidates["p"].to_numpy(zero_copy_only=False)
    stratum = _strata_labels(candidates, settings.strata)
    strata = None if not settings.strata else stratum
    design: dict[str, Any] = {"sampling": sampling.DESIGN, "allocation": settings.allocation}
    if settings.costs:
        chosen = sampling.cost_optimal_design(
            p,
            settings.budget,
            label_cost=settings.label_cost,
            proxy_cost=settings.proxy_cost,
            floor=settings.floor,
            strata=strata,
            allocation=settings.allocation,
        )
        pi = chosen.inclusion_prob
        design |= {"cost_optimal": {k: v for k, v in asdict(chosen).items() if k != "inclusion_prob"}}
    else:
        pi = sampling.inclusion_probabilities(
            p, settings.budget, floor=settings.floor, strata=strata, allocation=settings.allocation
        )
    datasets = candidates["dataset"].to_numpy(zero_copy_only=False)
    item_ids = candidates["item_id"].to_numpy(zero_copy_only=False)
    stream = sampling.round_seed(settings.seed, earlier.round + 1)
    mask = sampling.draw_mask(pi, stream, keys=sampling.item_keys(datasets, item_ids))
    design |= _size(float(pi.sum()), float(np.sum(pi * (1 - pi))))
    keep = pa.array(mask)
    columns = {
        "dataset": datasets[mask],
        "item_id": item_ids[mask],
        "inclusion_prob": pi[mask],
        "stratum": stratum[mask],
        "p": p[mask],
    }
    return pa.table(columns | {c: candidates[c].filter(keep) for c in settings.strata if c != "dataset"}), design


def _size(expected: float, variance: float) -> dict[str, float]:
    return {"expected_size": expected, "size_sd": float(np.sqrt(variance))}


def _finish(queue: pa.Table, round_: int) -> pa.Table:
    """The queue with its round column, sorted by item (the same file from either engine)."""
    rounds = pa.array(np.full(queue.num_rows, round_, dtype=np.int64))
    queue = queue.add_column(5, "round", rounds)
    return queue.sort_by([("dataset", "ascending"), ("item_id", "ascending")])


def _commit(
    store: RunStore, marker: dict[str, Any] | None, queue: pa.Table, record: dict[str, Any], inputs: dict[str, Any]
) -> None:
    """Write the queue and its record, the marker naming them, then ``_SUCCESS`` (last)."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    files = sorted(OWN_NAMES[:3])
    # claimed first (inputs unknown): a crash from here leaves a folder of ours that a rerun rewrites
    store.write_json(MARKER, OWNER.document(files if marker else [], inputs=None))
    parquet, csv = io.BytesIO(), io.BytesIO()
    pq.write_table(queue, parquet)
    pcsv.write_csv(queue, csv)
    store.write_bytes("queue.parquet", parquet.getvalue())
    store.write_bytes("queue.csv", csv.getvalue())
    store.write_json("selection.json", record)
    store.write_json(MARKER, OWNER.document(files, inputs=inputs))
    store.commit_success()
