"""Run a study end to end: validate input, plan, resume, fan out on Ray, summarise, commit atomically.

Order of work (each step's failure leaves nothing misleading behind):

1. Parse the config and load the study's input; rejected input raises before anything is written.
2. Open ``<output>/<study>/<run_id>``; a run with ``_SUCCESS`` is returned as is (runs are idempotent).
3. Write ``manifest.json`` (status ``running``), skip the seeds already committed, fan the rest out on Ray and
   commit each replicate as it finishes.
4. Summarise all parts; write ``summary.*``, ``report.md``, ``figures/``, ``model/``, the final manifest, and
   ``_SUCCESS`` last.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from judgecal_dist import __version__
from judgecal_dist.config import EngineConfig, apply_overrides, config_digest, config_from_mapping, load_yaml
from judgecal_dist.engine import ray as ray_engine
from judgecal_dist.engine.manifest import build_manifest, fingerprint_inputs, utc_now
from judgecal_dist.engine.store import RunStore, is_remote
from judgecal_dist.errors import ConfigError
from judgecal_dist.studies import get_study

__all__ = ["StudyRun", "prepare", "execute"]

log = logging.getLogger(__name__)


@dataclasses.dataclass
class StudyRun:
    """A parsed study ready to run: module, validated config, the plain values it came from, and its run id."""

    module: Any
    config: Any
    values: dict[str, Any]
    run_id: str


def prepare(config_path: str | Path, overrides: Iterable[str] = (), *, run_id: str | None = None) -> StudyRun:
    """Read ``config_path``, apply ``--set`` overrides and validate them against the study's ``Config``."""
    values = apply_overrides(load_yaml(config_path), overrides)
    name = values.pop("study", None)
    if not name:
        raise ConfigError(f"{config_path}: study: missing (e.g. `study: inclusion`)")
    module = get_study(name)
    config = config_from_mapping(module.Config, values, source=str(config_path))
    plain = {"study": name} | dataclasses.asdict(config)
    # The package version is part of the default run id: an upgraded judgecal never returns an older run's results.
    default_id = f"cfg-{config_digest(plain | {'judgecal_version': __version__})}"
    return StudyRun(module=module, config=config, values=plain, run_id=run_id or default_id)


def execute(run: StudyRun, engine: EngineConfig, *, output: str | None = None, serial: bool = False) -> str:
    """Run ``run`` and return its results URL (the run folder)."""
    module, config = run.module, run.config
    started = utc_now()
    t0 = time.perf_counter()
    data = module.load(config, engine)  # validates input before anything is written
    out = (output or engine.output).rstrip("/")
    if not is_remote(out):
        out = str(Path(out).expanduser().resolve())
    store = RunStore(f"{out}/{module.NAME}/{run.run_id}", storage_options=dict(engine.storage_options))
    if store.succeeded:
        log.info("run %s already complete at %s", run.run_id, store.url)
        return store.url

    inputs = [fingerprint_inputs(url, dict(engine.storage_options)) for url in _input_urls(config)]
    engine_values = dataclasses.asdict(engine)

    def manifest(status: str, ended: str | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return build_manifest(
            study=module.NAME,
            run_id=run.run_id,
            config=run.values,
            engine=engine_values,
            inputs=inputs,
            started=started,
            ended=ended,
            status=status,
            extra=extra,
        )

    store.write_json("manifest.json", manifest("running"))
    replicates = module.plan(config, data)
    done = store.finished_seeds()
    todo = [r for r in replicates if r.seed not in done]
    log.info(
        "%s: %d replicates planned, %d already committed, %d to run",
        module.NAME,
        len(replicates),
        len(replicates) - len(todo),
        len(todo),
    )
    # A study whose replicates share data passes runs them itself, committing each batch as it finishes.
    shared = bool(todo) and hasattr(module, "run_shared") and module.run_shared(config, data, todo, store.commit_part)
    if todo and not shared:
        if serial:
            ray_engine.run_serial(module.run_replicate, data, todo, store.commit_part)
        else:
            ray_engine.init_ray(engine.ray_address, num_cpus=engine.ray_num_cpus)
            ray_engine.fan_out(module.run_replicate, data, todo, store.commit_part)

    parts = store.read_parts([r.seed for r in replicates])
    result = module.summarise(config, parts, data)
    store.write_table("summary.parquet", result.summary)
    store.write_json("summary.json", {"study": module.NAME, "results": result.records} | result.extra)
    store.write_text("report.md", result.report)
    for name, png in result.figures.items():
        store.write_bytes(f"figures/{name}", png)
    for name, doc in result.model.items():
        store.write_json(f"model/{name}", doc)
    store.write_json(
        "manifest.json",
        manifest(
            "succeeded",
            utc_now(),
            {
                "replicates": len(replicates),
                "resumed_replicates": len(replicates) - len(todo),
                "wall_seconds": round(time.perf_counter() - t0, 3),
            },
        ),
    )
    store.commit_success()
    return store.url


def _input_urls(config: Any) -> list[str]:
    data = getattr(config, "data", None)
    return [data] if isinstance(data, str) and not data.startswith("synthetic:") else []
