"""Optional dependency groups (``pip install 'judgecal-dist[<extra>]'``) and the error a missing one gives; names a
package re-exports imported on first use."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from typing import Any

from judgecal_dist.errors import ConfigError

__all__ = ["EXTRAS", "has_extra", "require_extra", "lazy_exports"]

# Extra -> the import names a feature needs from it (pyproject.toml [project.optional-dependencies]).
EXTRAS: dict[str, tuple[str, ...]] = {
    "spark": ("pyspark",),
    "ray": ("ray",),
    "cluster": ("pyspark", "ray", "s3fs"),
    "continuous": ("torch", "torchdiffeq", "numpyro", "jax", "arviz_stats", "safetensors"),
    "tracking": ("mlflow", "sqlalchemy", "alembic"),  # mlflow-skinny installs mlflow; the other two: sqlite stores
}


def require_extra(extra: str, feature: str, *, modules: tuple[str, ...] | None = None) -> None:
    """Raise a :class:`ConfigError` naming the install command when a module of ``extra`` cannot be imported.

    ``modules``: the ones of the extra this feature needs (default: all of them), e.g. only s3fs for an ``s3://``
    URL, which the cluster extra installs with both engines.
    """
    missing = []
    for name in modules or EXTRAS[extra]:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise ConfigError(
            f"{feature}: needs the '{extra}' extra, not installed here (missing {', '.join(missing)}): "
            f"pip install 'judgecal-dist[{extra}]'"
        )


def has_extra(extra: str) -> bool:
    """Whether every module of ``extra`` is installed (found, not imported: Ray's import alone takes a second)."""
    for name in EXTRAS[extra]:
        try:
            if importlib.util.find_spec(name) is None:
                return False
        except (ImportError, ValueError):  # a broken or refused install counts as absent
            return False
    return True


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` (PEP 562) that imports each re-exported name from its home module on first
    use, so that importing one light module of a package does not import every sibling (sklearn, ``scipy.stats``).

    Parameters
    ----------
    package : str
        The package's ``__name__`` (its namespace caches each name once imported).
    homes : mapping of str to str
        Re-exported name -> the module that defines it.
    """

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(homes[name]), name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
