"""Render the tables of BENCHMARKS.md from the results JSONs in ``benchmarks/results/``.

    .venv/bin/python benchmarks/render.py            # rewrite every table in place
    .venv/bin/python benchmarks/render.py --check    # exit 1 naming each stale table

BENCHMARKS.md is hand-written text around generated tables. Each table lives between
``<!-- table: NAME -->`` and ``<!-- /table -->``; the renderer replaces what is between
them with one line of provenance (the ``meta`` of the JSON: command, machine, date,
versions) and the table that ``TABLES[NAME]`` makes of its JSON. Text outside the markers
is never touched. The runners print their tables with the same functions.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from math import exp, log
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = ROOT / "BENCHMARKS.md"
RESULTS = ROOT / "benchmarks" / "results"
OPEN = re.compile(r"^<!-- table: ([\w-]+) -->$")
CLOSE = "<!-- /table -->"

Row = dict[str, Any]


def geomean(values: list[float]) -> float:
    return exp(sum(log(v) for v in values) / len(values)) if values else float("nan")


def half_up(value: float, places: int) -> str:
    """``value`` to ``places`` decimals, halves rounded up as written (2.605 -> 2.61; the
    float formatting rounds the binary value, 2.60): for numbers already rounded in the
    JSON."""
    return str(Decimal(repr(value)).quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP))


# --- layout: benchmarks/layout.py ------------------------------------------------------

LAYOUT_COLUMNS = ("graph", "ops", "tensors", "device", "solver", "total_latency_us", "vs dram",
                  "best baseline / this", "status", "gap", "L1 activations", "L1 act. bytes",
                  "reshards", "reloads", "spills", "wall_s")


def layout_table(rows: list[Row]) -> str:
    """One line per (graph, preset, solver) of ``benchmarks/layout.py``."""
    lines = ["| " + " | ".join(LAYOUT_COLUMNS) + " |", "|" + "---|" * len(LAYOUT_COLUMNS)]
    for r in rows:
        lines.append(
            f"| {r['graph']} | {r['ops']} | {r['tensors']} | {r['device']} | {r['solver']} | "
            f"{r['total_latency_us']:,.1f} | "
            f"{r['vs_dram']:.2f}x | {r['vs_best_baseline']:.3f} | {r['status']} | "
            f"{'' if r['gap'] is None else format(r['gap'], '.1%')} | "
            f"{r['activations_in_l1']}/{r['activations']} | "
            f"{r['activation_bytes_in_l1']:.0%} | "
            f"{r['reshards']} | {r['reloads']} | {r['spills']} | {r['wall_time_s']:.2f} |")
    return "\n".join(lines)


def relaxation_table(rows: list[Row]) -> str:
    """One line per (graph, preset) of ``benchmarks/relaxation.py``."""
    lines = ["| graph | device | per-op floor | CP-SAT bound (plain search) | LP bound (CLP) | "
             "cpsat | status | cpsat wall_s |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lp = "-" if r["lp_bound_us"] is None else f"{r['lp_bound_us']:.2f}"
        lines.append(f"| {r['graph']} | {r['device']} | {r['floor_us']:.2f} | "
                     f"{r['plain_bound_us']:.2f} | {lp} | {r['cpsat_us']:.2f} | "
                     f"{r['status']} | {r['wall_s']:.2f} |")
    return "\n".join(lines)


def segments_table(rows: list[Row]) -> str:
    """One line per schedule of segment sizes of ``benchmarks/segments.py``."""
    lines = ["| sizes | best baseline | segments | gain | rounds | improved | wall_s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {','.join(map(str, r['sizes']))} | {r['best_baseline_us']:,.2f} | "
                     f"{r['segments_us']:,.2f} | {r['gain_pct']:.2f}% | {r['rounds']} | "
                     f"{r['improved']} | {r['wall_s']:.1f} |")
    return "\n".join(lines)


def proofs_table(rows: list[Row]) -> str:
    """``benchmarks/proofs.py``: per (graph, preset) cpsat before and after a change."""
    labels = [label for label in ("before", "after") if rows and label in rows[0]]
    head = ["graph", "ops", "device"]
    for label in labels:
        head += [f"{label}: total", "bound", "gap", "wall", "peak RSS"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ops = next(r[label]["ops"] for label in labels if "ops" in r[label])
        cells = [r["graph"], str(ops), r["device"]]
        for label in labels:
            run = r[label]
            if "error" in run:
                cells += [run["error"], "", "", "", ""]
                continue
            bound = "none" if run["bound_us"] is None else f"{run['bound_us']:,.1f}"
            cells += [f"{run['total_us']:,.1f}", bound,
                      _percent(run["gap"], 2), f"{run['wall_s']:.1f} s",
                      f"{run['peak_mb']:,.0f} MB"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def gap_split_table(rows: list[Row]) -> str:
    """``benchmarks/gap_split.py``: each gap split into the cuts' share and the rest."""
    lines = ["| graph | device | ops | limit | found | bound reported | whole-graph LP | "
             "gap | of it: cuts | of it: search + integrality | whole LP time |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    def share(value: float | None) -> str:
        # bounds count whole nanoseconds per term, so one can sit a few ns above a total
        return _percent(None if value is None else max(0.0, value), 2)

    for r in rows:
        whole = "-" if r["whole_lp_us"] is None else f"{r['whole_lp_us']:,.1f}"
        took = "-" if r["whole_lp_us"] is None else f"{r['whole_s']:.1f} s"
        lines.append(f"| {r['graph']} | {r['device']} | {r['ops']} | {r['time_limit_s']:g} s | "
                     f"{r['found_us']:,.1f} | {r['parts_us']:,.1f} | {whole} | "
                     f"{share(r['gap'])} | {share(r['cuts_share'])} | "
                     f"{share(r['rest_share'])} | {took} |")
    return "\n".join(lines)


def address_table(rows: list[Row]) -> str:
    """``benchmarks/address.py``: how each plan's L1 buffers were placed, per method, then
    the plans that needed more than the top-down order."""
    methods: dict[str, list[Row]] = {}
    for r in rows:
        methods.setdefault(r["method"], []).append(r)
    lines = ["| method | plans | buffers (max) | fullest step by sum (max) | place s (max) |",
             "|---|---|---|---|---|"]
    for method, group in sorted(methods.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"| {method} | {len(group)} | {max(r['buffers'] for r in group):,} | "
                     f"{max(r['sum_peak'] for r in group):.1%} | "
                     f"{max(r['place_s'] for r in group):.3f} |")
    hard = [r for r in rows if r["method"] != "top-down"]
    if hard:
        lines += ["", "| graph | device | solver | buffers | fullest step by sum | method | "
                  "place s |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['graph']} | {r['device']} | {r['solver']} | {r['buffers']} | "
                  f"{r['sum_peak']:.1%} | {r['method']} | {r['place_s']:.3f} |" for r in hard]
    return "\n".join(lines)


def order_table(rows: list[Row]) -> str:
    """``benchmarks/order.py``: cpsat on the graph's order and with the order search."""
    lines = ["| graph | device | ops | given order us | searched us | given / searched | "
             "reordered | gap (given, searched) | status (given, searched) | "
             "wall s (given, searched) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        gaps = f"{_percent(r.get('given_gap'), 2)}, {_percent(r.get('search_gap'), 2)}"
        lines.append(f"| {r['graph']} | {r['device']} | {r['ops']} | {r['given_us']:,.2f} | "
                     f"{r['search_us']:,.2f} | {r['given_us'] / r['search_us']:.4f} | "
                     f"{'yes' if r['reordered'] else 'no'} | {gaps} | {r['given_status']}, "
                     f"{r['search_status']} | {r['given_wall_s']:.1f}, {r['search_wall_s']:.1f} |")
    return "\n".join(lines)


def calibration_table(groups: list[Row]) -> str:
    """One line per group of published matmuls of ``benchmarks/calibrate.py``."""
    lines = ["| device, source, config, dtype/fidelity | matmuls | model / measured (geomean) | "
             "min | max |", "|---|---|---|---|---|"]
    for g in groups:
        lines.append(f"| {g['group']} | {g['count']} | {g['geomean_ratio']:.2f} | "
                     f"{g['min_ratio']:.2f} | {g['max_ratio']:.2f} |")
    return "\n".join(lines)


# --- fusion: benchmarks/fusion.py ------------------------------------------------------

FUSION_MODES = ("per_native_k", "per_op")
NEAR_BOUND = 1.02
"""Greedy within 2% of the lower bound: scheduling quality barely matters there."""


def fusion_table(rows: list[Row]) -> str:
    """One line per (benchmark, mode) of ``benchmarks/fusion.py``, then per mode the
    geometric mean of greedy/cpsat where greedy is more than 2% above the bound."""
    out = ["| benchmark | mode | ops | max(compute, I/O) | lower bound | unfused | greedy | "
           "cpsat | cpsat status | unfused/greedy | greedy/bound | greedy/cpsat | cpsat/bound | "
           "gap | greedy s | cpsat s |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cover = {True: "", False: " (partial)", None: " (none)"}[r["cover_complete"]]
        out.append(f"| {r['benchmark']} | {r['mode']} | {r['ops']} | "
                   f"{r['simple_bound']:,.1f} | {r['bound']:,.1f}{cover} | "
                   f"{r['unfused']:,.1f} | {r['greedy']:,.1f} | {r['cpsat']:,.1f} | "
                   f"{r['status']} | {r['unfused'] / r['greedy']:.3f} | "
                   f"{r['greedy'] / r['bound']:.3f} | {r['greedy/cpsat']:.4f} | "
                   f"{r['cpsat'] / r['bound']:.3f} | {r['gap']:.1%} | {r['greedy_s']:.1f} | "
                   f"{r['cpsat_s']:.1f} |")
    for mode in FUSION_MODES:
        far = [r for r in rows if r["mode"] == mode and r["greedy"] > NEAR_BOUND * r["bound"]]
        near = [r for r in rows if r["mode"] == mode and r not in far]
        out.append(f"\n{mode}: geomean greedy/cpsat over benchmarks where greedy is > 2% above "
                   f"the bound ({', '.join(r['benchmark'] for r in far)}): "
                   f"{geomean([r['greedy/cpsat'] for r in far]):.4f}; elsewhere cpsat/bound "
                   f"at most {max((r['cpsat'] / r['bound'] for r in near), default=1):.4f}")
    return "\n".join(out)


def speed_table(speed: Row) -> str:
    """The evaluator's and the scorer's speed (``speed`` of ``fusion.json``)."""
    e, s = speed["evaluation"], speed["scoring"]
    return "\n".join([
        "| measurement | result | target |", "|---|---:|---:|",
        f"| full evaluation of the greedy solution of the largest benchmark ({e['benchmark']}: "
        f"{e['ops']} ops, {e['subgraphs']} subgraphs), median of {e['repeats']}, cold caches | "
        f"{e['median_s']:.3f} s | < 1 s |",
        f"| scoring one random connected subgraph at one random legal granularity, cold cache, "
        f"mean over {s['samples']} samples from all benchmarks | {s['mean_ms']:.2f} ms | "
        f"well under 1 ms |"])


# --- fusion suite: benchmarks/fusion_suite.py -------------------------------------------

def _percent(value: float | None, places: int = 1) -> str:
    return "-" if value is None else f"{value:.{places}%}"


def _span(pair: list, percent: bool = False) -> str:
    """``[low, high]`` as ``low-high`` (percentages without decimals)."""
    return "-".join(_percent(v, 0) if percent else str(v) for v in pair)


def fusion_suite_tables(data: Row) -> str:
    """The summary of ``benchmarks/fusion_suite.py`` per mode (headline numbers, the gap
    distribution of greedy and of cpsat to cpsat's bound), then one line per (family,
    mode)."""
    summary = data["summary"]
    reading = " under the TeamKorea reading" if data.get("semantics") == "teamkorea" else ""
    out = [f"cpsat at {data['time_limit_s']:g} s with {data['workers']} workers{reading}; "
           f"suite seed {data['seed']}, {data['count']} problems generated.", "",
           "| mode | problems | ops | MatMul share | geomean greedy/cpsat | cpsat optimal | "
           "greedy > 2% above bound | cpsat improves there | cpsat worse than greedy | "
           "errors | greedy s max | cpsat s max |", "|---|---:|---|---|---:|---:|---:|---:|---:|"
           "---:|---:|---:|"]

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    for mode, s in summary.items():
        out.append(f"| {mode} | {s['problems']} | {_span(s['ops'])} | "
                   f"{_span(s['matmul_share'], percent=True)} | "
                   f"{s['geomean_greedy_cpsat']:.4f} | {s['optimal']} | {s['greedy_far']} | "
                   f"{s['cpsat_improves_far']} | {s['cpsat_worse']} | {s['errors']} | "
                   f"{seconds(s['greedy_s_max'])} | {seconds(s['cpsat_s_max'])} |")
    bins = list(next(iter(summary.values()))["cpsat_gap"]["counts"])
    out += ["", "Gap to cpsat's lower bound, (total - bound) / total: number of problems per "
            "range, median and max.", "",
            "| mode | schedule | " + " | ".join(bins) + " | median | max |",
            "|---|---|" + "---:|" * (len(bins) + 2)]
    for mode, s in summary.items():
        for schedule in ("greedy", "cpsat"):
            gaps = s[f"{schedule}_gap"]
            out.append(f"| {mode} | {schedule} | "
                       + " | ".join(str(n) for n in gaps["counts"].values())
                       + f" | {_percent(gaps['median'])} | {_percent(gaps['max'])} |")
    out += ["", "| family | mode | problems | ops | MatMul share | geomean greedy/cpsat | "
            "cpsat optimal | cpsat median gap | cpsat max gap | greedy > 2% above bound | "
            "cpsat improves there |", "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for mode, s in summary.items():
        for name, f in s["families"].items():
            out.append(f"| {name} | {mode} | {f['problems']} | {_span(f['ops'])} | "
                       f"{_span(f['matmul_share'], percent=True)} | "
                       f"{f['geomean_greedy_cpsat']:.4f} | {f['optimal']} | "
                       f"{_percent(f['cpsat_gap']['median'])} | "
                       f"{_percent(f['cpsat_gap']['max'])} | "
                       f"{f['greedy_far']} | {f['cpsat_improves_far']} |")
    return "\n".join(out)


# --- the TeamKorea reading: benchmarks/teamkorea.py --------------------------------------

def teamkorea_table(rows: list[Row]) -> str:
    """Greedy and cpsat under the TeamKorea reading against TeamKorea's published totals,
    with cpsat's bound and status under that reading."""
    out = ["| benchmark | ops | limit s | TeamKorea (published) | greedy | cpsat | "
           "cpsat / TeamKorea | cpsat bound | cpsat status | greedy s | cpsat s |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        ratio = "-" if r["teamkorea"] is None else f"{r['cpsat'] / r['teamkorea']:.4f}"
        published = "-" if r["teamkorea"] is None else f"{r['teamkorea']:,}"
        out.append(f"| {r['benchmark']} | {r['ops']} | {r['limit_s']:g} | {published} | "
                   f"{r['greedy']:,.1f} | {r['cpsat']:,.1f} | {ratio} | "
                   f"{r['bound']:,.1f} | {r['status']} | "
                   f"{r['greedy_s']:.1f} | {r['cpsat_s']:.1f} |")
    return "\n".join(out)


def process_time_table(data: Row) -> str:
    """Whole-process wall time and total per problem, reading and checkout
    (``process_time.py``); a dash where a run wrote no valid solution."""
    labels = data["checkouts"]
    out = ["| problem | ops | reading | limit s | "
           + " | ".join(f"{label} wall s | {label} total" for label in labels) + " |",
           "|---|---:|---|---:|" + "---:|---:|" * len(labels)]
    for r in data["rows"]:
        cells = []
        for label in labels:
            run = r["runs"][label]
            total = "-" if run["total"] is None else f"{run['total']:,.1f}"
            cells.append(f"{run['wall_s']:.2f} | {total}")
        out.append(f"| {r['problem']} | {r['ops']} | {r['semantics']} | {r['limit_s']:g} | "
                   + " | ".join(cells) + " |")
    return "\n".join(out)


def process_time_summary(data: Row) -> str:
    """Per reading and checkout of ``process_time.py``: the slowest whole process, how
    many runs wrote no valid solution, and each checkout's totals against the first's
    (geomean, how many lower and higher)."""
    labels = data["checkouts"]
    out = ["| reading | checkout | runs | slowest s | no valid answer | "
           f"geomean total / {labels[0]} | lower | higher |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for semantics in dict.fromkeys(r["semantics"] for r in data["rows"]):
        rows = [r for r in data["rows"] if r["semantics"] == semantics]
        for label in labels:
            runs = [(r["runs"][labels[0]]["total"], r["runs"][label]) for r in rows]
            pairs = [(first, run["total"]) for first, run in runs
                     if first is not None and run["total"] is not None]
            ratio = exp(sum(log(t / f) for f, t in pairs) / len(pairs)) if pairs else 1.0
            out.append(
                f"| {semantics} | {label} | {len(rows)} | "
                f"{max(run['wall_s'] for _, run in runs):.2f} | "
                f"{sum(run['total'] is None for _, run in runs)} | {ratio:.4f} | "
                f"{sum(t < f for f, t in pairs)} | {sum(t > f for f, t in pairs)} |")
    return "\n".join(out)


# --- service load: benchmarks/load.py ----------------------------------------------------

def load_table(data: Row) -> str:
    """One line per run of ``benchmarks/load.py`` and their medians."""
    lines = ["| run | solves | failures | wall s | solve p50 s | solve p99 s | healthz samples | "
             "healthz p50 ms | healthz p99 ms | healthz max ms |",
             "|---|---|---|---|---|---|---|---|---|---|"]

    def timings(r: Row) -> str:
        return (f"{half_up(r['wall_s'], 2)} | {half_up(r['solve_p50_s'], 2)} | "
                f"{half_up(r['solve_p99_s'], 2)}")

    def health(r: Row) -> str:
        return " | ".join(half_up(r[k], 1) for k in ("health_p50_ms", "health_p99_ms",
                                                     "health_max_ms"))

    for i, r in enumerate(data["runs"], 1):
        lines.append(f"| {i} | {r['solves']} | {r['failures']} | {timings(r)} | "
                     f"{r['health_samples']} | {health(r)} |")
    m = data["median"]
    lines.append(f"| median | | {data['failures']} | {timings(m)} | | {health(m)} |")
    return "\n".join(lines)


# --- iopddl: benchmarks/iopddl.py ---------------------------------------------------------

def iopddl_table(rows: list[Row]) -> str:
    """One line per (benchmark, timeout) of ``benchmarks/iopddl.py``."""
    lines = ["| benchmark | solver | timeout s | nodes | edges | reduced nodes | reduced edges | "
             "valid | cost | best published | cost / best | bound | gap | status | wall s | "
             "peak RSS MiB |", "|" + "---|" * 16]

    def number(value: Any) -> str:
        return "-" if value is None else f"{value:,}"

    for r in rows:
        ratio = "-" if r["ratio"] is None else (f"{r['ratio']:.6f}" if r["ratio"] < 100
                                                 else f"{r['ratio']:.2e}")
        gap = "-" if r["gap"] is None else f"{r['gap']:.2%}"
        lines.append(
            f"| {r['benchmark']} | {r.get('solver', 'cpsat')} | {r['timeout_s']:g} | "
            f"{number(r['nodes'])} | "
            f"{number(r['edges'])} | {number(r['reduced_nodes'])} | "
            f"{number(r['reduced_edges'])} | {'yes' if r['valid'] else 'no'} | "
            f"{number(r['cost'])} | {number(r['best_published'])} | {ratio} | "
            f"{number(r['bound'])} | {gap} | {r['status']} | {r['wall_s']:.2f} | "
            f"{number(r['peak_rss_mib'])} |")
    return "\n".join(lines)


# --- compare: `layoutsat compare` (results.json: summary and records) ---------------------

def compare_tables(data: Row) -> str:
    """The ratios (``summary.versus``), the per-graph totals (``records``, in the format of
    ``solver/compare/report.py``) and the slowest solves (``summary.slowest``)."""
    lines = ["| family | baseline | graphs | geomean ratio | wins | ties | losses |",
             "|---|---|---|---|---|---|---|"]
    for v in data["summary"]["versus"]:
        lines.append(f"| {v['family']} | {v['baseline']} | {v['graphs']} | "
                     f"{v['geomean_ratio']:.4f} | {v['wins']} | {v['ties']} | {v['losses']} |")
    graphs: dict[str, dict[str, Row]] = {}
    for r in data["records"]:
        graphs.setdefault(r["graph"], {})[r["solver"]] = r
    solvers = list(dict.fromkeys(r["solver"] for r in data["records"]))

    def cell(r: Row | None) -> str:
        if r is None:
            return ""
        text = f"{r['total_latency']:,.2f}"
        if r["status"] == "optimal":
            return text + " (opt)"
        return text if r["gap"] is None else text + f" (gap {r['gap']:.1%})"

    lines += ["", "| graph | family | " + " | ".join(solvers) + " |",
              "|---|---|" + "---|" * len(solvers)]
    for graph, row in graphs.items():
        family = next(iter(row.values()))["family"]
        lines.append(f"| {graph} | {family} | " + " | ".join(cell(row.get(s)) for s in solvers)
                     + " |")
    lines += ["", "Slowest solves:", "", "| graph | solver | wall s |", "|---|---|---|"]
    lines += [f"| {r['graph']} | {r['solver']} | {r['wall_time_s']:.2f} |"
              for r in data["summary"]["slowest"]]
    return "\n".join(lines)


# --- mesh: benchmarks/mesh.py ----------------------------------------------------------

MESH_BASELINES = ("replicate", "megatron", "autoshard")


def _mesh_cell(run: Row) -> str:
    if "error" in run:
        return "does not fit" if "mesh.dram_capacity" in run["error"] or \
            "per-chip DRAM" in run["error"] else "error"
    return f"{run['total_us']:,.0f}"


def mesh_table(rows: list[Row]) -> str:
    """``benchmarks/mesh.py``: per (graph, mesh) each baseline's total, cpsat's total, bound
    and gap, best baseline / cpsat, collectives, DRAM per chip, wall and peak memory."""
    head = ["graph", "mesh", *MESH_BASELINES, "cpsat", "bound", "gap", "best baseline / cpsat",
            "collectives (cpsat)", "DRAM/chip", "cpsat wall", "peak RSS"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        c = r["cpsat"]
        totals = [r[b]["total_us"] for b in MESH_BASELINES if "total_us" in r[b]]
        cells = [r["graph"], r["mesh"], *(_mesh_cell(r[b]) for b in MESH_BASELINES),
                 _mesh_cell(c)]
        if "error" in c:
            cells += ["", "", "", "", "", f"{c['wall_s']:.1f} s", f"{c['peak_mb']:,.0f} MB"]
        else:
            ratio = f"{min(totals) / c['total_us']:.2f}x" if totals else "no baseline fits"
            kinds = ", ".join(f"{n} {k}" for k, n in sorted(c["collectives"].items())) or "none"
            bound = "none" if c["bound_us"] is None else f"{c['bound_us']:,.0f}"
            cells += [bound, _percent(c["gap"]), ratio, kinds, f"{c['dram_gib']:.2f} GiB",
                      f"{c['wall_s']:.1f} s", f"{c['peak_mb']:,.0f} MB"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- tx8: benchmarks/tx8.py ------------------------------------------------------------


def _tx8_cell(run: Row) -> str:
    if "error" in run:
        return "does not fit the DDR" if "DDR holds" in run["error"] else "error"
    return f"{run['total_us']:,.1f}"


def tx8_table(rows: list[Row]) -> str:
    """``benchmarks/tx8.py``: per model groupcost's and cpsat's totals, groupcost / cpsat,
    cpsat's bound and gap, groups (of several ops), conversions, SPM peak, wall, peak RSS;
    then the geometric mean of the ratio."""
    head = ["graph", "ops", "groupcost", "cpsat", "groupcost / cpsat", "bound", "gap",
            "status", "groups (multi-op)", "conversions", "SPM peak", "groupcost wall",
            "cpsat wall", "peak RSS"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    ratios = []
    for r in rows:
        g, c = r["groupcost"], r["cpsat"]
        if "error" in g or "error" in c:
            cells = [r["graph"], "", _tx8_cell(g), _tx8_cell(c)]
            lines.append("| " + " | ".join(cells + [""] * (len(head) - len(cells))) + " |")
            continue
        ratios.append(g["total_us"] / c["total_us"])
        bound = "none" if c["bound_us"] is None else f"{c['bound_us']:,.1f}"
        cells = [r["graph"], str(c["ops"]), _tx8_cell(g), _tx8_cell(c),
                 f"{ratios[-1]:.3f}x", bound, _percent(c["gap"], 2), c["status"],
                 f"{c['groups']} ({c['multi_op_groups']})",
                 f"{c['conversions']} ({c['conversion_us']:,.1f} us)",
                 f"{c['spm_peak_kib']:,.0f} KiB", f"{g['wall_s']:.1f} s", f"{c['wall_s']:.1f} s",
                 f"{c['peak_mb']:,.0f} MB"]
        lines.append("| " + " | ".join(cells) + " |")
    if ratios:
        lines += ["", f"Geometric mean groupcost / cpsat: {geomean(ratios):.3f}x over "
                  f"{len(ratios)} models."]
    return "\n".join(lines)


# --- the registry and the markers -------------------------------------------------------

@dataclass(frozen=True)
class Table:
    results: str
    """The JSON's name in the results directory."""
    render: Callable[[Row], str]


TABLES = {
    "layout": Table("layout.json", lambda d: layout_table(d["rows"])),
    "relaxation": Table("relaxation.json", lambda d: relaxation_table(d["rows"])),
    "fusion": Table("fusion.json", lambda d: fusion_table(d["rows"])),
    "fusion-speed": Table("fusion.json", lambda d: speed_table(d["speed"])),
    "fusion-perturbed": Table("fusion-perturbed.json", lambda d: fusion_table(d["rows"])),
    "fusion-suite": Table("fusion-suite.json", fusion_suite_tables),
    "fusion-suite-background": Table("fusion-suite-background.json", fusion_suite_tables),
    "fusion-suite-pool-before": Table("fusion-suite-pool-before.json", fusion_suite_tables),
    "fusion-suite-pool": Table("fusion-suite-pool.json", fusion_suite_tables),
    "fusion-suite-pricing-before": Table("fusion-suite-pricing-before.json",
                                         fusion_suite_tables),
    "fusion-suite-pricing": Table("fusion-suite-pricing.json", fusion_suite_tables),
    "fusion-suite-handover": Table("fusion-suite-handover.json", fusion_suite_tables),
    "fusion-suite-whole": Table("fusion-suite-whole.json", fusion_suite_tables),
    "fusion-suite-balanced": Table("fusion-suite-balanced.json", fusion_suite_tables),
    "fusion-suite-padded": Table("fusion-suite-padded.json", fusion_suite_tables),
    "fusion-suite-detours": Table("fusion-suite-detours.json", fusion_suite_tables),
    "fusion-suite-greedy-fast": Table("fusion-suite-greedy-fast.json", fusion_suite_tables),
    "fusion-suite-retile": Table("fusion-suite-retile.json", fusion_suite_tables),
    "fusion-suite-gc": Table("fusion-suite-gc.json", fusion_suite_tables),
    "fusion-suite-spread": Table("fusion-suite-spread.json", fusion_suite_tables),
    "fusion-suite-zones": Table("fusion-suite-zones.json", fusion_suite_tables),
    "fusion-suite-levels": Table("fusion-suite-levels.json", fusion_suite_tables),
    "fusion-suite-path-before": Table("fusion-suite-path-before.json", fusion_suite_tables),
    "fusion-suite-path": Table("fusion-suite-path.json", fusion_suite_tables),
    "fusion-suite-path-all": Table("fusion-suite-path-all.json", fusion_suite_tables),
    "fusion-suite-guided-before": Table("fusion-suite-guided-before.json",
                                        fusion_suite_tables),
    "fusion-suite-guided": Table("fusion-suite-guided.json", fusion_suite_tables),
    "fusion-suite-windows-before": Table("fusion-suite-windows-before.json",
                                         fusion_suite_tables),
    "fusion-suite-windows": Table("fusion-suite-windows.json", fusion_suite_tables),
    "fusion-suite-lazy-before": Table("fusion-suite-lazy-before.json", fusion_suite_tables),
    "fusion-suite-lazy": Table("fusion-suite-lazy.json", fusion_suite_tables),
    "fusion-suite-teamkorea-before": Table("fusion-suite-teamkorea-before.json",
                                           fusion_suite_tables),
    "fusion-suite-teamkorea": Table("fusion-suite-teamkorea.json", fusion_suite_tables),
    "fusion-suite-long-before": Table("fusion-suite-long-before.json", fusion_suite_tables),
    "fusion-suite-long": Table("fusion-suite-long.json", fusion_suite_tables),
    "fusion-suite-120": Table("fusion-suite-120.json", fusion_suite_tables),
    "fusion-suite-recompute-before": Table("fusion-suite-recompute-before.json",
                                           fusion_suite_tables),
    "fusion-suite-recompute": Table("fusion-suite-recompute.json", fusion_suite_tables),
    "fusion-suite-tkspread-before": Table("fusion-suite-tkspread-before.json",
                                          fusion_suite_tables),
    "fusion-suite-tkspread": Table("fusion-suite-tkspread.json", fusion_suite_tables),
    "fusion-suite-tkbound": Table("fusion-suite-tkbound.json", fusion_suite_tables),
    "fusion-suite-tkneighbours": Table("fusion-suite-tkneighbours.json", fusion_suite_tables),
    "fusion-suite-neighbours-before": Table("fusion-suite-neighbours-before.json",
                                            fusion_suite_tables),
    "fusion-suite-neighbours": Table("fusion-suite-neighbours.json", fusion_suite_tables),
    "fusion-suite-roundtrip-before": Table("fusion-suite-roundtrip-before.json",
                                           fusion_suite_tables),
    "fusion-suite-roundtrip": Table("fusion-suite-roundtrip.json", fusion_suite_tables),
    "fusion-suite-seed7": Table("fusion-suite-seed7.json", fusion_suite_tables),
    "fusion-suite-copy-before": Table("fusion-suite-copy-before.json", fusion_suite_tables),
    "fusion-suite-copy": Table("fusion-suite-copy.json", fusion_suite_tables),
    "fusion-suite-tkcopy-before": Table("fusion-suite-tkcopy-before.json",
                                        fusion_suite_tables),
    "fusion-suite-tkcopy": Table("fusion-suite-tkcopy.json", fusion_suite_tables),
    "fusion-suite-seed7-tk": Table("fusion-suite-seed7-tk.json", fusion_suite_tables),
    "fusion-suite-tksplitk": Table("fusion-suite-tksplitk.json", fusion_suite_tables),
    "fusion-suite-tkmixed": Table("fusion-suite-tkmixed.json", fusion_suite_tables),
    "fusion-suite-tkfloor-before": Table("fusion-suite-tkfloor-before.json",
                                         fusion_suite_tables),
    "fusion-suite-tkfloor": Table("fusion-suite-tkfloor.json", fusion_suite_tables),
    "teamkorea": Table("teamkorea.json", lambda d: teamkorea_table(d["rows"])),
    "process-time": Table("process-time.json", process_time_table),
    "process-time-640": Table("process-time-640.json", process_time_table),
    "process-time-fuzz": Table("process-time-fuzz.json", process_time_table),
    "process-time-fuzz-hardend": Table("process-time-fuzz-hardend.json", process_time_summary),
    "process-time-fuzz-retry": Table("process-time-fuzz-retry.json", process_time_summary),
    "fusion-suite-tkretry-before": Table("fusion-suite-tkretry-before.json",
                                         fusion_suite_tables),
    "fusion-suite-tkretry": Table("fusion-suite-tkretry.json", fusion_suite_tables),
    "fusion-suite-retry-before": Table("fusion-suite-retry-before.json", fusion_suite_tables),
    "fusion-suite-retry": Table("fusion-suite-retry.json", fusion_suite_tables),
    "compare": Table("compare.json", compare_tables),
    "layout-models": Table("layout-models.json", lambda d: layout_table(d["rows"])),
    "segments": Table("segments.json", lambda d: segments_table(d["rows"])),
    "load": Table("load.json", load_table),
    "iopddl": Table("iopddl.json", lambda d: iopddl_table(d["rows"])),
    "calibration": Table("calibration.json", lambda d: calibration_table(d["summary"])),
    "address": Table("address.json", lambda d: address_table(d["rows"])),
    "order": Table("order.json", lambda d: order_table(d["rows"])),
    "order-suite": Table("order-suite.json", lambda d: order_table(d["rows"])),
    "proofs-suite": Table("proofs-suite.json", lambda d: proofs_table(d["rows"])),
    "proofs-10s": Table("proofs-10s.json", lambda d: proofs_table(d["rows"])),
    "proofs-60s": Table("proofs-60s.json", lambda d: proofs_table(d["rows"])),
    "proofs-10s-rerun": Table("proofs-10s-rerun.json", lambda d: proofs_table(d["rows"])),
    "proofs-10s-swaps": Table("proofs-10s-swaps.json", lambda d: proofs_table(d["rows"])),
    "proofs-60s-swaps": Table("proofs-60s-swaps.json", lambda d: proofs_table(d["rows"])),
    "proofs-10s-1worker": Table("proofs-10s-1worker.json", lambda d: proofs_table(d["rows"])),
    "gap-split": Table("gap-split.json", lambda d: gap_split_table(d["rows"])),
    "mesh": Table("mesh.json", lambda d: mesh_table(d["rows"])),
    "mesh-70b-120s": Table("mesh-70b-120s.json", lambda d: mesh_table(d["rows"])),
    "tx8": Table("tx8.json", lambda d: tx8_table(d["rows"])),
    "tx8-generated": Table("tx8-generated.json", lambda d: tx8_table(d["rows"])),
}


def provenance(meta: Row) -> str:
    """One line: command, machine, date, versions, and where a transcribed file came from."""
    def named(label: str, key: str) -> str:
        return f"{label} {meta[key]}" if meta.get(key) else f"{label} not recorded"

    versions = [named("layoutsat", "layoutsat"), named("OR-Tools", "ortools")]
    if meta.get("python"):
        versions.append(f"Python {meta['python']}")
    parts = [f"Run: `{meta['command']}`", meta["machine"], meta["date"], ", ".join(versions)]
    return "; ".join(parts + ([meta["source"]] if meta.get("source") else [])) + "."


def block(name: str, results: Path) -> list[str]:
    """The lines between the markers of table ``name``."""
    table = TABLES[name]
    data = json.loads((results / table.results).read_text())
    return [provenance(data["meta"]), "", *table.render(data).splitlines(), ""]


class MarkerError(ValueError):
    """BENCHMARKS.md's markers are unbalanced or name no known table."""


def render(text: str, results: Path = RESULTS) -> tuple[str, list[str]]:
    """``text`` with every table rendered from ``results``, and the names of the tables
    whose text changed."""
    lines, out, changed = text.splitlines(), [], []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        found = OPEN.match(line)
        if found is None:
            if line == CLOSE:
                raise MarkerError(f"line {i}: {CLOSE} without an opening marker")
            continue
        name = found.group(1)
        if name not in TABLES:
            raise MarkerError(f"line {i}: unknown table '{name}'; known: {', '.join(TABLES)}")
        end = next((j for j in range(i, len(lines)) if lines[j] == CLOSE or OPEN.match(lines[j])),
                   None)
        if end is None or lines[end] != CLOSE:
            raise MarkerError(f"line {i}: table '{name}' has no {CLOSE}")
        new = block(name, results)
        if lines[i:end] != new:
            changed.append(name)
        out += [*new, CLOSE]
        i = end + 1
    return "\n".join(out) + "\n", changed


def check(markdown: Path = MARKDOWN, results: Path = RESULTS) -> list[str]:
    """The tables of ``markdown`` that differ from what their JSON renders (empty: all
    current)."""
    return render(markdown.read_text(), results)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a table differs from its JSON")
    parser.add_argument("--markdown", type=Path, default=MARKDOWN)
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    try:
        text, changed = render(args.markdown.read_text(), args.results)
    except (MarkerError, OSError, KeyError, ValueError) as error:
        print(f"{args.markdown}: {error}", file=sys.stderr)
        return 2
    if args.check:
        for name in changed:
            print(f"{args.markdown}: table '{name}' differs from {TABLES[name].results}; "
                  f"run {Path(__file__).relative_to(ROOT)} to regenerate it", file=sys.stderr)
        return 1 if changed else 0
    if changed:
        args.markdown.write_text(text)
    print(f"{args.markdown}: {len(changed)} table(s) rewritten"
          + (f" ({', '.join(changed)})" if changed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
