"""The analysed layout problem: the graph, the device, and per op its candidate table.

``analyze`` is the one entry point the solvers, the CP-SAT model and the evaluator
share. It is analysis only (what is legal, what it costs); every policy lives in the
solvers. Candidate tables are computed once per distinct op signature, so a graph that
repeats a layer 32 times pays for one layer.
"""

from __future__ import annotations

import heapq
from collections import Counter
from dataclasses import dataclass, field

from models.device import DEFAULT_DEVICE, PRESETS, DeviceSpec
from models.errors import InputValidationError, Issue
from models.layout import LayoutGraph, OpDecl
from models.layout_ops import attrs_model
from solver.layout import cost
from solver.layout.dram_capacity import require_dram_capacity
from solver.layout.memory import DRAM, Geometry, MemConfig
from solver.layout.ops import (
    DEFAULT_MAX_CONFIGS,
    FAMILIES,
    Candidate,
    OperandSig,
    OpSig,
    build_candidate,
    candidates,
    input_rule,
    parse_config_id,
)


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: str
    geom: Geometry
    producer: str | None = None
    consumers: list[tuple[str, int]] = field(default_factory=list)  # (op, operand index)
    is_output: bool = False
    stored_bytes: int = 0
    """Bytes in DRAM: the most any reader stores it as (a conv's prepared weights), else
    its tiles."""


@dataclass
class OpInfo:
    name: str
    type: str
    index: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    sig: OpSig
    candidates: list[Candidate]

    @property
    def output(self) -> str:
        return self.outputs[0]


@dataclass
class LayoutProblem:
    """A validated graph analysed for one device: tensors, ops, candidates, costs."""

    graph: LayoutGraph
    device: DeviceSpec
    max_configs: int
    tensors: dict[str, TensorInfo]
    ops: dict[str, OpInfo]
    order: list[str]  # a topological order, the graph's own op order where it allows
    measured_ops: dict[tuple[str, str], float]
    measured_copies: dict[tuple[str, str, str], float]
    # Set only on a segment cut from a larger problem (``lns.segment``): where tensors made
    # before the segment live when it starts, which tensors are still needed after it, and
    # the L1 bytes per core (by step) of tensors that only pass through it.
    fixed_homes: dict[str, MemConfig] = field(default_factory=dict)
    live_out: frozenset[str] = frozenset()
    reserved_l1: dict[int, int] = field(default_factory=dict)
    # Set only on a part of a bound (``bound.py``): tensors whose reads are priced by the
    # reading op alone (no home, copy or residency terms: another part pays for those).
    loose: frozenset[str] = frozenset()
    # Set by ``solve`` with ``capacity="address"``: a search keeps a plan of a graph too large
    # for one model only when its L1 buffers get addresses (``address.places``), as there
    # is no time left to repair one after the search (small graphs are repaired then).
    addresses: bool = False
    _copy_prices: dict[tuple[Geometry, MemConfig, MemConfig], float] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    @property
    def usable_l1(self) -> int:
        return self.device.usable_l1_bytes

    def bytes_per_core(self, tensor: str, cfg: MemConfig) -> int:
        return self.tensors[tensor].geom.bytes_per_core(cfg, self.device.cores)

    def copy_us(self, tensor: str, src: MemConfig, dst: MemConfig) -> float:
        """A reshard (or spill, or reload) of ``tensor``; measured costs win. Priced once per
        (geometry, source, target): the CP-SAT model asks for 10^5 of them."""
        measured = self.measured_copies.get((tensor, src.key, dst.key))
        if measured is not None:
            return measured
        key = (self.tensors[tensor].geom, src, dst)
        priced = self._copy_prices.get(key)
        if priced is None:
            priced = self._copy_prices[key] = cost.copy_us(self.device, key[0], src, dst)
        return priced

    def spill_us(self, tensor: str, home: MemConfig) -> float:
        return self.copy_us(tensor, home, DRAM)

    def candidate(self, op: str, config: str) -> Candidate | str:
        """The candidate an op config id names, or why it is not legal (cap ignored)."""
        for c in self.ops[op].candidates:
            if c.id == config:
                return c
        try:
            out, knobs = parse_config_id(config)
        except ValueError as exc:
            return f"config.syntax: {exc}"
        built = build_candidate(self.ops[op].sig, out, knobs, self.device)
        if isinstance(built, Candidate):
            return _with_measurement(built, self.measured_ops.get((op, built.id)))
        return built

    def input_reason(self, op: str, cand: Candidate, i: int, m: MemConfig) -> str | None:
        """Why ``cand`` cannot read operand ``i`` of ``op`` from ``m`` (None: it can)."""
        if m in cand.accepts[i]:
            return None
        return input_rule(self.ops[op].sig, cand.output, i, m) or (
            f"operand.not_offered: {m.key} is legal but not among the configurations this "
            f"candidate reads operand {i} from: {[k.key for k in cand.accepts[i]]}")

    def home_is_fixed(self, tensor: str) -> bool:
        """Graph inputs and constants start in DRAM, where the host put them."""
        return self.tensors[tensor].producer is None


def resolve_device(graph: LayoutGraph, override: str | DeviceSpec | None = None) -> DeviceSpec:
    """The device to plan for: an explicit override, else the graph's own, else the default."""
    chosen = override if override is not None else graph.device
    if chosen is None:
        return PRESETS[DEFAULT_DEVICE]
    if isinstance(chosen, DeviceSpec):
        return chosen
    if chosen not in PRESETS:
        raise InputValidationError([Issue(("device",), f"unknown device preset '{chosen}'; "
                                          f"presets are {sorted(PRESETS)}", "device.unknown")],
                                   "device")
    return PRESETS[chosen]


def analyze(graph: LayoutGraph, device: DeviceSpec,
            max_configs: int = DEFAULT_MAX_CONFIGS) -> LayoutProblem:
    """Tensors, ops, topological order and candidate tables of a validated graph."""
    tensors = {t.name: TensorInfo(t.name, tuple(t.shape), t.dtype, t.kind,
                                  Geometry.of(t.shape, t.dtype)) for t in graph.tensors}
    for name in graph.outputs:
        tensors[name].is_output = True
    measured_ops = {(m.op, m.config): m.latency_us for m in graph.measured.ops}
    cache: dict[OpSig, list[Candidate]] = {}
    ops: dict[str, OpInfo] = {}
    for index, decl in enumerate(graph.ops):
        for j, name in enumerate(decl.inputs):
            tensors[name].consumers.append((decl.name, j))
        for name in decl.outputs:
            tensors[name].producer = decl.name
        sig = _signature(decl, tensors)
        if sig not in cache:
            cache[sig] = candidates(sig, device, max_configs)
        ops[decl.name] = OpInfo(decl.name, decl.type, index, tuple(decl.inputs),
                                tuple(decl.outputs), sig, list(cache[sig]))
    for info in tensors.values():
        info.stored_bytes = max((FAMILIES[ops[op].type].stored_bytes(ops[op].sig, j)
                                 for op, j in info.consumers), default=info.geom.total_bytes)
    problem = LayoutProblem(
        graph, device, max_configs, tensors, ops, _topological_order(graph),
        measured_ops,
        {(r.tensor, r.from_, r.to): r.latency_us for r in graph.measured.reshards})
    _apply_measurements(problem)
    _require_dram_fallback(problem)
    require_dram_capacity(problem)
    return problem


def _require_dram_fallback(problem: LayoutProblem) -> None:
    """Every op needs a DRAM-interleaved configuration whose scratch fits: the fallback of
    every solver. Without one the device is too small for the graph."""
    issues = [Issue(("ops", info.index), f"op '{name}' ({info.type}) has no configuration "
                    f"whose scratch fits the {problem.usable_l1} usable L1 bytes per core of "
                    f"{problem.device.name}", "device.too_small")
              for name, info in problem.ops.items()
              if not any(c.output == DRAM for c in info.candidates)]
    if issues:
        raise InputValidationError(issues, "layout graph")


def _signature(decl: OpDecl, tensors: dict[str, TensorInfo]) -> OpSig:
    def operand(name: str) -> OperandSig:
        t = tensors[name]
        return OperandSig(t.shape, t.dtype, t.kind == "constant")

    attrs = attrs_model(decl.type).model_validate(decl.attrs)
    return OpSig.of(decl.type, attrs, [operand(n) for n in decl.inputs],
                    [operand(n) for n in decl.outputs])


def _topological_order(graph: LayoutGraph) -> list[str]:
    """Kahn's algorithm taking the earliest-listed ready op first."""
    producer = {t: op.name for op in graph.ops for t in op.outputs}
    index = {op.name: i for i, op in enumerate(graph.ops)}
    preds = {op.name: {producer[t] for t in op.inputs if t in producer} for op in graph.ops}
    succs: dict[str, list[str]] = {op.name: [] for op in graph.ops}
    for name, ps in preds.items():
        for p in ps:
            succs[p].append(name)
    waiting = {name: len(ps) for name, ps in preds.items()}
    ready = [(index[n], n) for n, w in waiting.items() if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append(name)
        for s in succs[name]:
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(ready, (index[s], s))
    return order


def _with_measurement(c: Candidate, measured: float | None) -> Candidate:
    if measured is None:
        return c
    return Candidate(c.id, c.output, c.knobs, c.accepts, c.cb_bytes_per_core, c.compute_us,
                     c.write_us, c.fixed_us, c.program, measured)


def _apply_measurements(problem: LayoutProblem) -> None:
    """Attach measured latencies; a measured legal config joins the table even past the cap."""
    issues = []
    for k, m in enumerate(problem.graph.measured.ops):
        info = problem.ops.get(m.op)
        if info is None:
            continue
        found = problem.candidate(m.op, m.config)
        if isinstance(found, str):
            issues.append(Issue(("measured", "ops", k, "config"), f"config '{m.config}' is "
                                f"not legal for op '{m.op}' on {problem.device.name}: {found}",
                                "measured.config_illegal"))
            continue
        found = _with_measurement(found, m.latency_us)
        ids = [c.id for c in info.candidates]
        if found.id in ids:
            info.candidates[ids.index(found.id)] = found
        else:
            info.candidates.append(found)
    if issues:
        raise InputValidationError(issues, "layout graph")


def summarize(graph: LayoutGraph) -> dict[str, object]:
    """A short description of a valid graph for ``validate``."""
    kinds = Counter(t.kind for t in graph.tensors)
    return {"name": graph.name, "ops": len(graph.ops),
            "ops_by_type": dict(sorted(Counter(op.type for op in graph.ops).items())),
            "tensors": len(graph.tensors), "inputs": kinds["input"],
            "constants": kinds["constant"], "activations": kinds["activation"],
            "outputs": list(graph.outputs),
            "device": graph.device if isinstance(graph.device, str | None) else graph.device.name,
            "measured_costs": len(graph.measured.ops) + len(graph.measured.reshards)}
