"""judgecal-dist: calibrate panels of LLM judges on Spark + Ray, results through fsspec."""

__version__ = "0.1.0"
