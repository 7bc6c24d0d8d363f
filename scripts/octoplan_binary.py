"""The octoplan binary the Python scripts run.

find_octoplan(explicit, tool) returns `explicit` (a --octoplan PATH) when given, else the first
build*/bin/octoplan of the checkout, in name order (build, build-release, ...); it exits with a
message naming the tool when the path given is not an executable file or no build has one.
run_with_report(cmd, report, tool) runs an octoplan command that writes `--report REPORT` and returns
that report's data and the wall time; it exits with octoplan's message when the command fails, and
names the command when it exits 0 without a readable report.

The scripts import it from their own folder (scripts/) with bytecode writing off, as
atomic_write.py.
"""

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_octoplan(explicit, tool):
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        sys.exit(f"{tool}: --octoplan {explicit}: not an executable file")
    for d in sorted(os.listdir(ROOT)):
        path = os.path.join(ROOT, d, "bin", "octoplan")
        if d.startswith("build") and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    sys.exit(f"{tool}: no octoplan binary found (build it: cmake --build build, or pass --octoplan PATH)")


def run_with_report(cmd, report, tool):
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - start
    if proc.returncode != 0:
        sys.exit(f"{tool}: {' '.join(cmd)} failed:\n{proc.stderr}")
    try:
        with open(report) as f:
            return json.load(f), wall
    except (OSError, ValueError) as e:
        sys.exit(f"{tool}: {' '.join(cmd)} exited 0 but wrote no readable --report ({e})")
