"""What both ``judgecal`` command modules share: exit codes, the error boundary, logging and options.

:mod:`judgecal_dist.cli` (the group and most commands) and :mod:`judgecal_dist.cli_sql` (``sql``, ``serve``,
``catalog``) both import from here, so neither imports the other back.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
from collections.abc import Callable
from enum import IntEnum
from pathlib import Path
from typing import Any

import click

from judgecal_dist.errors import ConfigError, InputError, JudgecalError


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    REJECTED = 2
    DRIFT = 3  # `judgecal drift` raised a flag: a scheduler alerts on it


class Rejected(click.ClickException):
    exit_code = ExitCode.REJECTED


class Failed(click.ClickException):
    exit_code = ExitCode.FAILED


class _RedactingFilter(logging.Filter):
    """Log lines never carry credentials: URL userinfo, ``password=`` parameters, environment credential values."""

    def filter(self, record: logging.LogRecord) -> bool:
        from judgecal_dist.engine.results.manifest import redact_text

        with contextlib.suppress(TypeError, ValueError):  # a malformed log call: the handler reports it as usual
            record.msg, record.args = redact_text(record.getMessage()), None
        return True


#: Third-party loggers whose warnings are notices, not problems of the run (shown with -v).
QUIET_LOGGERS = ("ray._private.authentication", "ray._private.usage")


def setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S"))
    handler.addFilter(_RedactingFilter())
    root = logging.getLogger("judgecal_dist")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False
    # Notices a library prints on every start (Ray's token-authentication note): behind -v.
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if verbose else logging.ERROR)


def redacted(message: str) -> str:
    # Error lines land in scheduler logs too: no URL userinfo, password parameters or environment credentials.
    from judgecal_dist.engine.results.manifest import redact_text

    return redact_text(message)


def guarded(func: Callable[..., Any]) -> Callable[..., Any]:
    """Map our errors to exit codes; ``--debug`` re-raises with the traceback."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        debug = click.get_current_context().find_root().params.get("debug", False)
        try:
            return func(*args, **kwargs)
        except click.ClickException:
            raise
        except (InputError, ConfigError) as err:
            if debug:
                raise
            raise Rejected(redacted(str(err))) from err
        except JudgecalError as err:
            if debug:
                raise
            raise Failed(redacted(str(err))) from err
        except Exception as err:  # noqa: BLE001 - the CLI boundary: anything else is a failed run
            if debug:
                raise
            raise Failed(redacted(f"{type(err).__name__}: {err} (rerun with --debug for the traceback)")) from err

    return wrapper


class StudyCommand(click.Command):
    """A command taking STUDY: its help ends with the packaged studies and presets (read when help is shown)."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from judgecal_dist.studies import STUDY_EXTRAS
        from judgecal_dist.studies.runner import packaged_configs

        rows = packaged_configs()
        for title, pick in (("Studies", lambda n, s: n == s), ("Presets (STUDY names a packaged config)", None)):
            entries = []
            for name, study, text in rows:
                if (pick(name, study) if pick else name != study) is False:
                    continue
                needs = f" [needs {', '.join(STUDY_EXTRAS[study])}]" if study in STUDY_EXTRAS else ""
                of = "" if name == study else f" (study {study})"
                entries.append((name, f"{text}{of}{needs}"))
            with formatter.section(title):
                formatter.write_dl(entries)
        super().format_epilog(ctx, formatter)


# -- options declared once (dbt-style: each shared option is one decorator, applied by every command using it) ----
conf_option = click.option(
    "--conf",
    "conf_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Engine settings YAML (default: conf/local.yaml when present).",
)
#: Where a table-sized command runs (score, label select, label estimate): ``auto`` decides by the table's size.
engine_option = click.option(
    "--engine",
    "stats_engine",
    type=click.Choice(["auto", "spark", "local"]),
    default=None,
    help="Spark or in memory (default: auto, by table size).",
)
output_option = click.option("--output", default=None, help="Results root URL (local path, file:// or s3://).")
ray_option = click.option(
    "--ray-address",
    default=None,
    help="Ray cluster: `run` joins it (default: a local Ray instance); `submit` sends the job to its Jobs API, "
    "e.g. http://127.0.0.1:8265 (required there).",
)
run_id_option = click.option(
    "--run-id",
    default=None,
    help="Run id: letters, digits, '.', '_', '-'; {date} and {time} are filled in UTC (e.g. nightly-{date}). "
    "Default: cfg-<config digest>-in-<input digest>, so the same config on the same data resumes and changed "
    "data is a new run. A run id whose folder holds another config's or other inputs' run is refused.",
)
set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config setting (repeatable; dotted keys for nested settings).",
)


drift_conf_option = click.option(
    "--drift-conf",
    "drift_conf",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Drift thresholds YAML (see conf/drift.yaml: baseline, alpha, method, min_change, ci_level, measures); "
    "options given here override it.",
)
then_option = click.option(
    "--then",
    "then",
    type=click.Choice(["drift"]),
    default=None,
    help="After a successful run, run `judgecal drift` on it (thresholds from --drift-conf) and exit with "
    "drift's code: 0 no flag, 3 a flag. For one cron line: --run-id nightly-{date} --then drift.",
)
