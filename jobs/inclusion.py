"""Cluster entry point of the inclusion study: ``python jobs/inclusion.py [--set k=v ...] [--output URL]``."""

import sys

from judgecal_dist.cli import cli

if __name__ == "__main__":
    cli(["run", "inclusion", *sys.argv[1:]], prog_name="judgecal")
