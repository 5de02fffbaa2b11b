"""``groupcost``: the seed's TX8 compiler, one decision at a time (docs/tx8.md, "Solvers").

Layouts first (layoutInitPass, layoutTransmitPass: NE ops aligned, spread through vector
ops, stopped at DDR ops), then groups (GroupPatternPass with "an NE op and up to four
elementwise ops", GroupOptimizationPass: one group per remaining op), then per group the
best configuration GroupCostPass finds: every sharding, for each the smallest temporal
split that fits SPM, double-buffered, weights reloaded per slice; identical groups reuse
the first one's result."""

from __future__ import annotations

import numpy as np

from models.errors import InputValidationError, Issue
from models.layout_ops import BINARY_TYPES, UNARY_TYPES
from solver.tx8.candidates import group_faults
from solver.tx8.configs import Choice, cheapest, cpsat_space, seed_split_sequence, shardings
from solver.tx8.cost import Configs, costs
from solver.tx8.group import GroupShape
from solver.tx8.plan import Chosen
from solver.tx8.problem import Tx8Problem

PATTERN_TAIL = 4
"""Elementwise ops a pattern group takes after its NE op (the seed's wildcard expands to
at most five ops)."""
ELEMENTWISE = frozenset((*UNARY_TYPES, *BINARY_TYPES))


def seed_layouts(p: Tx8Problem) -> dict[str, str]:
    """Per op: aligned if an NE op or joined to one through vector ops, else compact."""
    layout = {op.name: "compact" for op in p.ops}
    todo = [op.name for op in p.ops if op.kind == "ne"]
    for name in todo:
        layout[name] = "aligned"
    while todo:
        for n in p.neighbours(todo.pop()):
            other = p.ops[p.index[n]]
            if other.kind == "vector" and layout[n] == "compact":
                layout[n] = "aligned"
                todo.append(n)
    return layout


def seed_groups(p: Tx8Problem, layout: dict[str, str]) -> list[tuple[str, ...]]:
    """Pattern groups (an NE op along its only reader's chain of elementwise ops), then one
    group per op left."""
    taken: set[str] = set()
    groups: list[tuple[str, ...]] = []
    for op in p.ops:
        if op.name in taken:
            continue
        chain = [op.name]
        if op.kind == "ne":
            current = op
            while len(chain) <= PATTERN_TAIL and current.output not in p.outputs:
                readers = p.readers.get(current.output, [])
                if len(readers) != 1:
                    break
                (nxt,) = readers
                reader = p.ops[p.index[nxt]]
                if (reader.type not in ELEMENTWISE or nxt in taken
                        or layout[nxt] != layout[op.name]
                        or group_faults(p, sorted([*chain, nxt], key=p.index.__getitem__))):
                    break
                chain.append(nxt)
                current = reader
        taken.update(chain)
        groups.append(tuple(sorted(chain, key=p.index.__getitem__)))
    return groups


def seed_choice(shape: GroupShape, layout: str, p: Tx8Problem) -> Choice | None:
    """GroupCostPass: per sharding (by level) the first split of DS_TileSplitPass's order
    that fits, double-buffered unless nothing fits so; the cheapest estimate."""
    device = p.device
    pe = (device.pe_array[0], device.pe_array[1], device.pe_array[2])
    for double in (True, False):
        rows = []
        for s, rs in _by_level(shape, device.tile_count):
            rows.append([(s, rs, split, rp)
                         for split, rp in seed_split_sequence(shape, s, rs, pe)])
        flat = [r for seq in rows for r in seq]
        space = Configs(np.array([r[0] for r in flat], dtype=np.int64),
                        np.array([r[1] for r in flat], dtype=np.int64),
                        np.array([r[2] for r in flat], dtype=np.int64),
                        np.array([r[3] for r in flat], dtype=np.int64),
                        np.full(len(flat), double), np.zeros(len(flat), dtype=bool))
        table = costs(shape, layout, device, space)
        ok = table.spm_bytes <= device.spm_bytes
        best, start = None, 0
        for seq in rows:
            fitting = np.flatnonzero(ok[start:start + len(seq)])
            if len(fitting):
                i = start + int(fitting[0])
                if best is None or table.latency_us[i] < table.latency_us[best]:
                    best = i
            start += len(seq)
        if best is not None:
            row = space.row(best)
            return Choice(row, costs(shape, layout, device, row))
    return None


def _by_level(shape: GroupShape, tiles: int) -> list[tuple[tuple[int, ...], int]]:
    """ShardingLevel's order: most tiles with work first (a factor beyond its dim idles)."""
    def used(item: tuple[tuple[int, ...], int]) -> int:
        s, rs = item
        return int(np.prod([min(f, d) for f, d in zip(s, shape.out_shape, strict=True)])) * rs
    return sorted(shardings(shape, tiles), key=used, reverse=True)


def groupcost(p: Tx8Problem) -> list[Chosen]:
    """The seed compiler's plan: its layouts, its groups, each group's GroupCostPass choice.
    A pattern group that fits no configuration falls back to one group per op, as
    GroupOptimizationPass makes them; a single op whose split search (stopped at one PE
    block) finds nothing that fits takes the cheapest fitting configuration of cpsat's
    space, where the seed's compiler would fail."""
    layout = seed_layouts(p)
    templates: dict[tuple, Choice | None] = {}

    def priced(names: tuple[str, ...]) -> Choice | None:
        shape = p.shape_of(list(names))
        key = (shape.signature(), layout[names[0]])
        if key not in templates:
            templates[key] = seed_choice(shape, layout[names[0]], p)
            if templates[key] is None and len(names) == 1:  # the seed would not compile it
                templates[key] = cheapest(shape, layout[names[0]], p.device,
                                          cpsat_space(shape, p.device.tile_count))
        return templates[key]

    chosen = []
    for names in seed_groups(p, layout):
        if p.ops[p.index[names[0]]].kind == "ddr":
            chosen.append(Chosen(names, "compact", None))
            continue
        choice = priced(names)
        parts = [(names, choice)] if choice is not None or len(names) == 1 else \
            [((n,), priced((n,))) for n in names]
        for part, found in parts:
            if found is None:
                raise no_fit(p, part)
            chosen.append(Chosen(part, layout[part[0]], found))
    return chosen


def no_fit(p: Tx8Problem, names: tuple[str, ...]) -> InputValidationError:
    return InputValidationError([Issue(
        ("ops", p.graph.ops.index(p.decls[names[0]]), "name"),
        f"op '{names[0]}' fits no configuration in {p.device.spm_bytes:,} bytes of SPM per "
        "tile, even split as far as its dims allow", "tx8.spm_fit")], "layout graph")
