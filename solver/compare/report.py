"""``report.md``: the per-graph table, the per-family ratios, failures and slowest solves."""

from __future__ import annotations

from typing import Any

from solver.compare.summary import (
    REFERENCE,
    by_graph,
    failures,
    slowest,
    succeeded,
    versus,
)
from solver.families import FAMILIES

Record = dict[str, Any]


def _cell(r: Record | None) -> str:
    if r is None:
        return ""
    if not succeeded(r):
        return f"**{r['status']}**"
    text = f"{r['total_latency']:,.2f}"
    if r["status"] == "optimal":
        text += " (opt)"
    elif r["gap"] is not None:
        text += f" (gap {r['gap']:.1%})"
    return text


def _per_graph(records: list[Record]) -> list[str]:
    table = by_graph(records)
    solvers = list(dict.fromkeys(r["solver"] for r in records))
    lines = ["| graph | family | " + " | ".join(solvers) + " |",
             "|---|---|" + "---|" * len(solvers)]
    for graph, row in table.items():
        family = next(iter(row.values()))["family"] or "?"
        lines.append(f"| {graph} | {family} | "
                     + " | ".join(_cell(row.get(s)) for s in solvers) + " |")
    return lines


def _ratios(records: list[Record]) -> list[str]:
    found = versus(records)
    if not found:
        return [f"No graph has valid answers from both `{REFERENCE}` and a baseline."]
    lines = [f"Ratio = baseline total / `{REFERENCE}` total over the graphs where both are "
             "valid (above 1: `cpsat` is faster). Wins/ties/losses are `cpsat`'s.", "",
             "| family | baseline | graphs | geomean ratio | wins | ties | losses |",
             "|---|---|---|---|---|---|---|"]
    for v in found:
        g = "" if v.geomean is None else f"{v.geomean:.4f}"
        lines.append(f"| {v.family} | {v.baseline} | {v.graphs} | {g} | {v.wins} | {v.ties} "
                     f"| {v.losses} |")
    return lines


def _failures(records: list[Record]) -> list[str]:
    failed = failures(records)
    if not failed:
        return ["None: every pair produced an answer the evaluator accepts."]
    lines = ["| graph | solver | status | error |", "|---|---|---|---|"]
    for r in failed:
        first = (r["error"] or "").strip().splitlines()
        lines.append(f"| {r['graph']} | {r['solver']} | {r['status']} | "
                     f"{(first[0] if first else '').replace('|', '/')[:200]} |")
    return lines


def _slowest(records: list[Record]) -> list[str]:
    lines = ["| graph | solver | wall s |", "|---|---|---|"]
    lines += [f"| {r['graph']} | {r['solver']} | {r['wall_time_s']:.2f} |"
              for r in slowest(records)]
    return lines


def render(records: list[Record], options: dict[str, Any], gate: list[str] | None,
           plots: list[str]) -> str:
    """The whole report as Markdown; ``gate`` is None when no gate was asked for."""
    units = ", ".join(f"{name}: {fam.units}" for name, fam in FAMILIES.items())
    opts = ", ".join(f"{k}={v}" for k, v in options.items())
    parts = ["# layoutsat compare report", "",
             f"{len({r['graph'] for r in records})} graphs, {len(records)} (graph, solver) "
             f"pairs; options: {opts}. Latencies are the evaluator's ({units}); "
             "(opt) = proven optimal.", "",
             "## Ratios", "", *_ratios(records), ""]
    if gate is not None:
        parts += ["## Regression gate", "",
                  "**passed**" if not gate else "**failed**:", "",
                  *[f"- {reason}" for reason in gate], ""]
    parts += ["## Per graph", "", *_per_graph(records), "",
              "## Failures", "", *_failures(records), "",
              "## Slowest solves", "", *_slowest(records), ""]
    if plots:
        parts += ["## Plots", "", *[f"![{p}]({p})" for p in plots if p.endswith(".png")], ""]
    return "\n".join(parts)
