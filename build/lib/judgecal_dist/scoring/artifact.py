"""The model ``judgecal score`` applies: a binary pipeline, or any kind of the model family, read from its run.

Reading, checking and converting model documents (the ``judgecal.calibration/v2`` file of earlier versions
included: :mod:`judgecal_dist.models.legacy`) is :mod:`judgecal_dist.models.files`'s; scoring names the result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from judgecal_dist.models.binary import BinaryPipeline
from judgecal_dist.models.files import load_model

__all__ = ["Calibration", "load_calibration"]

#: A fitted binary pipeline; the v2 file of earlier versions is read as one (one-coin + beta).
Calibration = BinaryPipeline


def load_calibration(run_url: str, *, storage_options: Mapping[str, Any] | None = None) -> Any:
    """The model of a committed run folder (its ``model/model.json``, or ``model/calibration.json`` of an
    earlier version), or of a model ``.json`` URL: :func:`judgecal_dist.models.load_model`.

    Raises
    ------
    InputError
        No such run or file, an unfinished run, a file that is not JSON, or any check of the model's kind.
    """
    return load_model(run_url, storage_options=storage_options)
