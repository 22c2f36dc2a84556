"""The ``judgecal`` command: ingest, generate, run, sql, serve, catalog, status, submit, score, drift, config.

Each command parses its options, calls one function of io/, engine/ or studies/, and prints. Exit codes: 0 on
success, 1 when a run fails, 2 when input or configuration is rejected (one line naming file, column and keys;
the traceback only with ``--debug``), 3 when ``drift`` raises a flag. The last line a ``run`` prints on stdout is
the run's results URL.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import click

from judgecal_dist.cli_common import (
    ExitCode,
    Failed,
    Rejected,
    StudyCommand,
    conf_option,
    drift_conf_option,
    engine_option,
    guarded,
    output_option,
    ray_option,
    redacted,
    run_id_option,
    set_option,
    setup_logging,
    then_option,
)
from judgecal_dist.errors import InputError
from judgecal_dist.io.column_docs import long_input_help

log = logging.getLogger("judgecal_dist")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks.")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
@click.version_option(package_name="judgecal-dist")
def cli(debug: bool, verbose: bool) -> None:
    """Calibrate panels of LLM judges on Spark + Ray; results through fsspec."""
    setup_logging(verbose)


@cli.command(epilog=long_input_help())
@click.option(
    "--format",
    "fmt",
    required=True,
    help="Input format: llmbar (the LLMBar release folder), rb2-k8 (RewardBench 2 judge outputs) or long (verdict "
    "tables, ours or crowd-kit's; see below).",
)
@click.option(
    "--labels",
    "labels",
    default=None,
    metavar="FILE",
    help="--format long: the labels table from this file (CSV, JSON lines or Parquet; item_id,label or crowd-kit's "
    "task,label) instead of SRC/labels.*. Without labels every item is unlabelled.",
)
@click.option("--dataset", default=None, help="Dataset name (default: from the source).")
@click.option("--overwrite", is_flag=True, help="Replace an existing dataset at DEST.")
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse SRC on any warning (a judge's file absent from some subsets, a judge whose every verdict is "
    "null) instead of logging it and listing it in the report.",
)
@click.option(
    "--register",
    "register_as",
    default=None,
    metavar="NAME",
    help="Then register DEST in the catalog as database NAME (as `judgecal catalog add DEST --name NAME`).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the full ingest report as JSON (it is always stored as DEST/_ingest.json) instead of a summary.",
)
@conf_option
@click.argument("src")
@click.argument("dest")
@guarded
def ingest(
    fmt: str,
    dataset: str | None,
    overwrite: bool,
    strict: bool,
    labels: str | None,
    register_as: str | None,
    as_json: bool,
    conf_path: Path | None,
    src: str,
    dest: str,
) -> None:
    """Validate SRC and write it as an ingested dataset (Parquet tables) at DEST; warnings go to the log and the
    report's ``warnings``."""
    from judgecal_dist.io.ingest import FORMATS, ingest_summary
    from judgecal_dist.io.ingest import ingest as run_ingest

    if fmt not in FORMATS:
        raise Rejected(f"--format: unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    if register_as is not None:  # a name the catalog would refuse is refused before the dataset is written
        from judgecal_dist.engine.sql.catalog import check_name

        check_name(register_as, "--register")
    report = run_ingest(fmt, src, dest, dataset=dataset, overwrite=overwrite, strict=strict, labels=labels)
    click.echo(json.dumps(report, indent=2, default=str) if as_json else ingest_summary(report, dest))
    if register_as is not None:
        from judgecal_dist.cli_sql import register
        from judgecal_dist.config import load_engine_config

        click.echo(register(dest, register_as, load_engine_config(conf_path)))
    click.echo(dest)


@cli.command()
@click.option("--items", type=int, default=5000, show_default=True, help="Items (pairwise comparisons) in the panel.")
@click.option("--judges", type=int, default=12, show_default=True, help="Judges voting on every item.")
@click.option("--samples", type=int, default=1, show_default=True, help="Repeated verdicts per item and judge.")
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Random seed: the same seed and options give identical files.",
)
@click.option(
    "--label-fraction",
    type=float,
    default=1.0,
    show_default=True,
    help="Share of items with a label; the others are unlabelled (null label).",
)
@click.option("--nights", type=int, default=None, help="Write a nightly sequence DEST/night-NN of this many tables.")
@click.option(
    "--drift",
    "drift_changes",
    multiple=True,
    metavar="JUDGE@NIGHT:KIND[=VALUE]",
    help="With --nights: a judge that changes from a night on; KIND accuracy (delta), bias (P(A) when unsure), "
    "parse (null share) or replace (new id, accuracy); e.g. judge-001@5:accuracy=-0.2 (repeatable).",
)
@click.option("--overwrite", is_flag=True, help="Replace a committed dataset at DEST.")
@click.argument("dest")
@guarded
def generate(
    items: int,
    judges: int,
    samples: int,
    seed: int,
    label_fraction: float,
    nights: int | None,
    drift_changes: tuple[str, ...],
    overwrite: bool,
    dest: str,
) -> None:
    """Write a seeded synthetic verdict panel (an ingested dataset) at DEST, or a nightly sequence with --nights."""
    from judgecal_dist.io.synthetic import generate_panel
    from judgecal_dist.io.synthetic_drift import generate_drift_sequence, parse_change

    if drift_changes and nights is None:
        raise Rejected("--drift: needs --nights (the length of the nightly sequence)")
    common: dict[str, Any] = dict(
        n_items=items, n_judges=judges, n_samples=samples, seed=seed, label_fraction=label_fraction
    )
    if nights is not None:
        changes = [parse_change(text) for text in drift_changes]
        report = generate_drift_sequence(dest, nights=nights, changes=changes, overwrite=overwrite, **common)
        click.echo("\n".join(report["nights"]))
        return
    generate_panel(dest, overwrite=overwrite, **common)  # logs what it wrote
    click.echo(dest)


def mlflow_options(command: Any) -> Any:
    """``--mlflow URI`` and ``--mlflow-register NAME`` (``run`` and ``fit``)."""
    command = click.option(
        "--mlflow-register",
        "mlflow_register",
        default=None,
        metavar="NAME",
        help="With --mlflow: register the logged model as the next version of the MLflow registered model NAME.",
    )(command)
    return click.option(
        "--mlflow",
        "mlflow_uri",
        default=None,
        metavar="URI",
        help="Also log the finished run to MLflow, once per run: params, metrics, figures, the model card and the "
        "model (a pyfunc model scoring verdict rows). URI: a server, sqlite:///PATH, or a local folder (file:///PATH "
        "or a path). Needs the tracking extra: pip install 'judgecal-dist[tracking]'.",
    )(command)


@cli.command(cls=StudyCommand)
@click.argument("config", metavar="STUDY")
@set_option
@output_option
@run_id_option
@ray_option
@conf_option
@click.option(
    "--serial/--ray",
    "serial",
    default=None,
    help="Run the replicates in this process, or fan them out on Ray (the ray extra). Default: Ray when it is "
    "installed or --ray-address is given, else this process.",
)
@then_option
@drift_conf_option
@mlflow_options
@guarded
def run(
    config: str,
    overrides: tuple[str, ...],
    output: str | None,
    run_id: str | None,
    ray_address: str | None,
    conf_path: Path | None,
    serial: bool | None,
    then: str | None,
    drift_conf: Path | None,
    mlflow_uri: str | None,
    mlflow_register: str | None,
) -> None:
    """Run STUDY (a study name for its packaged config, e.g. inclusion, or a config file) and print its summary
    and, last, its results URL.

    With --then drift the run's judges are then compared with its baseline in <output>/history (the drift
    report's folder is printed last) and the exit code is drift's: 0 no flag, 3 a flag.
    """
    from judgecal_dist.config import load_engine_config
    from judgecal_dist.engine.results.store import RunStore
    from judgecal_dist.history.drift_config import load_drift_config
    from judgecal_dist.studies.runner import execute, prepare

    study = prepare(config, overrides, run_id=run_id)  # the run id's syntax too, before anything is read
    engine = load_engine_config(conf_path, {"ray_address": ray_address})
    baseline, settings = load_drift_config(drift_conf)  # checked before the run, even without --then
    _check_mlflow(mlflow_uri, mlflow_register)
    url = execute(study, engine, output=output, serial=serial)
    click.echo(_run_preview(RunStore(url, storage_options=dict(engine.storage_options))))
    if mlflow_uri:
        _track(url, mlflow_uri, mlflow_register, engine)
    click.echo(url)
    if then == "drift":
        root, name, done = url.rsplit("/", 2)
        code = _drift_check(root, engine, settings, baseline=baseline, study=name, current=done)
        if code:
            sys.exit(code)


def _check_mlflow(uri: str | None, register: str | None) -> None:
    """Refuse --mlflow-register without --mlflow, and a tracking URI MLflow cannot use, before the run starts."""
    if register and not uri:
        raise Rejected("--mlflow-register: needs --mlflow URI (the tracking store the model is registered in)")
    if uri:
        from judgecal_dist.history.tracking import check_tracking_uri

        check_tracking_uri(uri)


def _track(url: str, uri: str, register: str | None, engine: Any) -> None:
    """Log the committed run at ``url`` to MLflow and say where; a failure is exit 1 and says the run itself stands."""
    from judgecal_dist.history.tracking import log_run_to_mlflow

    try:
        tracked = log_run_to_mlflow(url, uri, storage_options=dict(engine.storage_options), register=register)
    except Exception as err:  # noqa: BLE001 - any tracking failure: the run is committed, say so
        raise Failed(
            redacted(
                f"{url}: the run is committed, but logging it to MLflow failed ({type(err).__name__}: {err}); "
                "rerun the same command to log it"
            )
        ) from err
    click.echo(f"mlflow: run {tracked.run_id} (experiment {tracked.experiment})")
    if tracked.model_uri:
        click.echo(f"mlflow: model {tracked.model_uri}" + (f", registered as {tracked.registered}" if register else ""))


def _run_preview(store: Any, max_rows: int = 10, max_metrics: int = 5) -> str:
    """The run's recommendation and the rows that support it; a run without one (older versions): every key
    column (text and integer columns, so no two rows look alike) and the first metrics of ``max_rows`` rows."""
    from judgecal_dist.studies.recommendation import preview

    recommendation = store.read_json("summary.json").get("recommendation")
    if recommendation:
        return preview(recommendation)
    summary = store.read_table("summary.parquet")
    keys = [c for c in summary.columns if summary[c].dtype == object or summary[c].dtype.kind in "iu"]
    numeric = [c for c in summary.columns if c not in keys and summary[c].dtype.kind == "f"]
    metrics = [c for c in numeric if not c.endswith(("_ci_low", "_ci_high"))][:max_metrics]
    return summary[keys + metrics].head(max_rows).to_string(index=False, float_format=lambda x: f"{x:.4f}")


@cli.command()
@click.argument("run_url")
@guarded
def status(run_url: str) -> None:
    """Print a run's state: manifest status, replicates committed, and whether _SUCCESS is there.

    An unfinished run also gets a progress line (last replicate committed, rate, ETA) and its writer (the
    attempt holding the run's lease, or none: rerun the same run id to resume).
    """
    from judgecal_dist.engine.results.manifest import read_manifest
    from judgecal_dist.engine.results.store import RunStore, progress_line

    store = RunStore(run_url)
    manifest = read_manifest(store)
    stamps = store.part_stamps()
    planned = manifest.get("replicates") or manifest.get("config", {}).get("replicates")
    succeeded = store.succeeded
    state = "succeeded" if succeeded else manifest.get("status", "unknown")
    lease = None if succeeded else store.lease_info()
    if state == "running" and (lease is None or not store.lease_alive(lease)):
        state = "stopped (interrupted; rerun the same run id to resume)"
    elif state == "failed":
        state = f"failed ({manifest.get('error')}; rerun the same run id to resume)"
    click.echo(
        f"{manifest.get('study')} {manifest.get('run_id')}: {state}; replicates {len(stamps)}/{planned}; "
        f"started {manifest.get('started')} ended {manifest.get('ended')}"
    )
    if not succeeded:
        click.echo(progress_line(store, stamps, planned, manifest.get("started")))


@cli.command(cls=StudyCommand)
@click.argument("config", metavar="STUDY")
@set_option
@ray_option
@run_id_option
@output_option
@conf_option
@click.option("--follow", is_flag=True, help="Stream the job's logs until it ends; exit 1 unless it succeeded.")
@then_option
@drift_conf_option
@guarded
def submit(
    config: str,
    overrides: tuple[str, ...],
    ray_address: str | None,
    run_id: str | None,
    output: str | None,
    conf_path: Path | None,
    follow: bool,
    then: str | None,
    drift_conf: Path | None,
) -> None:
    """Submit STUDY (a study name or a config file) to a Ray cluster as a job; print the job id last (a repeat
    reports the job).

    The run id is the job's submission id: ``{date}``/``{time}`` are filled now; the default id fingerprints the
    inputs here (so they must be reachable), exactly as ``judgecal run`` would. --then drift follows the job
    and, once it succeeded, compares its judges with their baseline from here (the results root must be
    reachable here) and exits with drift's code.
    """
    from judgecal_dist.extras import require_extra

    require_extra("ray", "judgecal submit (Ray's Jobs API)")
    from judgecal_dist.config import load_engine_config
    from judgecal_dist.engine.cluster.submit import check_shippable, follow_job, job_client, submit_study
    from judgecal_dist.history.drift_config import load_drift_config
    from judgecal_dist.studies.runner import identify, prepare

    if not ray_address:
        raise click.MissingParameter(ctx=click.get_current_context(), param_hint="'--ray-address'", param_type="option")
    engine = load_engine_config(conf_path)
    run = prepare(config, overrides, run_id=run_id)
    check_shippable(engine, run.values, str(conf_path or "engine settings"))  # before the cluster is contacted
    baseline, settings = load_drift_config(drift_conf)
    follow = follow or then == "drift"  # the check needs the finished run
    try:
        run = identify(run, engine.storage_options, fingerprint=run_id is None)
    except InputError as err:
        raise InputError(
            f"{err}; the default run id fingerprints the inputs here: make them reachable, or pass "
            "--run-id (the job then checks them where it runs)"
        ) from err
    client = job_client(ray_address)
    sub = submit_study(run, ray_address=ray_address, engine=engine, output=output, client=client)
    verb = "submitted" if sub.created else f"already {sub.status} (not submitted again)"
    click.echo(f"{sub.study} {sub.run_id}: job {sub.job_id} {verb}; results at {sub.results_url}")
    if follow:
        final = follow_job(job_client(ray_address), sub.job_id, lambda text: click.echo(text, nl=False))
        click.echo(f"job {sub.job_id}: {final}")
        if final != "SUCCEEDED":
            raise Failed(f"job {sub.job_id} ended {final}; see its logs above (rerun submit to resume)")
    click.echo(sub.job_id)
    if then == "drift":
        root = sub.results_url.rsplit("/", 2)[0]
        code = _drift_check(root, engine, settings, baseline=baseline, study=sub.study, current=sub.run_id)
        if code:
            sys.exit(code)


@cli.command()
@click.option("--data", "data_url", required=True, help="Ingested dataset URL whose labelled items are fitted on.")
@set_option
@output_option
@run_id_option
@conf_option
@click.option(
    "--serial/--ray",
    "serial",
    default=None,
    help="Fit the candidates in this process, or fan them out on Ray (the ray extra). Default: Ray when it is "
    "installed, else this process.",
)
@mlflow_options
@guarded
def fit(
    data_url: str,
    overrides: tuple[str, ...],
    output: str | None,
    run_id: str | None,
    conf_path: Path | None,
    serial: bool | None,
    mlflow_uri: str | None,
    mlflow_register: str | None,
) -> None:
    """Choose the calibrated panel pipeline by cross-fitted NLL on the labelled items of --data, export it
    (model/model.json) with a model card (report.md); print the choice and, last, the run folder.

    Settings (candidates, folds, rule, export) are the packaged fit config's, each overridable with --set.
    """
    from judgecal_dist.config import load_engine_config
    from judgecal_dist.engine.results.store import RunStore
    from judgecal_dist.studies.runner import execute, prepare

    study = prepare("fit", (*overrides, f"data={data_url}"), run_id=run_id)
    engine = load_engine_config(conf_path, {})
    _check_mlflow(mlflow_uri, mlflow_register)
    url = execute(study, engine, output=output, serial=serial)
    click.echo(_run_preview(RunStore(url, storage_options=dict(engine.storage_options))))
    if mlflow_uri:
        _track(url, mlflow_uri, mlflow_register, engine)
    click.echo(url)


@cli.command()
@click.option(
    "--model",
    "model_url",
    required=True,
    help="A run folder with an exported model (model/model.json) or a model JSON URL.",
)
@click.option("--data", "data_url", required=True, help="Ingested dataset URL whose items are scored.")
@click.option("--output", "output_url", required=True, help="Output folder URL (items/, summary/, _SUCCESS).")
@click.option("--sample", type=int, default=0, show_default=True, help="Verdict sample to score.")
@click.option("--ignore-unknown-judges", is_flag=True, help="Leave out verdicts of judges the model lacks.")
@click.option(
    "--min-judge-coverage",
    type=float,
    default=0.5,
    show_default=True,
    help="Least share of the model's judges that must have verdicts in --data (0: score any table; items "
    "without a vote from a model judge stay unscored).",
)
@engine_option
@click.option("--overwrite", is_flag=True, help="Replace a committed score of other inputs at --output.")
@conf_option
@guarded
def score(
    model_url: str,
    data_url: str,
    output_url: str,
    sample: int,
    ignore_unknown_judges: bool,
    min_judge_coverage: float,
    stats_engine: str | None,
    overwrite: bool,
    conf_path: Path | None,
) -> None:
    """Apply the model exported by a run (judgecal fit, a study) to every item of --data; print counts and the
    output URL.

    --output must be new, empty, or a folder an earlier score wrote (marked by _JUDGECAL_SCORE), outside --data:
    score never writes among or deletes files it did not write; the same inputs again are "already complete".
    """
    from judgecal_dist.config import load_engine_config
    from judgecal_dist.scoring.apply import score_dataset
    from judgecal_dist.scoring.output import brief_counts

    engine = load_engine_config(conf_path, {"stats_engine": stats_engine})
    unknown = "ignore" if ignore_unknown_judges else "error"
    result = score_dataset(
        model_url,
        data_url,
        output_url,
        engine=engine,
        sample=sample,
        unknown_judges=unknown,
        min_judge_coverage=min_judge_coverage,
        overwrite=overwrite,
    )
    click.echo(json.dumps(brief_counts(result["counts"]) | {"engine": result["engine"]}, default=str))
    click.echo(output_url)


@cli.command()
@click.option("--output", default="./results", show_default=True, help="Results root URL whose history/ is read.")
@click.option("--study", default=None, help="Study to compare (default: the only one in the history).")
@click.option(
    "--baseline",
    default=None,
    help="previous (the run before --current; default), window:N (the N runs before it, counts pooled) or a run id.",
)
@click.option("--current", default=None, help="Run id to check (default: the latest succeeded run).")
@click.option("--alpha", type=float, default=None, help="Level of the adjusted tests (default 0.05).")
@click.option(
    "--method",
    type=click.Choice(["holm", "fdr_bh"]),
    default=None,
    help="Multiplicity control across judges x measures: Holm (family-wise; default) or Benjamini-Hochberg (FDR).",
)
@click.option("--min-change", type=float, default=None, help="Smallest change that is flagged (default 0.02).")
@click.option("--report", "report_url", default=None, help="Report folder (default: <output>/drift/<study>/<current>).")
@click.option(
    "--engine",
    "history_engine",
    type=click.Choice(["auto", "spark", "local"]),
    default=None,
    help="Read the history in memory or through Spark (default: auto, Spark above history_local_max_runs runs); "
    "the comparison is the same.",
)
@click.option("--overwrite", is_flag=True, help="Replace a report of another comparison (the same: left as is).")
@drift_conf_option
@conf_option
@guarded
def drift(
    output: str,
    study: str | None,
    baseline: str | None,
    current: str | None,
    alpha: float | None,
    method: str | None,
    min_change: float | None,
    report_url: str | None,
    history_engine: str | None,
    overwrite: bool,
    drift_conf: Path | None,
    conf_path: Path | None,
) -> None:
    """Compare each judge of a run with its baseline in <output>/history; write report.md and drift.json.

    \b
    Prints one line per flag, then the report folder. Exit codes: 0 no flag (or no baseline yet), 3 a flag
    was raised (a judge changed, is new or vanished), 2 a rejected setting or history, 1 a failure.
    """
    from judgecal_dist.config import load_engine_config
    from judgecal_dist.history.drift_config import load_drift_config

    overrides = {"baseline": baseline, "alpha": alpha, "method": method, "min_change": min_change}
    chosen, settings = load_drift_config(drift_conf, overrides)  # before anything is read
    engine = load_engine_config(conf_path, {"stats_engine": history_engine})
    where = {"study": study, "current": current, "report": report_url}
    code = _drift_check(output, engine, settings, baseline=chosen, overwrite=overwrite, **where)
    if code:
        sys.exit(code)


def _drift_check(
    output: str,
    engine: Any,
    settings: Any,
    *,
    baseline: str,
    study: str | None = None,
    current: str | None = None,
    report: str | None = None,
    overwrite: bool = False,
) -> int:
    """Run the drift comparison, write its report, print the flags and the report folder; return the exit code."""
    from judgecal_dist.history.drift import detect_drift
    from judgecal_dist.history.drift_report import check_report_folder, write_drift_report

    if report:  # a folder the user named is checked before the history is read (the default one after)
        check_report_folder(report, output, storage_options=engine.storage_options)
    comparison = detect_drift(output, study=study, baseline=baseline, current=current, settings=settings, config=engine)
    dest = report or f"{output.rstrip('/')}/drift/{comparison.study}/{comparison.current}"
    write_drift_report(comparison, dest, storage_options=engine.storage_options, overwrite=overwrite)
    for row in comparison.flagged.to_dict("records"):
        click.echo(
            f"FLAG {row['judge_id']} {row['measure']}: {row['kind']} ({row['baseline']:.3f} -> {row['current']:.3f})"
        )
    for judge in comparison.new_judges:
        click.echo(f"FLAG {judge}: new judge")
    for judge in comparison.vanished_judges:
        click.echo(f"FLAG {judge}: vanished judge")
    if not comparison.baseline:
        click.echo(f"{comparison.study} {comparison.current}: no baseline run yet, nothing compared")
    click.echo(dest)
    return int(ExitCode.DRIFT) if comparison.raised else int(ExitCode.OK)


@cli.group()
def config() -> None:
    """Study settings: the effective values (``show``) and their JSON Schema (``schema``).

    STUDY is a study name (its packaged config, `judgecal config show STUDY` prints it) or a config file path.
    """


@config.command("show")
@click.argument("study")
@set_option
@guarded
def config_show(study: str, overrides: tuple[str, ...]) -> None:
    """Print the effective settings of STUDY after --set overrides, every default filled, as YAML."""
    import yaml

    from judgecal_dist.studies.runner import study_settings

    click.echo(yaml.safe_dump(study_settings(study, overrides), sort_keys=False).rstrip("\n"))


@config.command("schema")
@click.argument("study")
@guarded
def config_schema(study: str) -> None:
    """Print the JSON Schema of STUDY's settings (types, allowed ranges, defaults)."""
    from judgecal_dist.studies.runner import study_schema

    click.echo(json.dumps(study_schema(study), indent=2))


def _add_sql_commands() -> None:  # sql, serve, catalog (cli_sql.py); label, advise (cli_labels.py): one group
    from judgecal_dist.cli_labels import advise, label
    from judgecal_dist.cli_sql import catalog, serve, sql

    for command in (sql, serve, catalog, label, advise):
        cli.add_command(command)


if __name__ != "__main__":  # run as `python -m`, the package's own module registers them (below)
    _add_sql_commands()


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="judgecal")


if __name__ == "__main__":
    # `python -m judgecal_dist.cli` (submit's entry point): run the package's module, which holds every command.
    from judgecal_dist.cli import main as package_main

    package_main()
