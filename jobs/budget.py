"""Cluster entry point of the budget study: ``python jobs/budget.py [--set k=v ...] [--output URL]``."""

import sys

from judgecal_dist.cli import cli

if __name__ == "__main__":
    cli(["run", "budget", *sys.argv[1:]], prog_name="judgecal")
