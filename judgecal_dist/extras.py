"""Optional dependency groups (``pip install 'judgecal-dist[<extra>]'``) and the error a missing one gives."""

from __future__ import annotations

import importlib

from judgecal_dist.errors import ConfigError

__all__ = ["EXTRAS", "require_extra"]

# Extra -> the import names a feature needs from it (pyproject.toml [project.optional-dependencies]).
EXTRAS: dict[str, tuple[str, ...]] = {
    "spark": ("pyspark",),
    "ray": ("ray",),
    "cluster": ("pyspark", "ray", "s3fs"),
    "continuous": ("torch", "torchdiffeq", "numpyro", "jax", "arviz_stats", "safetensors"),
    "tracking": ("mlflow",),  # the mlflow-skinny distribution installs the mlflow package
}


def require_extra(extra: str, feature: str) -> None:
    """Raise a :class:`ConfigError` naming the install command when a module of ``extra`` cannot be imported."""
    missing = []
    for name in EXTRAS[extra]:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise ConfigError(
            f"{feature}: needs the '{extra}' extra, not installed here (missing {', '.join(missing)}): "
            f"pip install 'judgecal-dist[{extra}]'"
        )
