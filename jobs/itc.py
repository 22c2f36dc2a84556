"""Cluster entry point of the itc study: ``python jobs/itc.py [--set k=v ...] [--output URL]``."""

import sys

from judgecal_dist.cli import cli

if __name__ == "__main__":
    cli(["run", "itc", *sys.argv[1:]], prog_name="judgecal")
