"""Cluster entry point of the inclusion_scale study: ``python jobs/inclusion_scale.py [--set k=v ...] [--output URL]``."""

import sys

from judgecal_dist.cli import cli

if __name__ == "__main__":
    cli(["run", "inclusion_scale", *sys.argv[1:]], prog_name="judgecal")
