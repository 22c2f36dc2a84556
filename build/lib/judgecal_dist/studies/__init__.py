"""One subpackage per seed study (its contract in `study.py`, its settings in `config.py`, its report and data
beside them); :func:`get_study` finds a study module by the ``study:`` key of its config."""

from __future__ import annotations

import importlib
from types import ModuleType

from judgecal_dist.errors import ConfigError
from judgecal_dist.extras import require_extra

__all__ = ["STUDIES", "get_study"]

#: study name -> module implementing the contract of :mod:`judgecal_dist.studies.base`
STUDIES: dict[str, str] = {
    "inclusion": "judgecal_dist.studies.inclusion.study",
    "ensemble": "judgecal_dist.studies.ensemble.study",
    "itc": "judgecal_dist.studies.itc.study",
    "budget": "judgecal_dist.studies.budget.study",
    "narrowband": "judgecal_dist.studies.narrowband.study",
    "continuous": "judgecal_dist.studies.continuous.study",
    "inclusion_scale": "judgecal_dist.studies.inclusion.scale",
    "regime_map": "judgecal_dist.studies.regime_map.study",
    "fit": "judgecal_dist.studies.fit.study",
}

#: study name -> the optional dependency groups (pyproject extras) it needs beyond the base install (whose
#: studies run in memory, or on Spark when a table outgrows it and the spark extra is installed)
STUDY_EXTRAS: dict[str, tuple[str, ...]] = {
    "continuous": ("continuous", "ray"),  # flow training fans out on Ray (GPU workers)
    "itc": ("spark",),  # repeated samples are reduced on Spark
    "inclusion_scale": ("spark",),  # the one-pass engine is Spark's
}


def get_study(name: str) -> ModuleType:
    """The study module called ``name``; an unknown name, or a study whose extra is not installed, is a
    ConfigError (listing the known studies / naming the install command)."""
    if name not in STUDIES:
        raise ConfigError(f"study: unknown study {name!r}; known: {sorted(STUDIES)}")
    for extra in STUDY_EXTRAS.get(name, ()):
        require_extra(extra, f"study {name!r}")
    return importlib.import_module(STUDIES[name])
