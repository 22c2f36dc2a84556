"""judgecal-dist: calibrate panels of LLM judges on Spark + Ray, results through fsspec."""

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # The notebook API at the top level (``from judgecal_dist import CalibratedAggregator``), imported on first
    # use so that the CLI and Spark workers do not pay for it.
    if name in ("CalibratedAggregator", "PredictionPoweredMean", "vote_matrix"):
        from judgecal_dist import api

        return getattr(api, name)
    raise AttributeError(f"module 'judgecal_dist' has no attribute {name!r}")
