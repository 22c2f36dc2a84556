"""Cluster entry point of the ensemble study: ``python jobs/ensemble.py [--set k=v ...] [--output URL]``."""

import sys

from judgecal_dist.cli import cli

if __name__ == "__main__":
    cli(["run", "ensemble", *sys.argv[1:]], prog_name="judgecal")
