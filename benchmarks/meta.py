"""What a results JSON records about the run that wrote it (``meta``): the command line as
run, the machine, the UTC date and the versions. ``benchmarks/render.py`` prints it above
each table generated from the file.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _memory_gib() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return None


def machine() -> str:
    """``2 cores, 24 GiB, AMD EPYC, Linux-6.1-x86_64-with-glibc2.36``: the cores this
    process may use, total memory, CPU model (where the system says) and platform."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    gib = _memory_gib()
    parts = [f"{cores} cores", *([f"{gib:.0f} GiB"] if gib else []),
             *([model] if (model := _cpu_model()) else []), platform.platform()]
    return ", ".join(parts)


def command() -> str:
    """The command line as typed, interpreter included (``sys.orig_argv``)."""
    return shlex.join(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])


def meta() -> dict[str, str | None]:
    """The ``meta`` object of a results JSON written now by this process."""
    return {"command": command(), "machine": machine(),
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "layoutsat": _version("layoutsat"), "ortools": _version("ortools"),
            "python": platform.python_version()}


def write_results(out: Path, started: dict[str, str | None], rows: list, **extra: object) -> None:
    """A runner's results JSON (its ``meta`` taken when the run ``started``), said aloud."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": started, "rows": rows, **extra}, indent=1) + "\n")
    print(f"\nwritten to {out}")
