"""Cluster entry point of the FCPS regime-map study: ``python jobs/regime_map.py [--set k=v ...] [--output URL]``."""

import sys

from judgecal_dist.cli import cli

if __name__ == "__main__":
    cli(["run", "regime_map", *sys.argv[1:]], prog_name="judgecal")
