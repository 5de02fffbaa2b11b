"""One ``layoutsat`` command in a child process of its own, measured from outside: exit
status, wall time and peak RSS (``os.wait4``), start-up and exit included; stderr goes to
a file (a pipe nobody reads while the child runs could fill and block it)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.arguments import at_least, positive


@dataclass(frozen=True)
class CliRun:
    ok: bool
    wall_s: float
    peak_mb: float
    stderr: str


def run_cli(args: list[str], checkout: Path, scratch: Path) -> CliRun:
    """``layoutsat ARGS`` with ``checkout``'s code (its ``app.cli``), in ``checkout``."""
    command = [sys.executable, "-c", "from app.cli import main; main()", *args]
    errors = scratch / "stderr.txt"
    with errors.open("wb") as sink:
        started = time.perf_counter()
        child = subprocess.Popen(command, cwd=checkout, stdout=subprocess.DEVNULL, stderr=sink,
                                 env={**os.environ, "PYTHONPATH": str(checkout)})
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
    return CliRun(os.waitstatus_to_exitcode(status) == 0, wall, usage.ru_maxrss / 1024,
                  errors.read_text(errors="replace"))


def solve_in_child(args: list[str], checkout: Path) -> tuple[dict | None, dict]:
    """``layoutsat layout solve ARGS -o PLAN`` in a measured child: the plan (None when
    it failed) and the run's record (wall, peak RSS, and the error's last lines)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "plan.json"
        run = run_cli(["layout", "solve", *args, "-o", str(out)], checkout, Path(tmp))
        record: dict = {"wall_s": run.wall_s, "peak_mb": run.peak_mb}
        if not run.ok or not out.exists():
            lines = [line.strip() for line in run.stderr.splitlines() if line.strip()]
            return None, {"error": " ".join(lines[-2:])[:300] if lines else "no plan",
                          **record}
        return json.loads(out.read_text()), record


def graph_files(parser: argparse.ArgumentParser, graphs: list[Path]) -> list[Path]:
    """The graph files named, folders expanded (sorted); a missing one is a usage error."""
    missing = [str(p) for p in graphs if not p.exists()]
    if missing:
        parser.error(f"no such graph or folder: {', '.join(missing)}")
    return [f for p in graphs for f in (sorted(p.glob("*.json")) if p.is_dir() else [p])]


def add_suite_arguments(parser: argparse.ArgumentParser, graphs: list[Path],
                        time_limit: float, baseline_limit: float) -> None:
    """The options every suite runner takes: limits, workers, graphs, a filter, the JSON."""
    parser.add_argument("--time-limit", type=positive, default=time_limit)
    parser.add_argument("--baseline-limit", type=positive, default=baseline_limit)
    parser.add_argument("--workers", type=at_least(1), default=2)
    parser.add_argument("--graphs", type=Path, nargs="*", default=graphs,
                        help="graph files or folders of them")
    parser.add_argument("--only", nargs="*", help="graph names (file stems) to run")
    parser.add_argument("--out", type=Path, default=None)
