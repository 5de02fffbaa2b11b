"""One ``layoutsat`` command in a child process of its own, measured from outside: exit
status, wall time and peak RSS (``os.wait4``), start-up and exit included; stderr goes to
a file (a pipe nobody reads while the child runs could fill and block it)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


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
