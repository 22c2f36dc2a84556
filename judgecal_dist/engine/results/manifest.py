"""Run manifests: what ran, on what, with which versions; never credentials.

A manifest records the study config, package version, git sha, input fingerprints (file names, sizes and
modification stamps or ETags of the dataset, plus its ingest report digest), the run's identity (config digest and
input digest), engine settings without storage options, start/end times and library versions. Secrets are
redacted three ways: by key name (:func:`is_credential_key`: ``secret``, ``password``, ``token``, ``credential``,
``access_key``, Spark's ``spark.hadoop.fs.s3a.access.key`` / ``secret.key`` / ``session.token``, ...), by URL
(userinfo ``s3://user:pass@...`` and ``password=`` parameters of JDBC URLs) and by value (any value equal to a
credential found in the environment). :func:`redact_text` applies the last two to log lines.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import re
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judgecal_dist import __version__
from judgecal_dist.errors import InputError

__all__ = [
    "build_manifest",
    "credential_paths",
    "input_digest",
    "is_credential_key",
    "redact",
    "redact_text",
    "utc_now",
]

# Key names that hold credentials: s3fs/botocore (key, secret, token, aws_secret_access_key, aws_session_token),
# Spark/Hadoop (fs.s3a.access.key, fs.s3a.secret.key, fs.s3a.session.token, fs.azure.account.key.<account>,
# spark.authenticate.secret, spark.ssl.keyStorePassword), JDBC options (password) and generic names. A token is a
# whole name segment (``*.token``, ``*_token``, ``accessToken``), so settings such as ``max_tokens`` are not secrets.
_SECRET_KEY = re.compile(
    r"^(key|secret|token|password|pwd)$|secret|passw(or)?d|credential|(^|[._-])token$"
    r"|(access|session|auth|refresh|bearer|api|id)[._-]?token|(access|session|api|account|private|encryption)[._-]?key",
    re.IGNORECASE,
)
# ... except settings that only name where credentials come from (a provider class, a token binding).
_NOT_SECRET_KEY = re.compile(r"(provider|binding|\.enabled|\.impl|\.class|\.file|\.path)$", re.IGNORECASE)
# URL userinfo (``scheme://user:pass@host``) and credential parameters (``?password=...``, ``;password=...``).
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s]+@")  # greedy: up to the last @
_URL_PARAM = re.compile(
    r"(?P<name>\b(?:password|passwd|pwd|secret|token|(?:access|secret|api|session)[._-]?key))=[^&;\s]+", re.IGNORECASE
)
_SECRET_ENV = re.compile(r"(SECRET|PASSWORD|TOKEN|CREDENTIAL|ACCESS_KEY|SESSION|API_KEY)", re.IGNORECASE)
_LIBRARIES = ("numpy", "pandas", "pyarrow", "scipy", "scikit-learn", "pyspark", "ray", "fsspec", "s3fs")
REDACTED = "***redacted***"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _secret_values() -> set[str]:
    return {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and v and len(v) >= 4}


def is_credential_key(key: Any) -> bool:
    """Whether a setting named ``key`` holds a credential (see the module docstring for the names)."""
    name = str(key)
    return bool(_SECRET_KEY.search(name)) and not _NOT_SECRET_KEY.search(name)


def _url_has_credentials(text: str) -> bool:
    return bool(_URL_USERINFO.search(text) or _URL_PARAM.search(text))


def redact_text(text: str, _secrets: set[str] | None = None) -> str:
    """``text`` with URL userinfo, URL credential parameters and environment credential values replaced."""
    text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    text = _URL_PARAM.sub(lambda m: f"{m.group('name')}={REDACTED}", text)
    for secret in _secret_values() if _secrets is None else _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact(obj: Any, _secrets: set[str] | None = None) -> Any:
    """A copy of ``obj`` with credential keys, URL credentials and any environment credential value replaced."""
    secrets = _secret_values() if _secrets is None else _secrets
    if isinstance(obj, Mapping):
        return {k: (REDACTED if is_credential_key(k) else redact(v, secrets)) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact(v, secrets) for v in obj]
    if isinstance(obj, str):
        return redact_text(obj, secrets)
    return obj


def credential_paths(obj: Any, path: str = "") -> list[str]:
    """Dotted paths in ``obj`` whose key names a credential or whose value is a URL carrying one.

    Used where settings are shipped (``judgecal submit``), which refuses them rather than redacting: a redacted
    setting would fail on the cluster.
    """
    found: list[str] = []
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            where = f"{path}.{key}" if path else str(key)
            if is_credential_key(key) and value not in (None, ""):
                found.append(where)
            else:
                found.extend(credential_paths(value, where))
    elif isinstance(obj, list | tuple):
        for i, value in enumerate(obj):
            found.extend(credential_paths(value, f"{path}[{i}]"))
    elif isinstance(obj, str) and _url_has_credentials(obj):
        found.append(path)
    return found


def _git_sha() -> str | None:
    root = Path(__file__).resolve().parents[3]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def input_digest(inputs: list[dict[str, Any]]) -> str:
    """A short digest of a run's input fingerprints (part of its identity, beside the config digest)."""
    blob = json.dumps(sorted(entry["sha256"] for entry in inputs)).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def build_manifest(
    *,
    study: str,
    run_id: str,
    config: Mapping[str, Any],
    engine: Mapping[str, Any],
    inputs: list[dict[str, Any]],
    started: str,
    identity: Mapping[str, str] | None = None,
    ended: str | None = None,
    status: str = "running",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest as plain data, redacted; ``engine`` loses its storage options entirely.

    ``identity`` (``config_digest``, ``input_digest``) is what a rerun of the same run id is checked against.
    """
    engine_public = {k: v for k, v in engine.items() if k != "storage_options"}
    manifest = {
        "study": study,
        "run_id": run_id,
        "status": status,
        **dict(identity or {}),
        "package": "judgecal-dist",
        "version": __version__,
        "git_sha": _git_sha(),
        "config": dict(config),
        "engine": engine_public,
        "inputs": inputs,
        "started": started,
        "ended": ended,
        "host": platform.node(),
        "versions": _versions(),
    }
    if extra:
        manifest.update(extra)
    return redact(manifest)


def read_manifest(store: Any) -> dict[str, Any]:
    """The run's ``manifest.json`` as a dict, refused naming the file when a crash or a copy left it unreadable.

    ``store`` is the run's :class:`~judgecal_dist.engine.results.store.RunStore`.
    """
    url = store.url_of("manifest.json")
    if not store.exists("manifest.json"):
        raise InputError(f"{url}: not found (not a run folder)")
    try:
        manifest = store.read_json("manifest.json")
    except (UnicodeDecodeError, json.JSONDecodeError) as err:  # truncated by a crash or a copy: name the file
        raise InputError(f"{url}: not a readable manifest ({err}); rerun the same run id") from err
    if not isinstance(manifest, dict):
        raise InputError(f"{url}: not a manifest (a JSON object); rerun the same run id")
    return manifest
