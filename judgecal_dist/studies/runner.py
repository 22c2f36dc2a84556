"""Run a study end to end: validate input, identify the run, resume, fan out on Ray, summarise, commit atomically.

Order of work (each step's failure leaves nothing misleading behind):

1. Parse the config and check the run id's syntax (:func:`prepare`); a rejected config or run id raises before
   anything is read or written.
2. Check the output's bucket exists (never created), load the study's input (rejected input raises before anything
   is written), run the study's data-dependent checks (its ``preflight`` hook: degenerate panels, labelled items per
   planned split; :mod:`judgecal_dist.studies.preflight`) and fingerprint it. The run's identity is its config digest plus its input digest
   (:func:`identify`); the default run id is made of both, so a changed config or changed data is a new run.
3. Open ``<output>/<study>/<run_id>``. A folder whose manifest records another identity is refused (never returned
   or mixed), and so is one without a manifest holding files the run did not write; a run with ``_SUCCESS`` is
   returned as is (runs are idempotent). An ``--output`` inside the input data is refused before the data is read
   (the rule of :mod:`judgecal_dist.io.ownership`).
4. Write ``manifest.json`` (status ``running``), keep the committed parts that pass verification (their seed and
   the run's identity are in their Parquet metadata; others are set aside), fan the rest out on Ray and commit each
   replicate as it finishes.
5. Summarise all parts; write ``summary.*``, ``report.md``, ``figures/``, ``model/``, the final manifest, and
   ``_SUCCESS`` last. A failure after the manifest rewrites it with ``status: failed`` and the error; a rerun of
   the same run id resumes.
6. Append the run (succeeded or failed) to ``<output>/history`` (:mod:`judgecal_dist.history`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judgecal_dist import __version__
from judgecal_dist.config import EngineConfig, apply_overrides, config_digest, config_from_mapping, load_yaml
from judgecal_dist.engine.results.manifest import build_manifest, input_digest, redact_text, utc_now
from judgecal_dist.engine.results.store import LEASE, RunConflict, RunStore, is_remote
from judgecal_dist.errors import ConfigError
from judgecal_dist.extras import has_extra, require_extra
from judgecal_dist.history.recorder import record_study_run, repair_study_run
from judgecal_dist.io.filesystem import fingerprint_inputs, require_bucket
from judgecal_dist.io.ownership import Ownership, refuse_output_inside
from judgecal_dist.studies import STUDIES, get_study

__all__ = [
    "StudyRun",
    "RunIdentity",
    "prepare",
    "identify",
    "execute",
    "preflight",
    "check_run_id",
    "resolve_run_id",
    "study_settings",
    "study_schema",
    "packaged_configs",
]

log = logging.getLogger(__name__)

#: The packaged study configs, installed with the package (``judgecal run inclusion`` reads ``inclusion.yaml`` there).
STUDY_CONFIGS = Path(__file__).resolve().parent / "configs"
#: A run id after its placeholders are filled: one path segment, never ``..``, never a hidden or ``_`` name.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
RUN_ID_MAX = 128
#: Placeholders a run id may carry, filled from the run's clock in UTC (``nightly-{date}`` -> ``nightly-2026-11-25``).
RUN_ID_FIELDS = {"date": "%Y-%m-%d", "time": "%H%M%S"}
_FIELD = re.compile(r"\{([^{}]*)\}")


@dataclasses.dataclass(frozen=True)
class RunIdentity:
    """What a run is: its config digest and its input digest (with the fingerprints), and the resolved run id."""

    run_id: str
    config_digest: str
    input_digest: str
    inputs: tuple[dict[str, Any], ...]

    def digests(self) -> dict[str, str]:
        """``{"config_digest": ..., "input_digest": ...}``: recorded in the manifest and in every part."""
        return {"config_digest": self.config_digest, "input_digest": self.input_digest}


@dataclasses.dataclass
class StudyRun:
    """A parsed study ready to run: module, validated config, the plain values it came from, and its run id.

    ``run_id`` is the requested id (it may hold ``{date}``/``{time}``) or None for the default, until
    :func:`identify` resolves it and sets ``identity``.
    """

    module: Any
    config: Any
    values: dict[str, Any]
    run_id: str | None
    identity: RunIdentity | None = None


def check_run_id(run_id: str) -> str:
    """Return ``run_id`` if it is a valid run id or template; raise :class:`ConfigError` naming the rule otherwise.

    Valid: ``[A-Za-z0-9][A-Za-z0-9._-]*`` after filling ``{date}``/``{time}``, no ``..``, at most 128 characters.
    """
    unknown = [name for name in _FIELD.findall(run_id) if name not in RUN_ID_FIELDS]
    sample = resolve_run_id(run_id, datetime(2000, 1, 1, tzinfo=UTC)) if not unknown else run_id
    if unknown or not RUN_ID.fullmatch(sample) or ".." in sample or len(sample) > RUN_ID_MAX:
        raise ConfigError(
            f"--run-id {run_id!r}: not a valid run id (letters, digits, '.', '_', '-', starting with a letter or "
            f"digit, no '..' or '/', at most {RUN_ID_MAX} characters; placeholders {{date}} and {{time}} only), "
            "e.g. nightly-{date}"
        )
    return run_id


def resolve_run_id(run_id: str, now: datetime) -> str:
    """Fill ``{date}`` (``%Y-%m-%d``) and ``{time}`` (``%H%M%S``) from ``now`` in UTC."""
    utc = now.astimezone(UTC)
    return _FIELD.sub(lambda m: utc.strftime(RUN_ID_FIELDS[m.group(1)]), run_id)


def prepare(config_path: str | Path, overrides: Iterable[str] = (), *, run_id: str | None = None) -> StudyRun:
    """Read ``config_path`` (a config file, or a study name for its packaged config), apply ``--set`` overrides and
    validate them against the study's ``Config``."""
    if run_id is not None:
        check_run_id(run_id)
    values, source = _study_values(str(config_path))
    module, config = _validated(apply_overrides(values, overrides), source)
    plain = {"study": module.NAME} | config.values()
    return StudyRun(module=module, config=config, values=plain, run_id=run_id)


def _validated(values: dict[str, Any], source: str, *, partial: bool = False) -> tuple[Any, Any]:
    """The study module named by ``values['study']`` and its validated ``Config`` of the other values.

    A packaged config's error names the setting and how to change it (``--set``, or the user's own copy of the
    settings), never the YAML file inside the installed package, which a user cannot and should not edit.
    """
    values = dict(values)
    name = values.pop("study", None)
    if not name:
        raise ConfigError(f"{source}: study: missing (e.g. `study: inclusion`)")
    module = get_study(name)
    if not source.startswith(str(STUDY_CONFIGS)):
        return module, config_from_mapping(module.Config, values, source=source, partial=partial)
    preset = Path(source).stem
    own = (
        f"your copy of its settings (judgecal run {preset}.yaml) made by judgecal config show {preset} > {preset}.yaml"
    )
    try:
        return module, config_from_mapping(module.Config, values, source=own, partial=partial)
    except ConfigError as err:
        message = str(err)
        if message.startswith(f"{own}: "):  # unknown keys came from --set, not from a file: name the study
            raise ConfigError(f"study {preset}: {message.removeprefix(own + ': ')}") from err
        raise


def study_settings(study: str, overrides: Iterable[str] = ()) -> dict[str, Any]:
    """The effective settings of ``study`` (a study name or a config path) after ``overrides``, defaults filled.

    A name (a study's, or a packaged preset's such as ``continuous_full``) reads the packaged
    ``studies/configs/<name>.yaml``. Every setting is validated; ``data`` may still be
    empty.
    """
    values, source = _study_values(study)
    module, config = _validated(apply_overrides(values, overrides), source, partial=True)
    return {"study": module.NAME} | json.loads(json.dumps(config.values()))  # tuples -> lists, for YAML


def study_schema(study: str) -> dict[str, Any]:
    """The JSON Schema of the settings of ``study`` (a study name or a config path)."""
    values, source = _study_values(study)
    name = values.get("study")
    if not name:
        raise ConfigError(f"{source}: study: missing (e.g. `study: inclusion`)")
    schema: dict[str, Any] = get_study(name).Config.model_json_schema()
    schema["title"] = f"judgecal {name} study settings"
    schema["properties"] = {"study": {"const": name, "description": "the study"}} | schema.get("properties", {})
    return schema


def packaged_configs() -> list[tuple[str, str, str]]:
    """(name, study, description) of every packaged config: each study's own and the presets (e.g.
    ``continuous_full``), the description being the first sentence of the config's head comment, for
    ``judgecal run --help``."""
    rows = []
    for path in sorted(STUDY_CONFIGS.glob("*.yaml")):
        text = path.read_text()
        head = " ".join(line.lstrip("# ").strip() for line in itertools.takewhile(_is_comment, text.splitlines()))
        sentence = re.split(r"(?<=[.;])\s|\s(?=Run:)", head, maxsplit=1)[0].rstrip(".;")
        match = re.search(r"^study:\s*(\S+)", text, flags=re.MULTILINE)
        rows.append((path.stem, match.group(1) if match else path.stem, sentence))
    return rows


def _is_comment(line: str) -> bool:
    return line.startswith("#")


def _study_values(study: str) -> tuple[dict[str, Any], str]:
    """A config path's values, or a study name's packaged config (its defaults where none is packaged)."""
    path = Path(study)
    if path.is_file():
        return load_yaml(path), str(path)
    if path.suffix in (".yaml", ".yml"):
        raise ConfigError(
            f"{study}: no such config file; run a packaged study by its name (e.g. `judgecal run inclusion`), "
            f"known: {sorted(STUDIES)}"
        )
    packaged = STUDY_CONFIGS / f"{study}.yaml"
    if study not in STUDIES and not packaged.is_file():  # a packaged preset (e.g. continuous_full) names its study
        raise ConfigError(f"{study}: neither a config file nor a study name; known studies: {sorted(STUDIES)}")
    return (load_yaml(packaged), str(packaged)) if packaged.is_file() else ({"study": study}, study)


def identify(
    run: StudyRun,
    storage_options: Mapping[str, Any] | None = None,
    *,
    now: datetime | None = None,
    fingerprint: bool = True,
) -> StudyRun:
    """``run`` with its identity: inputs fingerprinted, digests computed, run id resolved.

    The default run id is ``cfg-<config digest>-in-<input digest>``. The config digest covers the package version,
    so an upgraded judgecal never returns an older run's results. ``now`` (default: the current UTC time) fills
    ``{date}``/``{time}``. ``fingerprint=False`` (``judgecal submit`` with an explicit run id, whose inputs only the
    cluster may reach) leaves the input digest empty; the job identifies the run again where it runs.
    """
    digest = config_digest(run.values | {"judgecal_version": __version__})
    inputs: tuple[dict[str, Any], ...] = ()
    in_digest = ""
    if fingerprint or run.run_id is None:
        options = dict(storage_options or {})
        inputs = tuple(fingerprint_inputs(url, options) for url in _input_urls(run.config))
        in_digest = input_digest(list(inputs))
    if run.run_id is None:
        run_id = f"cfg-{digest}-in-{in_digest}"
    else:
        run_id = resolve_run_id(check_run_id(run.run_id), now or datetime.now(UTC))
    identity = RunIdentity(run_id=run_id, config_digest=digest, input_digest=in_digest, inputs=inputs)
    return dataclasses.replace(run, run_id=run_id, identity=identity)


def execute(
    run: StudyRun,
    engine: EngineConfig,
    *,
    output: str | None = None,
    serial: bool | None = None,
    now: datetime | None = None,
) -> str:
    """Run ``run`` and return its results URL (the run folder).

    ``serial``: True runs the replicates in this process, False fans them out on Ray (the ray extra), None (the
    default) chooses: Ray when a Ray address is configured or Ray is installed, else this process (said once on
    the log). ``now`` is the run's clock (default: the current UTC time), which fills ``{date}``/``{time}`` in the
    run id.
    """
    module, config = run.module, run.config
    serial = choose_executor(serial, engine, module.NAME)  # before anything is read or written
    options = dict(engine.storage_options)
    out = _output_root(output or engine.output, options, config)
    started = utc_now()
    t0 = time.perf_counter()
    data = preflight(module, config, module.load(config, engine))  # input and what only the data shows, unwritten
    if run.identity is None or not run.identity.input_digest:
        run = identify(run, options, now=now)
    assert run.identity is not None and run.run_id is not None
    store = RunStore(f"{out}/{module.NAME}/{run.run_id}", storage_options=options, identity=run.identity.digests())
    _refuse_other_run(store, run.identity, module.NAME)
    if store.succeeded:
        log.info("run %s already complete at %s", run.run_id, redact_text(store.url))
        repair_study_run(out, store.url, data_url=next(iter(_input_urls(config)), None), engine=engine)
        return store.url

    identity = run.identity
    engine_values = engine.values()

    def manifest(status: str, ended: str | None = None, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return build_manifest(
            study=module.NAME,
            run_id=identity.run_id,
            config=run.values,
            engine=engine_values,
            inputs=list(identity.inputs),
            identity=identity.digests(),
            started=started,
            ended=ended,
            status=status,
            extra=extra,
        )

    store.write_json("manifest.json", manifest("running"))
    try:
        seeds, resumed = _run_replicates(module, config, data, store, engine, serial)
        _summarise(module, config, data, store, seeds)
        planned = len(seeds)
        wall = round(time.perf_counter() - t0, 3)
        extra = {"replicates": planned, "resumed_replicates": resumed, "wall_seconds": wall}
        final = manifest("succeeded", utc_now(), extra)
        store.write_json("manifest.json", final)
        store.commit_success()
    except RunConflict:
        raise  # another live attempt owns the run folder and its manifest
    except BaseException as err:
        failed = _record_failure(store, lambda message: manifest("failed", utc_now(), {"error": message}), err)
        record_study_run(out, failed, run_url=store.url, data_url=None, engine=engine)
        raise
    counts = getattr(module, "history_counts", lambda _: None)(data)  # a study's own per-judge counts of its data
    data_url = next(iter(_input_urls(config)), None)
    record_study_run(out, final, run_url=store.url, data_url=data_url, engine=engine, counts=counts)
    return store.url


def preflight(module: Any, config: Any, data: Any) -> Any:
    """``data`` after the study's ``preflight(config, data)`` hook, if it has one: the data-dependent checks decided
    before the run folder is opened (a refusal raises :class:`~judgecal_dist.errors.InputError`; nothing is
    written)."""
    check = getattr(module, "preflight", None)
    if check is not None:
        check(config, data)
    return data


def _output_root(output: str, options: dict[str, Any], config: Any) -> str:
    """The results root (a local one absolute), refused before the data is read when its bucket is missing (never
    created) or when it lies inside the data (each rerun would change its own input)."""
    out = output.rstrip("/")
    if not is_remote(out):
        out = str(Path(out.removeprefix("file://")).expanduser().resolve())
    require_bucket(out, options)
    refuse_output_inside(out, "--output", {"data": next(iter(_input_urls(config)), None)})
    return out


def choose_executor(serial: bool | None, engine: EngineConfig, study: str) -> bool:
    """Whether replicates run in this process: ``serial`` when given (False needs the ray extra), else Ray when
    configured (``ray_address``) or installed, else this process (the base install), said once on the log."""
    if serial is None:
        serial = not engine.ray_address and not has_extra("ray")
        if serial:
            log.info("executor: this process (Ray is not installed; pip install 'judgecal-dist[ray]' fans out)")
    if not serial:
        require_extra("ray", f"judgecal run {study} (replicates fan out on Ray; --serial runs them here)")
    return serial


def _refuse_other_run(store: RunStore, identity: RunIdentity, study: str) -> None:
    """Raise :class:`ConfigError` when ``store`` holds a run made from another config or other inputs (and
    :class:`InputError` when it holds a user's files and no manifest)."""
    if not store.exists("manifest.json"):
        _refuse_foreign_files(store, study)
        return
    try:
        found = store.read_json("manifest.json")
    except ValueError:
        found = {}
    found = found if isinstance(found, dict) else {}
    have = (found.get("config_digest"), found.get("input_digest"))
    want = (identity.config_digest, identity.input_digest)
    if have != want:
        raise ConfigError(
            f"{redact_text(store.url_of('manifest.json'))}: run id {identity.run_id!r} holds another run: found "
            f"config {have[0] or 'unknown'} inputs {have[1] or 'unknown'}, wanted config {want[0]} inputs {want[1]}; "
            "choose another --run-id (e.g. with {date} or {time} in it: one run per night)"
        )


def _refuse_foreign_files(store: RunStore, study: str) -> None:
    """Refuse a run folder (without a manifest) that holds files the run did not write (the ownership rule, with the
    manifest as the run's marker); the store's own lease and temporaries are its own."""
    files = [f for f in store.list_files() if f != LEASE and not f.startswith("_tmp/")]
    command = "fit" if study == "fit" else "run"
    Ownership("manifest.json", "", command, "--run-id", ()).refuse_unmarked(redact_text(store.url), files)


def _run_replicates(
    module: Any, config: Any, data: Any, store: RunStore, engine: EngineConfig, serial: bool
) -> tuple[list[int], int]:
    """Run the replicates whose parts are not committed (or failed verification); return (all seeds, resumed)."""
    replicates = module.plan(config, data)
    done = store.verified_seeds()
    todo = [r for r in replicates if r.seed not in done]
    resumed = len(replicates) - len(todo)
    log.info(
        "%s: %d replicates planned, %d already committed, %d to run", module.NAME, len(replicates), resumed, len(todo)
    )
    # A study whose replicates share data passes runs them itself, committing each batch as it finishes.
    shared = bool(todo) and hasattr(module, "run_shared") and module.run_shared(config, data, todo, store.commit_part)
    if todo and not shared:
        from judgecal_dist.engine.cluster import ray as ray_engine

        if serial:
            ray_engine.run_serial(module.run_replicate, data, todo, store.commit_part)
        else:
            ray_engine.init_ray(engine.ray_address, num_cpus=engine.ray_num_cpus)
            ray_engine.fan_out(module.run_replicate, data, todo, store.commit_part)
    return [r.seed for r in replicates], resumed


def _summarise(module: Any, config: Any, data: Any, store: RunStore, seeds: list[int]) -> None:
    """Summarise all parts and write the run's results (all but the final manifest and ``_SUCCESS``)."""
    parts = store.read_parts(seeds)
    result = module.summarise(config, parts, data)
    store.write_table("summary.parquet", result.summary)
    store.write_json("summary.json", {"study": module.NAME, "results": result.records} | result.extra)
    store.write_text("report.md", result.report)
    for name, png in result.figures.items():
        store.write_bytes(f"figures/{name}", png)
    for name, doc in result.model.items():  # JSON documents, and the files they name beside them (a flow's weights)
        if isinstance(doc, bytes):
            store.write_bytes(f"model/{name}", doc)
        else:
            store.write_json(f"model/{name}", doc)
    for name, table in result.tables.items():
        if name.endswith(".csv"):  # a table a reader opens beside report.md
            store.write_text(name, table.to_csv(index=False))
        else:
            store.write_table(name, table)


def _record_failure(store: RunStore, failed: Callable[[str], dict[str, Any]], err: BaseException) -> dict[str, Any]:
    """Rewrite the manifest as ``failed`` with the error on one line (redacted); never hide the original error.

    Returns the failed manifest (for the run history).
    """
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    message = redact_text(f"{type(err).__name__}: {text}" if text else type(err).__name__)[:500]
    document = failed(message)
    try:
        store.write_json("manifest.json", document)
    except Exception as write_err:  # noqa: BLE001 - the run's own error is the one to report
        log.warning("%s: could not record the failure in manifest.json (%s)", redact_text(store.url), write_err)
    return document


def _input_urls(config: Any) -> list[str]:
    data = getattr(config, "data", None)
    return [data] if isinstance(data, str) and not data.startswith("synthetic:") else []
