"""The comparison's figures, each as PNG and SVG: latency by solver per graph, the ratio
distribution, and per graph the reference answer's timeline (L1 use against capacity for a
layout plan, subgraph latencies for a fusion schedule)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from solver.compare.summary import REFERENCE, by_graph, succeeded, versus  # noqa: E402
from solver.family import Timeline  # noqa: E402

Record = dict[str, Any]
FORMATS = ("png", "svg")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._") or "graph"


def _save(fig: Figure, out: Path, stem: str) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for fmt in FORMATS:
        fig.savefig(out / f"{stem}.{fmt}", format=fmt, bbox_inches="tight", dpi=110)
        names.append(f"{out.name}/{stem}.{fmt}")
    plt.close(fig)
    return names


def latency_by_solver(records: list[Record], out: Path) -> list[str]:
    """Grouped bars: every solver's total relative to the reference's, per graph."""
    table = {g: s for g, s in by_graph(records).items() if succeeded(s.get(REFERENCE))}
    if not table:
        return []
    solvers = list(dict.fromkeys(r["solver"] for r in records))
    width = 0.8 / len(solvers)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(table) + 2), 4.5))
    for i, solver in enumerate(solvers):
        xs, ys = [], []
        for x, row in enumerate(table.values()):
            r = row.get(solver)
            if succeeded(r) and row[REFERENCE]["total_latency"] > 0:
                xs.append(x + i * width)
                ys.append(r["total_latency"] / row[REFERENCE]["total_latency"])
        ax.bar(xs, ys, width, label=solver)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(table))])
    ax.set_xticklabels([Path(g).stem for g in table], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(f"total latency / {REFERENCE}'s")
    ax.set_title("Latency by solver per graph (lower is better)")
    ax.legend(fontsize=8)
    return _save(fig, out, "latency_by_solver")


def ratio_distribution(records: list[Record], out: Path) -> list[str]:
    """Histogram of baseline / reference per baseline and family."""
    found = [v for v in versus(records) if v.ratios]
    if not found:
        return []
    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    ax.hist([v.ratios for v in found], bins=20, label=[f"{v.family}: {v.baseline}"
                                                       for v in found])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel(f"baseline total / {REFERENCE} total (above 1: {REFERENCE} faster)")
    ax.set_ylabel("graphs")
    ax.set_title("Ratio distribution")
    ax.legend(fontsize=8)
    return _save(fig, out, "ratio_distribution")


def timeline(record: Record, out: Path) -> list[str]:
    """The reference answer over its schedule for one graph, as its family draws it."""
    shown = Timeline(**record["timeline"])
    fig, ax = plt.subplots(figsize=(7.5, 3.0))
    if shown.steps:
        ax.step(*zip(*shown.steps, strict=True), where="mid", label="in use")
        if shown.capacity is not None:
            ax.axhline(shown.capacity, color="red", linestyle="--", label="capacity")
        ax.legend(fontsize=8)
    start = 0.0
    for length, label in shown.segments:
        ax.barh(0, length, left=start, edgecolor="white")
        if length > 0:
            ax.text(start + length / 2, 0, label, ha="center", va="center", fontsize=7)
        start += length
    if shown.segments:
        ax.set_yticks([])
    ax.set_xlabel(shown.xlabel)
    ax.set_ylabel(shown.ylabel)
    ax.set_title(f"{record['graph']}: {shown.title} of the {record['solver']} answer")
    return _save(fig, out, f"timeline-{slug(record['graph'])}")


def render_all(records: list[Record], out: Path) -> list[str]:
    """Every figure; returns the paths written, relative to ``out``'s parent."""
    names = latency_by_solver(records, out) + ratio_distribution(records, out)
    for solvers in by_graph(records).values():
        ref = solvers.get(REFERENCE) or next(iter(solvers.values()))
        if succeeded(ref) and ref.get("timeline"):
            names += timeline(ref, out)
    return names
