"""Run manifests: what ran, on what, with which versions; never credentials.

A manifest records the study config, package version, git sha, input fingerprints (file names, sizes and
modification stamps or ETags of the dataset, plus its ingest report digest), engine settings without storage
options, start/end times and library versions. Values that look like secrets are redacted twice: by key name
(``*secret*``, ``*password*``, ``*token*``, ``*credential*``, ``*access_key*``) and by value (any value equal to a
credential found in the environment).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import re
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from judgecal_dist import __version__
from judgecal_dist.io.filesystem import open_fs

__all__ = ["build_manifest", "fingerprint_inputs", "redact", "utc_now"]

_SECRET_KEY = re.compile(r"secret|password|passwd|token|credential|access_key|session_key|api_key", re.IGNORECASE)
_SECRET_ENV = re.compile(r"(SECRET|PASSWORD|TOKEN|CREDENTIAL|ACCESS_KEY|SESSION|API_KEY)", re.IGNORECASE)
_LIBRARIES = ("numpy", "pandas", "pyarrow", "scipy", "scikit-learn", "pyspark", "ray", "fsspec", "s3fs")
REDACTED = "***redacted***"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _secret_values() -> set[str]:
    return {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and v and len(v) >= 4}


def redact(obj: Any, _secrets: set[str] | None = None) -> Any:
    """A copy of ``obj`` with secret-looking keys and any environment credential value replaced."""
    secrets = _secret_values() if _secrets is None else _secrets
    if isinstance(obj, Mapping):
        return {k: (REDACTED if _SECRET_KEY.search(str(k)) else redact(v, secrets)) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact(v, secrets) for v in obj]
    if isinstance(obj, str):
        for secret in secrets:
            if secret in obj:
                obj = obj.replace(secret, REDACTED)
    return obj


def _git_sha() -> str | None:
    root = Path(__file__).resolve().parents[2]
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


def fingerprint_inputs(url: str, storage_options: dict | None = None) -> dict[str, Any]:
    """A digest of every file under ``url`` (name, size, mtime/ETag): equal digests mean unchanged input."""
    fs, path = open_fs(url, storage_options)
    files = sorted(fs.find(path, detail=True).items())
    digest = hashlib.sha256()
    total = 0
    for name, meta in files:
        stamp = meta.get("ETag") or meta.get("mtime") or meta.get("LastModified") or ""
        size = int(meta.get("size") or 0)
        total += size
        digest.update(f"{name[len(path) :]}|{size}|{stamp}\n".encode())
    return {"url": url, "files": len(files), "bytes": total, "sha256": digest.hexdigest()}


def build_manifest(
    *,
    study: str,
    run_id: str,
    config: Mapping[str, Any],
    engine: Mapping[str, Any],
    inputs: list[dict[str, Any]],
    started: str,
    ended: str | None = None,
    status: str = "running",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest as plain data, redacted; ``engine`` loses its storage options entirely."""
    engine_public = {k: v for k, v in engine.items() if k != "storage_options"}
    manifest = {
        "study": study,
        "run_id": run_id,
        "status": status,
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
