"""fsspec access to local paths, ``file://`` and ``s3://`` URLs, with errors that name the URL.

The S3 endpoint comes from ``storage_options`` (``{"endpoint_url": ...}`` or ``{"client_kwargs": {...}}``) or from
the standard ``AWS_ENDPOINT_URL`` environment variable, which botocore (under s3fs) reads itself; credentials come
only from the AWS chain and are never logged.

Transient object-store errors (HTTP 5xx, throttling, dropped connections) are retried twice over: botocore's
``standard`` retry mode is the default for ``s3://`` filesystems (exponential backoff with jitter per request),
and :func:`retry_transient` retries whole operations (a write-then-move commit, a listing) with backoff. Every
other error (missing object, access denied, bad request) is raised at once.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import posixpath
import random
import sys
import time
from collections.abc import Callable
from typing import IO, Any, TypeVar
from urllib.parse import urlsplit

import fsspec
from fsspec import AbstractFileSystem
from fsspec.utils import infer_compression

from judgecal_dist.errors import InputError
from judgecal_dist.extras import require_extra

__all__ = [
    "fingerprint_inputs",
    "location_key",
    "is_inside",
    "open_fs",
    "require_exists",
    "require_bucket",
    "require_regular_file",
    "has_directories",
    "open_input",
    "read_json_file",
    "join_path",
    "strip_compression",
    "is_transient",
    "retry_transient",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: HTTP statuses and S3 error codes that mean "try again" (AWS S3 error responses; MinIO and moto use the same).
TRANSIENT_STATUS = frozenset({500, 502, 503, 504})
TRANSIENT_CODES = frozenset(
    {
        "InternalError",
        "ServiceUnavailable",
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "503 SlowDown",
    }
)
#: Protocols whose "folders" are key prefixes in a bucket (s3fs's ``makedirs`` would create the bucket).
OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss"})
#: botocore's retry mode for ``s3://`` unless ``storage_options`` sets one (per request; see retry_transient).
S3_RETRIES = {"mode": "standard", "max_attempts": 8}


def _botocore_errors() -> Any:
    """botocore's exceptions module when botocore is loaded, else None.

    botocore comes with the cluster extra (under s3fs) and is imported by s3fs when an ``s3://`` filesystem is
    made; a process that never opened one cannot hold a botocore error, so the base install never imports it.
    """
    return sys.modules.get("botocore.exceptions")


def access_errors() -> tuple[type[BaseException], ...]:
    """Exceptions raised while reaching a URL (local or remote) that mean "this input cannot be accessed".

    Remote filesystems raise their client's own errors for missing credentials or unreachable endpoints
    (botocore's are not OSErrors); they are input problems of the URL, reported as such.
    """
    boto = _botocore_errors()
    return (OSError,) if boto is None else (OSError, boto.BotoCoreError, boto.ClientError)


#: Exceptions a corrupt, truncated or unreadable input file raises while it is decoded.
DECODE_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, ValueError, UnicodeDecodeError)


def location_key(location: str) -> tuple[str, str]:
    """(scheme, normalised absolute path) of a path or URL, for comparing folders: ``s3a``/``s3n`` are ``s3``; no
    scheme, ``file:/x`` and ``file:///x`` are local paths, absolute with links and ``~`` resolved.

    Examples
    --------
    >>> location_key("s3a://bucket/a/../b/")
    ('s3', '/bucket/b')
    """
    parts = urlsplit(location)
    scheme = parts.scheme.lower() if len(parts.scheme) > 1 else ""  # a Windows drive letter is not a scheme
    if scheme in ("", "file"):
        path = parts.path if scheme else location
        return "file", os.path.realpath(os.path.abspath(os.path.expanduser(path)))
    scheme = "s3" if scheme in ("s3a", "s3n") else scheme
    return scheme, posixpath.normpath(f"/{parts.netloc}/{parts.path.lstrip('/')}")


def is_inside(path: tuple[str, str], root: tuple[str, str]) -> bool:
    """Whether the :func:`location_key` ``path`` is ``root`` or lies below it."""
    return path[0] == root[0] and (path[1] == root[1] or path[1].startswith(root[1].rstrip("/") + "/"))


def open_fs(url: str, storage_options: dict[str, Any] | None = None) -> tuple[AbstractFileSystem, str]:
    """The filesystem and protocol-free path of ``url`` (``fsspec.core.url_to_fs``).

    Parameters
    ----------
    url : str
        A local path, ``file://...``, ``s3://bucket/prefix`` or any URL fsspec knows.
    storage_options : dict, optional
        Passed to the filesystem (e.g. ``{"endpoint_url": "http://127.0.0.1:9000"}`` for S3).

    Returns
    -------
    (fsspec.AbstractFileSystem, str)

    Raises
    ------
    InputError
        The protocol is unknown or its filesystem cannot be created.
    ConfigError
        An ``s3://`` URL without s3fs (the cluster extra) installed.
    """
    options = dict(storage_options or {})
    if str(url).startswith(("s3://", "s3a://")):
        require_extra("cluster", f"{url}: an s3:// URL", modules=("s3fs",))
        config_kwargs = dict(options.get("config_kwargs") or {})
        config_kwargs.setdefault("retries", dict(S3_RETRIES))
        options["config_kwargs"] = config_kwargs
    try:
        return fsspec.core.url_to_fs(str(url), **options)
    except (ValueError, ImportError, TypeError) as err:
        raise InputError(f"{url}: cannot open this URL ({err})") from err


def join_path(path: str, *parts: str) -> str:
    """Join path components with ``/`` (fsspec paths are POSIX-like on every filesystem)."""
    return "/".join([path.rstrip("/"), *parts])


def require_exists(fs: AbstractFileSystem, path: str, url: str) -> None:
    """Raise :class:`InputError` naming ``url`` when ``path`` does not exist on ``fs``."""
    try:
        fs.invalidate_cache(path)
        found = fs.exists(path)
    except access_errors() as err:  # e.g. an S3 bucket that cannot be reached, or no credentials
        raise InputError(f"{url}: cannot access ({type(err).__name__}: {err})") from err
    if not found:
        raise InputError(f"{url}: no such file or directory")


def require_regular_file(fs: AbstractFileSystem, path: str, url: str, *, max_bytes: int | None = None) -> int:
    """The size of ``path`` (-1 on an object store without ``max_bytes``: not asked), refused before anything is
    read when it is not a regular file (a device such as ``/dev/zero``, a fifo, a folder; a symlink is judged by
    its target), or when it is larger than ``max_bytes``. Reading a link to a device would never end.

    Raises
    ------
    InputError
        ``<url>: not a regular file (...)`` or ``<url>: N bytes, more than ... can be``; ``FileNotFoundError``
        when it does not exist (callers name it their way).
    """
    if max_bytes is None and not has_directories(fs):  # an object store holds files only: no request needed
        return -1
    info = fs.info(path)
    if info.get("type") != "file":
        raise InputError(
            f"{url}: not a regular file ({info.get('type')}: a folder, device, fifo or a link to one); "
            "point it at the file itself"
        )
    size = int(info.get("size") or 0)
    if max_bytes is not None and size > max_bytes:
        raise InputError(f"{url}: {size} bytes, more than the {max_bytes} such a file can hold; not the right file")
    return size


def has_directories(fs: AbstractFileSystem) -> bool:
    """False for object stores, whose folders are key prefixes: never ``makedirs`` there (it creates buckets)."""
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    return not OBJECT_STORES.intersection(protocols)


def require_bucket(url: str, storage_options: dict[str, Any] | None = None) -> None:
    """Raise :class:`InputError` unless the bucket of an object-store ``url`` exists; judgecal never creates one.

    A local path or any filesystem with real directories passes (its folders are made as needed).
    """
    fs, path = open_fs(url, storage_options)
    if has_directories(fs):
        return
    bucket = path.strip("/").split("/", 1)[0]
    try:
        fs.invalidate_cache(bucket)
        found = fs.exists(bucket)
    except access_errors() as err:
        raise InputError(f"{url}: cannot access bucket {bucket!r} ({type(err).__name__}: {err})") from err
    if not found:
        raise InputError(
            f"{url}: bucket {bucket!r} does not exist (judgecal never creates buckets); create it first, or fix the URL"
        )


def strip_compression(name: str) -> tuple[str, str | None]:
    """Split ``name`` into (name without a compression suffix, compression or None), e.g. ``a.csv.gz``."""
    compression = infer_compression(name)
    if compression is None:
        return name, None
    return name.rsplit(".", 1)[0], compression


def open_input(fs: AbstractFileSystem, path: str) -> IO[bytes]:
    """Open ``path`` for reading, decompressing by its suffix (``.gz``, ``.bz2``, ``.xz``, ``.zst``, ...)."""
    return fs.open(path, "rb", compression="infer")


def read_json_file(fs: AbstractFileSystem, path: str, *, url: str | None = None) -> Any:
    """Parse one (possibly compressed) JSON document; an unreadable or malformed file is an InputError."""
    try:
        with open_input(fs, path) as fh:
            return json.load(fh)
    except DECODE_ERRORS as err:
        raise InputError(f"{url or path}: (file): cannot read JSON ({type(err).__name__}: {err})") from err


def _causes(err: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        chain.append(err)
        err = err.__cause__ or err.__context__
    return chain


def is_transient(err: BaseException) -> bool:
    """True for errors worth retrying: HTTP 5xx, throttling, timeouts and dropped connections.

    The whole cause chain is inspected, since s3fs re-raises botocore's ``ClientError`` as a plain ``OSError``.
    Missing objects, denied access and malformed requests are never transient.
    """
    boto = _botocore_errors()  # None: no s3:// filesystem was opened, so no botocore error can be here
    chain = _causes(err)
    if any(isinstance(e, FileNotFoundError | PermissionError | FileExistsError) for e in chain):
        return False
    for e in chain:
        if boto is not None and isinstance(e, boto.ClientError):
            response = getattr(e, "response", None) or {}
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            return status in TRANSIENT_STATUS or response.get("Error", {}).get("Code") in TRANSIENT_CODES
        if isinstance(e, ConnectionError | TimeoutError):
            return True
        if boto is not None and isinstance(e, boto.ConnectionError | boto.ConnectTimeoutError | boto.ReadTimeoutError):
            return True
        if type(e).__module__.startswith("aiohttp") and "Connection" in type(e).__name__:
            return True
        if isinstance(e, OSError) and e.errno in (errno.ECONNRESET, errno.ECONNREFUSED, errno.ETIMEDOUT):
            return True
    return False


def retry_transient(
    func: Callable[[], T],
    *,
    what: str,
    attempts: int = 6,
    base_delay: float = 0.2,
    max_delay: float = 10.0,
) -> T:
    """Call ``func()``; on a transient error (:func:`is_transient`) retry with exponential backoff and jitter.

    The delay before retry ``k`` (1-based) is ``min(max_delay, base_delay * 2**(k-1))`` scaled by a uniform
    factor in [0.5, 1] ("equal jitter", so concurrent writers do not retry in lockstep). ``func`` must be
    idempotent: a commit retried after a half-done attempt writes a fresh temporary object and moves it again.

    Raises
    ------
    Exception
        The last error, when it is not transient or ``attempts`` calls all failed.
    """
    for attempt in range(1, attempts + 1):
        try:
            return func()
        except Exception as err:
            if attempt == attempts or not is_transient(err):
                raise
            delay = min(max_delay, base_delay * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            log.warning(
                "%s: transient error (%s), retry %d/%d in %.2fs", what, type(err).__name__, attempt, attempts - 1, delay
            )
            time.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def fingerprint_inputs(url: str, storage_options: dict | None = None) -> dict[str, Any]:
    """A digest of every file under ``url`` (name, size, mtime/ETag): equal digests mean unchanged input.

    Raises
    ------
    InputError
        ``url`` does not exist or cannot be reached.
    """
    fs, path = open_fs(url, storage_options)
    require_exists(fs, path, url)
    files = sorted(fs.find(path, detail=True).items())
    digest = hashlib.sha256()
    total = 0
    for name, meta in files:
        stamp = meta.get("ETag") or meta.get("mtime") or meta.get("LastModified") or ""
        size = int(meta.get("size") or 0)
        total += size
        digest.update(f"{name[len(path) :]}|{size}|{stamp}\n".encode())
    return {"url": url, "files": len(files), "bytes": total, "sha256": digest.hexdigest()}
