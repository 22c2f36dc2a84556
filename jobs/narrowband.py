"""Cluster entry point of the narrow-band study: ``python jobs/narrowband.py [--set k=v ...] [--output URL]``."""

import sys

from judgecal_dist.cli import cli

if __name__ == "__main__":
    cli(["run", "narrowband", *sys.argv[1:]], prog_name="judgecal")
