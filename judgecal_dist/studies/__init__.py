"""One module per seed study; :func:`get_study` finds a study by the ``study:`` key of its config."""

from __future__ import annotations

import importlib
from types import ModuleType

from judgecal_dist.errors import ConfigError

__all__ = ["STUDIES", "get_study"]

#: study name -> module implementing the contract of :mod:`judgecal_dist.studies.base`
STUDIES: dict[str, str] = {
    "inclusion": "judgecal_dist.studies.inclusion",
    "ensemble": "judgecal_dist.studies.ensemble",
    "itc": "judgecal_dist.studies.itc",
    "budget": "judgecal_dist.studies.budget",
    "narrowband": "judgecal_dist.studies.narrowband",
    "continuous": "judgecal_dist.studies.continuous",
    "inclusion_scale": "judgecal_dist.studies.inclusion_scale",
    "regime_map": "judgecal_dist.studies.regime_map",
}


def get_study(name: str) -> ModuleType:
    """The study module called ``name``; an unknown name is a ConfigError listing the known ones."""
    if name not in STUDIES:
        raise ConfigError(f"study: unknown study {name!r}; known: {sorted(STUDIES)}")
    return importlib.import_module(STUDIES[name])
