"""One module per seed study; :func:`get_study` finds a study by the ``study:`` key of its config."""

from __future__ import annotations

import importlib
from types import ModuleType

from judgecal_dist.errors import ConfigError
from judgecal_dist.extras import require_extra

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

#: study name -> the optional dependency group (pyproject extra) it needs
STUDY_EXTRAS: dict[str, str] = {"continuous": "continuous"}


def get_study(name: str) -> ModuleType:
    """The study module called ``name``; an unknown name, or a study whose extra is not installed, is a
    ConfigError (listing the known studies / naming the install command)."""
    if name not in STUDIES:
        raise ConfigError(f"study: unknown study {name!r}; known: {sorted(STUDIES)}")
    if name in STUDY_EXTRAS:
        require_extra(STUDY_EXTRAS[name], f"study {name!r}")
    return importlib.import_module(STUDIES[name])
