"""From chosen groups to a TX8 plan: run order, DDR layouts, conversions, SPM offsets and
latencies (docs/tx8.md, "The plan")."""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from models.layout import LayoutPlan, PlanStats
from models.tx8 import Tx8Buffer, Tx8Conversion, Tx8Group, Tx8Section
from solver.tx8.configs import Choice
from solver.tx8.cost import costs
from solver.tx8.group import GroupShape
from solver.tx8.ops import pad
from solver.tx8.problem import HOST, Tx8Problem
from solver.tx8.spm import Request, place


@dataclass(frozen=True)
class Chosen:
    """A group of the plan: its ops (run order), layout, and configuration (None: DDR op)."""

    ops: tuple[str, ...]
    layout: str
    choice: Choice | None


def group_graph(p: Tx8Problem, owner: dict[str, int]) -> nx.DiGraph:
    """Which group feeds which, the groups given by the group of each op."""
    dag = nx.DiGraph()
    dag.add_nodes_from(set(owner.values()))
    for t, i in p.producer.items():
        for reader in p.readers.get(t, ()):
            a, b = owner[p.ops[i].name], owner[reader]
            if a != b:
                dag.add_edge(a, b)
    return dag


def ordered(p: Tx8Problem, groups: list[Chosen]) -> list[Chosen]:
    """Groups in an order that respects every dependency (earliest first op first)."""
    dag = group_graph(p, {n: g for g, chosen in enumerate(groups) for n in chosen.ops})
    first = [min(p.index[n] for n in g.ops) for g in groups]
    return [groups[g] for g in nx.lexicographical_topological_sort(dag, key=first.__getitem__)]


def conversions(p: Tx8Problem, groups: list[Chosen], names: list[str]
                ) -> tuple[dict[str, str], list[Tx8Conversion]]:
    """Each activation's stored layout, and the conversions its readers and the host need."""
    layout_of = {t.name: "compact" for t in p.tensors.values() if t.kind == "input"}
    owner: dict[str, int] = {}
    for g, chosen in enumerate(groups):
        for n in chosen.ops:
            owner[n] = g
            for t in p.decls[n].outputs:
                layout_of[t] = chosen.layout
    needed: dict[tuple[str, str], list[str]] = {}
    for t, stored in layout_of.items():
        if p.same_in_both_layouts(t):
            continue
        made_by = owner.get(p.ops[p.producer[t]].name) if t in p.producer else None
        for g in sorted({owner[r] for r in p.readers.get(t, ())} - {made_by}):
            if groups[g].layout != stored:
                needed.setdefault((t, groups[g].layout), []).append(names[g])
        if t in p.outputs and stored != "compact":
            needed.setdefault((t, "compact"), []).append(HOST)
    out = []
    for (t, to), readers in sorted(needed.items()):
        moved, latency = p.conversion(t, to)
        out.append(Tx8Conversion(tensor=t, from_=layout_of[t], to=to, consumers=readers,
                                 bytes=moved, latency_us=latency))
    return layout_of, out


def group_entry(p: Tx8Problem, name: str, chosen: Chosen, shape: GroupShape,
                template: str | None) -> Tx8Group:
    """One group of the plan: a DDR op's traffic, or an SPM group's configuration, buffers
    at their SPM offsets, traffic and times (recomputed for its own tensors)."""
    if chosen.choice is None:
        (op_name,) = chosen.ops
        op = p.ops[p.index[op_name]]
        read, written, latency = p.ddr_traffic(op)
        ones = [1] * len(op.out_shape)
        return Tx8Group(name=name, ops=[op_name], kind="ddr", layout="compact", sharding=ones,
                        split=ones, double_buffer=False, loads=read, stores=written,
                        buffers=[], spm_peak_bytes=0, compute_us=0.0, load_us=0.0,
                        store_us=0.0, reduce_us=0.0, latency_us=latency)
    c = chosen.choice.configs
    k = costs(shape, chosen.layout, p.device, c)  # a template's costs name its own tensors
    align = p.device.spm_alignment_bytes
    kept = [b for b in k.buffers if int(b.bytes[0]) > 0]
    requests = [Request(i, int(b.copies[0]) * int(pad(b.bytes[0], align)), int(b.start[0]),
                        int(b.end[0])) for i, b in enumerate(kept)]
    offsets = place(requests, align)
    buffers = [Tx8Buffer(tensor=b.tensor, role=b.role, bytes=int(b.bytes[0]),  # type: ignore[arg-type]
                         copies=int(b.copies[0]), offset=offsets[i], start=int(b.start[0]),  # type: ignore[arg-type]
                         end=int(b.end[0])) for i, b in enumerate(kept)]
    peak = max((offsets[r.key] + r.size for r in requests), default=0)
    resident = bool(c.resident[0])
    return Tx8Group(
        name=name, ops=list(chosen.ops), kind="spm", layout=chosen.layout,  # type: ignore[arg-type]
        sharding=[int(x) for x in c.sharding[0]], reduce_sharding=int(c.reduce_sharding[0]),
        split=[int(x) for x in c.split[0]], reduce_split=int(c.reduce_split[0]),
        double_buffer=bool(c.double_buffer[0]),
        resident=[t.name for t in shape.loaded if resident and t.role == "weight"],
        loads={t: int(v[0]) for t, v in k.loads.items()},
        stores={t: int(v[0]) for t, v in k.stores.items()}, buffers=buffers,
        spm_peak_bytes=peak, compute_us=float(k.compute_us[0]), load_us=float(k.load_us[0]),
        store_us=float(k.store_us[0]), reduce_us=float(k.reduce_us[0]),
        latency_us=float(k.latency_us[0]), template=template)


def build_plan(p: Tx8Problem, groups: list[Chosen], solver: str, status: str,
               bound: float | None = None) -> LayoutPlan:
    """The plan of these groups: run order, layouts and conversions, each group's entry
    (identical groups name the first as their template), totals; the wall time is set by
    the solve."""
    groups = ordered(p, groups)
    names = [f"g{i}" for i in range(len(groups))]
    layouts, converts = conversions(p, groups, names)
    first_of: dict[tuple, str] = {}
    entries = []
    for name, chosen in zip(names, groups, strict=True):
        shape = p.shape_of(list(chosen.ops))
        template = first_of.setdefault((shape.signature(), chosen.layout), name)
        entries.append(group_entry(p, name, chosen, shape,
                                   None if template == name else template))
    group_us = sum(g.latency_us for g in entries)
    convert_us = sum(c.latency_us for c in converts)
    total = group_us + convert_us
    gap = None if bound is None else max(0.0, (total - bound) / total) if total > 0 else 0.0
    section = Tx8Section(groups=entries, conversions=converts, tensor_layouts=layouts,
                         group_latency_us=group_us, conversion_latency_us=convert_us,
                         spm_peak_bytes=max((g.spm_peak_bytes for g in entries), default=0))
    return LayoutPlan(
        status=status, solver=solver, graph=p.graph.name, device=p.device,  # type: ignore[arg-type]
        schedule=[n for g in groups for n in g.ops], tensors={}, ops={}, l1_timeline=[],
        l1_capacity_bytes_per_core=p.device.spm_bytes, total_latency_us=total,
        stats=PlanStats(wall_time_s=None, objective=total,
                        best_bound=bound, gap=gap), tx8=section)
