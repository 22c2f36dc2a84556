"""fsspec access to local paths, ``file://`` and ``s3://`` URLs, with errors that name the URL.

The S3 endpoint comes from ``storage_options`` (``{"endpoint_url": ...}`` or ``{"client_kwargs": {...}}``) or from
the standard ``AWS_ENDPOINT_URL`` environment variable, which botocore (under s3fs) reads itself; credentials come
only from the AWS chain and are never logged.
"""

from __future__ import annotations

import json
from typing import IO, Any

import fsspec
from fsspec import AbstractFileSystem
from fsspec.utils import infer_compression

from judgecal_dist.errors import InputError

__all__ = ["open_fs", "require_exists", "open_input", "read_json_file", "join_path", "strip_compression"]


def _access_errors() -> tuple[type[BaseException], ...]:
    # Remote filesystems raise their client's own errors for missing credentials or unreachable endpoints
    # (botocore's are not OSErrors); they are input problems of the URL, reported as such.
    errors: list[type[BaseException]] = [OSError]
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        return tuple(errors)
    return (*errors, BotoCoreError, ClientError)


#: Exceptions raised while reaching a URL (local or remote) that mean "this input cannot be accessed".
ACCESS_ERRORS: tuple[type[BaseException], ...] = _access_errors()

#: Exceptions a corrupt, truncated or unreadable input file raises while it is decoded.
DECODE_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, ValueError, UnicodeDecodeError)


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
    """
    try:
        return fsspec.core.url_to_fs(str(url), **(storage_options or {}))
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
    except ACCESS_ERRORS as err:  # e.g. an S3 bucket that cannot be reached, or no credentials
        raise InputError(f"{url}: cannot access ({type(err).__name__}: {err})") from err
    if not found:
        raise InputError(f"{url}: no such file or directory")


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
