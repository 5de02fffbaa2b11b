"""The numbers a comparison is read for: per-family geometric-mean ratios of every
baseline over the reference solver, wins/ties/losses, failures, the slowest solves, and
the regression gate."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from solver.compare.task import FAILED_STATUSES, FAMILY_SOLVERS

Record = dict[str, Any]
REFERENCE = "cpsat"
TIE_TOLERANCE = 1e-9
SLOWEST = 5


def tied(a: float, b: float) -> bool:
    return abs(a - b) <= TIE_TOLERANCE * max(abs(a), abs(b), 1.0)


def succeeded(record: Record | None) -> bool:
    return record is not None and record["valid"] and record["status"] not in FAILED_STATUSES


@dataclass
class Versus:
    """How the reference solver fares against one baseline over one family's graphs."""

    family: str
    baseline: str
    graphs: int = 0
    wins: int = 0
    ties: int = 0
    losses: int = 0
    ratios: list[float] = field(default_factory=list)

    @property
    def geomean(self) -> float | None:
        """Geometric mean of baseline total / reference total (above 1: the reference wins)."""
        if not self.ratios:
            return None
        return math.exp(sum(math.log(r) for r in self.ratios) / len(self.ratios))

    def as_dict(self) -> dict[str, Any]:
        return {"family": self.family, "baseline": self.baseline, "reference": REFERENCE,
                "graphs": self.graphs, "geomean_ratio": self.geomean, "wins": self.wins,
                "ties": self.ties, "losses": self.losses}


def by_graph(records: list[Record]) -> dict[str, dict[str, Record]]:
    """graph -> solver -> record, in first-seen order."""
    table: dict[str, dict[str, Record]] = defaultdict(dict)
    for r in records:
        table[r["graph"]][r["solver"]] = r
    return dict(table)


def versus(records: list[Record]) -> list[Versus]:
    """Reference against every other solver, per family, over graphs where both succeeded."""
    table = by_graph(records)
    found: dict[tuple[str, str], Versus] = {}
    for solvers in table.values():
        ref = solvers.get(REFERENCE)
        if not succeeded(ref):
            continue
        for name, other in solvers.items():
            if name == REFERENCE or not succeeded(other):
                continue
            v = found.setdefault((ref["family"], name), Versus(ref["family"], name))
            v.graphs += 1
            a, b = ref["total_latency"], other["total_latency"]
            if tied(a, b):
                v.ties += 1
            elif a < b:
                v.wins += 1
            else:
                v.losses += 1
            if a > 0 and b > 0:
                v.ratios.append(b / a)
    return sorted(found.values(), key=lambda v: (v.family, v.baseline))


def failures(records: list[Record]) -> list[Record]:
    return [r for r in records if not succeeded(r)]


def slowest(records: list[Record], count: int = SLOWEST) -> list[Record]:
    return sorted(records, key=lambda r: r["wall_time_s"], reverse=True)[:count]


def gate(records: list[Record], baseline: str) -> list[str]:
    """Why the regression gate fails (empty: it passes): any invalid answer, or a graph
    where the reference is worse than ``baseline`` or either of the two did not finish."""
    reasons = [f"{r['graph']}: {r['solver']} returned an invalid answer"
               for r in records if r["status"] == "invalid"]
    for graph, solvers in by_graph(records).items():
        ref, base = solvers.get(REFERENCE), solvers.get(baseline)
        family = next(iter(solvers.values()))["family"]
        if (ref is None and base is None) or (family and baseline not in FAMILY_SOLVERS[family]):
            continue
        if not succeeded(ref) or not succeeded(base):
            missing = [s for s, r in ((REFERENCE, ref), (baseline, base)) if not succeeded(r)]
            reasons.append(f"{graph}: no valid answer from {' and '.join(missing)}")
        elif not tied(ref["total_latency"], base["total_latency"]) \
                and ref["total_latency"] > base["total_latency"]:
            reasons.append(f"{graph}: {REFERENCE} {ref['total_latency']:,.4f} is worse than "
                           f"{baseline} {base['total_latency']:,.4f}")
    return reasons


def summarize(records: list[Record]) -> dict[str, Any]:
    """The machine-readable summary stored beside the records."""
    return {"pairs": len(records), "graphs": len(by_graph(records)),
            "failed": len(failures(records)),
            "versus": [v.as_dict() for v in versus(records)],
            "slowest": [{k: r[k] for k in ("graph", "solver", "wall_time_s")}
                        for r in slowest(records)]}
