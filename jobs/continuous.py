"""Cluster entry point of the continuous study: ``python jobs/continuous.py [--set k=v ...] [--output URL]``."""

import sys

from judgecal_dist.cli import cli

if __name__ == "__main__":
    cli(["run", "continuous", *sys.argv[1:]], prog_name="judgecal")
