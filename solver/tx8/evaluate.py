"""The independent checker of a TX8 plan, written from ``docs/tx8.md`` ("The cost model") alone.

It imports nothing of the TX8 solvers: a plan is judged by a second reading of the doc, so
a slip in the planner's cost model shows up as a disagreement here instead of being
reproduced. From the plan's decisions (groups, layouts, shardings, splits, double
buffering, resident weights, SPM offsets) it re-derives every number the plan claims and
reports every broken rule as a ``Violation``; it never raises on a bad plan.

Where the doc leaves a choice open, the most literal reading is taken and marked
``Ambiguity:`` in a comment next to the code that makes it.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import networkx as nx

from models.layout import Evaluation, LayoutGraph, LayoutPlan, OpDecl, TensorDecl, Violation
from models.layout_ops import (
    POOL_TYPES,
    REDUCE_TYPES,
    Attrs,
    Conv2dAttrs,
    MatmulAttrs,
    PoolAttrs,
    ReduceAttrs,
    SoftmaxAttrs,
    attrs_model,
    normalize_dim,
)
from models.tx8 import Tx8Conversion, Tx8Group, Tx8Section, Tx8Spec

NE_TYPES = frozenset({"matmul", "linear", "conv2d"})
DDR_TYPES = frozenset({"reshape", "permute", "transpose", "slice", "concat", "embedding",
                       "opaque"})
HEAD_TYPES = NE_TYPES | frozenset(REDUCE_TYPES) | frozenset(POOL_TYPES)
BYTES_PER_ELEMENT = {"bf16": Fraction(2), "f32": Fraction(4), "bfp8": Fraction(17, 16),
                     "bfp4": Fraction(9, 16), "uint32": Fraction(4)}
PASSES = {"softmax": 4, "layernorm": 4, "rmsnorm": 3,
          **dict.fromkeys(("gelu", "silu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt",
                           "reciprocal", "div"), 2)}
BufferKey = tuple[str, str, int, int, int, int]
"""A buffer without its offset: (tensor, role, bytes, copies, start, end)."""


def evaluate_tx8(graph: LayoutGraph, plan: LayoutPlan, device: Tx8Spec) -> Evaluation:
    """Check a TX8 plan of ``graph`` for ``device``; valid only when no violation is found.

    The returned total is recomputed from the plan's decisions even when they break rules
    (a group too malformed to price counts with its own reported latency).
    """
    c = _Check(_Graph.of(graph), plan, device)
    _check_device(c)
    section = plan.tx8
    if section is None:
        c.add("tx8.section", "tx8", "the plan has no tx8 section; a plan for a TX8 chip lists "
              "its groups, conversions and tensor layouts there")
        return Evaluation(valid=False, total_latency_us=0.0, violations=c.found)
    owner = _check_coverage(c, section.groups)
    _check_order(c, section.groups, owner)
    group_latency, peak = 0.0, 0
    for position, grp in enumerate(section.groups):
        earlier = {g.name for g in section.groups[:position]}
        group_latency += _check_group(c, grp, position, earlier, owner)
        peak = max(peak, _check_spm(c, grp))
    layouts = _check_tensor_layouts(c, section, owner)
    conversion_latency = _check_conversions(c, section, owner, layouts)
    _check_ddr_capacity(c)
    total = group_latency + conversion_latency
    _check_totals(c, section, group_latency, conversion_latency, peak, total)
    return Evaluation(valid=not c.found, total_latency_us=total, violations=c.found)


# ----------------------------------------------------------------------------- context


def close(a: float, b: float) -> bool:
    """Equal within 1e-6 relative plus 1e-6 absolute (times are sums of many terms)."""
    return abs(a - b) <= 1e-6 + 1e-6 * abs(b)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def pad(x: int, m: int) -> int:
    return ceil_div(x, m) * m


def aligned(c: int, channel_alignment: int) -> int:
    """The seed's Cx width of a last dim: whole blocks of the alignment, then the rest
    padded to the smallest power of two from 4 that holds it (a whole block if the rest is
    over half of one); a width of at most half a block is padded the same way."""
    blocks, rest = divmod(c, channel_alignment) if 2 * c > channel_alignment else (0, c)
    if rest == 0:
        return blocks * channel_alignment
    if 2 * rest > channel_alignment:
        return (blocks + 1) * channel_alignment
    width = 4
    while width < rest:
        width *= 2
    return blocks * channel_alignment + width


def nbytes(elements: int, dtype: str) -> int:
    """Bytes of ``elements`` values: fractional bytes (bfp8, bfp4) round up."""
    return math.ceil(elements * BYTES_PER_ELEMENT[dtype])


@dataclass(frozen=True)
class _Graph:
    """The graph indexed for the checks: producers, readers and the op DAG."""

    tensors: dict[str, TensorDecl]
    ops: dict[str, OpDecl]
    attrs: dict[str, Attrs]
    producer: dict[str, str]
    readers: dict[str, list[str]]
    outputs: frozenset[str]
    dag: nx.DiGraph

    @classmethod
    def of(cls, graph: LayoutGraph) -> _Graph:
        ops = {op.name: op for op in graph.ops}
        producer = {t: op.name for op in graph.ops for t in op.outputs}
        readers: dict[str, list[str]] = defaultdict(list)
        dag = nx.DiGraph()
        dag.add_nodes_from(ops)
        for op in graph.ops:
            for t in dict.fromkeys(op.inputs):
                readers[t].append(op.name)
                if t in producer:
                    dag.add_edge(producer[t], op.name)
        return cls(tensors={t.name: t for t in graph.tensors}, ops=ops,
                   attrs={op.name: attrs_model(op.type).model_validate(op.attrs)
                          for op in graph.ops},
                   producer=producer, readers=dict(readers),
                   outputs=frozenset(graph.outputs), dag=dag)

    def shape(self, tensor: str) -> list[int]:
        return self.tensors[tensor].shape

    def out_shape(self, op: str) -> tuple[int, ...]:
        return tuple(self.shape(self.ops[op].outputs[0]))

    def is_constant(self, tensor: str) -> bool:
        return self.tensors[tensor].kind == "constant"

    def reduce_dim(self, op: str) -> int:
        """K of an NE op: the shared dim of a matmul, the input channels of a conv (a grouped
        conv's per-group channels, never split)."""
        decl = self.ops[op]
        if decl.type == "conv2d":
            weight = self.shape(decl.inputs[1])
            return weight[1] if self.attrs[op].groups > 1 else self.shape(decl.inputs[0])[3]
        return self.shape(decl.inputs[0])[-1]

    def is_grouped_conv(self, op: str) -> bool:
        return self.ops[op].type == "conv2d" and self.attrs[op].groups > 1

    def whole_bytes(self, tensor: str, layout: str, channel_alignment: int) -> int:
        """Bytes of the whole tensor in DDR in ``layout``."""
        dims = list(self.shape(tensor))
        if layout == "aligned":
            dims[-1] = aligned(dims[-1], channel_alignment)
        return nbytes(math.prod(dims), self.tensors[tensor].dtype)


@dataclass
class _Check:
    g: _Graph
    plan: LayoutPlan
    device: Tx8Spec
    found: list[Violation] = field(default_factory=list)

    def add(self, kind: str, where: str, msg: str) -> None:
        self.found.append(Violation(kind=kind, where=where, msg=msg))

    def compare(self, kind: str, where: str, what: str, reported: float, actual: float) -> None:
        if not close(reported, actual):
            self.add(kind, where, f"{what}: reported {reported!r} but it recomputes to "
                     f"{actual!r}")


# ----------------------------------------------------------------------------- plan level


def _check_device(c: _Check) -> None:
    """The plan is for this chip, and its Tensix sections are empty (the doc's "The plan")."""
    planned = c.plan.device
    if not isinstance(planned, Tx8Spec):
        c.add("tx8.device", "device", f"the plan is for the Tensix device '{planned.name}', "
              f"not the TX8 spec '{c.device.name}'")
    elif planned != c.device:
        differ = [f for f in Tx8Spec.model_fields if getattr(planned, f) != getattr(c.device, f)]
        c.add("tx8.device", "device", f"the plan's TX8 spec differs from '{c.device.name}' in "
              f"{differ}")
    tensix = {"tensors": c.plan.tensors, "ops": c.plan.ops, "l1_timeline": c.plan.l1_timeline,
              "reshards": c.plan.reshards, "reloads": c.plan.reloads, "spills": c.plan.spills}
    for name, items in tensix.items():
        if items:
            c.add("tx8.plan", name, f"a TX8 plan's Tensix section '{name}' must be empty")
    if c.plan.mesh is not None:
        c.add("tx8.plan", "mesh", "a TX8 plan has no mesh section")


def _check_coverage(c: _Check, groups: Sequence[Tx8Group]) -> dict[str, int]:
    """Every op in exactly one group; returns op -> index of its (first) group."""
    owner: dict[str, int] = {}
    names: dict[str, int] = {}
    for i, grp in enumerate(groups):
        where = f"groups.{grp.name}"
        if grp.name in names:
            c.add("tx8.group", where, f"group name '{grp.name}' is already used by groups"
                  f"[{names[grp.name]}]; conversions name their consumers by group name")
        names.setdefault(grp.name, i)
        for op in grp.ops:
            if op not in c.g.ops:
                c.add("tx8.coverage", where, f"'{op}' is not an op of the graph")
            elif op in owner:
                c.add("tx8.coverage", where, f"op '{op}' is already in group "
                      f"'{groups[owner[op]].name}'; every op is in exactly one group")
            else:
                owner[op] = i
    for op in c.g.ops:
        if op not in owner:
            c.add("tx8.coverage", f"ops.{op}", f"op '{op}' is in no group")
    return owner


def _check_order(c: _Check, groups: Sequence[Tx8Group], owner: dict[str, int]) -> None:
    """Groups run in an order respecting every dependency; the schedule is their ops."""
    for op, i in owner.items():
        for t in c.g.ops[op].inputs:
            p = c.g.producer.get(t)
            if p in owner and owner[p] > i:
                c.add("tx8.order", f"groups.{groups[i].name}", f"op '{op}' reads '{t}', "
                      f"produced by '{p}' in the later group '{groups[owner[p]].name}'")
    concatenated = [op for grp in groups for op in grp.ops]
    if c.plan.schedule != concatenated:
        c.add("tx8.order", "schedule", f"the schedule {c.plan.schedule} is not the groups' ops "
              f"in run order {concatenated}")


def _check_ddr_capacity(c: _Check) -> None:
    # Ambiguity: "the chip's DDR must hold every tensor at once" - every graph tensor
    # (intermediates included) counted compact; conversion copies and aligned padding
    # are not added.
    total = sum(c.g.whole_bytes(t, "compact", c.device.channel_alignment) for t in c.g.tensors)
    if total > c.device.ddr_bytes:
        c.add("tx8.ddr", "tensors", f"the graph's tensors take {total} bytes but the DDR "
              f"holds {c.device.ddr_bytes}")


def _check_totals(c: _Check, section: Tx8Section, group_latency: float,
                  conversion_latency: float, peak: int, total: float) -> None:
    c.compare("tx8.total", "tx8.group_latency_us", "the sum of the groups' latencies",
              section.group_latency_us, group_latency)
    c.compare("tx8.total", "tx8.conversion_latency_us", "the sum of the conversions' latencies",
              section.conversion_latency_us, conversion_latency)
    if section.spm_peak_bytes != peak:
        c.add("tx8.total", "tx8.spm_peak_bytes", f"reported {section.spm_peak_bytes} bytes but "
              f"the largest group's SPM peak is {peak}")
    c.compare("tx8.total", "total_latency_us", "groups plus conversions",
              c.plan.total_latency_us, total)


# ----------------------------------------------------------------------------- groups


@dataclass(frozen=True)
class _Cost:
    """What a group's decisions imply: its buffers (no offsets), DDR traffic and times."""

    buffers: Counter[BufferKey]
    loads: dict[str, int]
    stores: dict[str, int]
    compute_us: float = 0.0
    load_us: float = 0.0
    store_us: float = 0.0
    reduce_us: float = 0.0
    latency_us: float = 0.0


def _check_group(c: _Check, grp: Tx8Group, position: int, earlier: set[str],
                 owner: dict[str, int]) -> float:
    """Every rule of one group; returns its recomputed latency (its own when unpriceable)."""
    where = f"groups.{grp.name}"
    _check_group_order(c, grp, where)
    _check_resident(c, grp, where)
    # Ambiguity: "template: the earlier identical group it reuses" - only checked to name
    # an earlier group; the group is priced on its own decisions either way.
    if grp.template is not None and grp.template not in earlier:
        c.add("tx8.group", where, f"template '{grp.template}' is not an earlier group")
    if not all(op in c.g.ops and owner.get(op) == position for op in grp.ops):
        return grp.latency_us  # ops unknown or owned elsewhere: reported by the coverage
    if grp.kind == "ddr":
        cost = _ddr_group(c, grp, where)
        if cost is None:
            return grp.latency_us
        _compare_ddr_cost(c, grp, cost, where)
        return cost.latency_us
    slicing = _spm_group(c, grp, where)
    if slicing is None:
        return grp.latency_us
    cost = _spm_cost(c, grp, slicing)
    _compare_spm_cost(c, grp, cost, where)
    return cost.latency_us


def _check_group_order(c: _Check, grp: Tx8Group, where: str) -> None:
    """The ops of a group are listed in a topological order."""
    index = {op: i for i, op in enumerate(grp.ops)}
    for i, op in enumerate(grp.ops):
        for t in c.g.ops[op].inputs if op in c.g.ops else ():
            p = c.g.producer.get(t)
            if p in index and index[p] >= i:
                c.add("tx8.order", where, f"op '{op}' (position {i}) reads '{t}' from '{p}' "
                      f"listed at position {index[p]}")


def _check_resident(c: _Check, grp: Tx8Group, where: str) -> None:
    read = {t for op in grp.ops if op in c.g.ops for t in c.g.ops[op].inputs}
    for name, n in Counter(grp.resident).items():
        if name not in c.g.tensors or not c.g.is_constant(name) or name not in read:
            c.add("tx8.resident", where, f"resident '{name}' is not a constant the group reads")
        if n > 1:
            c.add("tx8.resident", where, f"resident '{name}' is listed {n} times")


def _ddr_group(c: _Check, grp: Tx8Group, where: str) -> _Cost | None:
    """A DDR op alone, compact; its traffic and latency (None when it is no such group)."""
    if len(grp.ops) != 1 or c.g.ops[grp.ops[0]].type not in DDR_TYPES:
        c.add("tx8.group", where, "a ddr group holds exactly one DDR op (reshape, permute, "
              f"transpose, slice, concat, embedding, opaque), not {grp.ops}")
        return None
    if grp.layout != "compact":
        c.add("tx8.layout", where, "a ddr group works on the compact layout")
    return _ddr_cost(c, c.g.ops[grp.ops[0]])


def _ddr_cost(c: _Check, op: OpDecl) -> _Cost:
    """``group_launch + 2 dma + (read + written) / ddr``; a reshape is a view (0).

    Ambiguity: the doc defines ``loads``/``stores`` for spm groups only. Here they are the
    DDR bytes the op reads of each input and writes of each output (compact, whole
    tensors; an operand listed twice is read twice), empty for a reshape; the per-slice
    fields (compute_us, load_us, ...) and the sharding/split of a ddr group are not
    checked (the doc gives them no meaning).
    """
    if op.type == "reshape":
        return _Cost(Counter(), {}, {})
    whole = {t: c.g.whole_bytes(t, "compact", c.device.channel_alignment)
             for t in (*op.inputs, *op.outputs)}
    loads: dict[str, int] = defaultdict(int)
    if op.type == "embedding":
        indices, table = op.inputs
        loads[indices] += whole[indices]
        loads[table] += sum(whole[t] for t in op.outputs)  # the table rows it gathers
    else:
        for t in op.inputs:
            loads[t] += whole[t]
    stores: dict[str, int] = defaultdict(int)
    for t in op.outputs:
        stores[t] += whole[t]
    d = c.device
    latency = (d.group_launch_us + 2 * d.dma_latency_us
               + (sum(loads.values()) + sum(stores.values())) / d.ddr_bytes_per_us)
    return _Cost(Counter(), dict(loads), dict(stores), latency_us=latency)


def _compare_ddr_cost(c: _Check, grp: Tx8Group, cost: _Cost, where: str) -> None:
    _compare_buffers(c, grp, cost, where)
    _compare_traffic(c, grp, cost, where)
    c.compare("tx8.latency", where, "latency_us", grp.latency_us, cost.latency_us)


def _compare_spm_cost(c: _Check, grp: Tx8Group, cost: _Cost, where: str) -> None:
    _compare_buffers(c, grp, cost, where)
    _compare_traffic(c, grp, cost, where)
    for what in ("compute_us", "load_us", "store_us", "reduce_us", "latency_us"):
        c.compare("tx8.latency", where, what, getattr(grp, what), getattr(cost, what))


def _compare_buffers(c: _Check, grp: Tx8Group, cost: _Cost, where: str) -> None:
    """The plan's buffers, offsets aside, are exactly the recomputed ones (a multiset)."""
    planned = Counter((b.tensor, b.role, b.bytes, b.copies, b.start, b.end)
                      for b in grp.buffers)
    fields = "(tensor, role, bytes, copies, start, end)"
    for key, n in (cost.buffers - planned).items():
        c.add("tx8.buffers", where, f"missing buffer {fields} = {key}" + (f" x{n}" if n > 1
                                                                          else ""))
    for key, n in (planned - cost.buffers).items():
        c.add("tx8.buffers", where, f"unexpected buffer {fields} = {key}" + (f" x{n}" if n > 1
                                                                             else ""))


def _compare_traffic(c: _Check, grp: Tx8Group, cost: _Cost, where: str) -> None:
    for what, reported, actual in (("loads", grp.loads, cost.loads),
                                   ("stores", grp.stores, cost.stores)):
        if reported != actual:
            c.add("tx8.latency", where, f"{what}: reported {reported} but it recomputes to "
                  f"{actual}")


def _check_spm(c: _Check, grp: Tx8Group) -> int:
    """Offsets aligned, copies back to back, live buffers disjoint; returns the SPM peak."""
    where, align = f"groups.{grp.name}", c.device.spm_alignment_bytes
    extent = [(b.offset, b.offset + b.copies * pad(b.bytes, align)) for b in grp.buffers]
    for b in grp.buffers:
        if b.offset < 0 or b.offset % align:
            c.add("tx8.spm", where, f"buffer of '{b.tensor}' ({b.role}) starts at {b.offset}, "
                  f"not a multiple of {align}")
    for i, a in enumerate(grp.buffers):
        for j in range(i + 1, len(grp.buffers)):
            b = grp.buffers[j]
            live = a.start <= b.end and b.start <= a.end
            if live and extent[i][0] < extent[j][1] and extent[j][0] < extent[i][1]:
                c.add("tx8.spm", where, f"buffers of '{a.tensor}' ({a.role}) at {extent[i]} and "
                      f"'{b.tensor}' ({b.role}) at {extent[j]} are live together and overlap")
    peak = max((end for _, end in extent), default=0)
    if grp.spm_peak_bytes != peak:
        c.add("tx8.spm", where, f"spm_peak_bytes is {grp.spm_peak_bytes} but the buffers end at "
              f"{peak}")
    if peak > c.device.spm_bytes:
        c.add("tx8.spm", where, f"the buffers need {peak} SPM bytes per tile; a tile has "
              f"{c.device.spm_bytes}")
    # Ambiguity: "the planner keeps a configuration only when all its buffers fit side by
    # side" and "first fit in order of start" describe the planner; any legal offsets pass.
    return peak


# ----------------------------------------------------------------------------- spm rules


@dataclass(frozen=True)
class _Slicing:
    """A group's iteration space ``O`` cut into tiles and slices (``docs/tx8.md``, Split)."""

    shape: tuple[int, ...]
    sharding: tuple[int, ...]
    split: tuple[int, ...]
    rs: int
    rp: int

    def extents(self, whole: bool = False) -> list[int]:
        """``e``: one slice on one tile; ``whole``: the tile's whole part (p = 1)."""
        split = (1,) * len(self.shape) if whole else self.split
        return [ceil_div(ceil_div(o, s), p)
                for o, s, p in zip(self.shape, self.sharding, split, strict=True)]

    def k(self, reduce_dim: int, whole: bool = False) -> int:
        """One slice of the reduce dim on one tile; ``whole``: rp = 1."""
        return ceil_div(ceil_div(reduce_dim, self.rs), 1 if whole else self.rp)

    @property
    def slices(self) -> int:
        return math.prod(self.split) * self.rp

    @property
    def one_tile(self) -> bool:
        return all(s == 1 for s in self.sharding) and self.rs == 1


def _spm_group(c: _Check, grp: Tx8Group, where: str) -> _Slicing | None:
    """Structure, sharding and split of an spm group; its slicing when it can be priced."""
    shape = _check_structure(c, grp, where)
    if shape is None:
        return None
    ne_ops = [op for op in grp.ops if c.g.ops[op].type in NE_TYPES]
    normalized = _normalized_dims(c.g, grp.ops, len(shape))
    sharded = _check_sharding(c, grp, shape, ne_ops, normalized, where)
    split = _check_split(c, grp, shape, ne_ops, normalized, where)
    if not (sharded and split):
        return None
    return _Slicing(shape, tuple(grp.sharding), tuple(grp.split), grp.reduce_sharding,
                    grp.reduce_split)


def _check_structure(c: _Check, grp: Tx8Group, where: str) -> tuple[int, ...] | None:
    """Vector and NE ops of one output shape, heads fed from DDR, convex, connected, one
    layout; returns the shape ``O`` (None when the ops do not define one)."""
    ddr_ops = [op for op in grp.ops if c.g.ops[op].type in DDR_TYPES]
    if ddr_ops:
        c.add("tx8.group", where, f"DDR ops {ddr_ops} run alone in a ddr group, not in an "
              "spm group")
        return None
    shapes = {op: c.g.out_shape(op) for op in grp.ops}
    if len(set(shapes.values())) > 1:
        c.add("tx8.group", where, f"the ops produce outputs of different shapes {shapes}; an "
              "spm group's ops all produce its iteration space")
        return None
    inside = set(grp.ops)
    for op in grp.ops:
        fed = [t for t in c.g.ops[op].inputs if c.g.producer.get(t) in inside]
        if c.g.ops[op].type in HEAD_TYPES and fed:
            c.add("tx8.group", where, f"{c.g.ops[op].type} op '{op}' reads {fed} from inside "
                  "the group; NE, reduction and pooling ops read their inputs from DDR")
    if len(inside) > 1:
        _check_convex_connected(c, inside, where)
    if any(c.g.ops[op].type in NE_TYPES for op in grp.ops) and grp.layout != "aligned":
        c.add("tx8.layout", where, "a group holding an NE op uses the aligned layout")
    return shapes[grp.ops[0]]


def _check_convex_connected(c: _Check, inside: set[str], where: str) -> None:
    # Ambiguity: "connected" is read on the op graph (producer -> reader edges inside the
    # group, direction ignored); two ops that only share a DDR input are not connected.
    if not nx.is_weakly_connected(c.g.dag.subgraph(inside)):
        c.add("tx8.group", where, "the group's ops are not connected")
    below = set().union(*(nx.descendants(c.g.dag, op) for op in inside)) - inside
    above = set().union(*(nx.ancestors(c.g.dag, op) for op in inside)) - inside
    if below & above:
        c.add("tx8.group", where, f"not convex: paths leave the group and come back through "
              f"{sorted(below & above)}")


def _normalized_dims(g: _Graph, ops: Iterable[str], rank: int) -> set[int]:
    """Dims of ``O`` a softmax (its ``dim``) or a norm (the last) normalizes over."""
    dims: set[int] = set()
    for op in ops:
        attrs = g.attrs[op]
        if isinstance(attrs, SoftmaxAttrs):
            dims.add(normalize_dim(attrs.dim, rank))
        elif g.ops[op].type in ("layernorm", "rmsnorm"):
            dims.add(rank - 1)
    return dims


def _check_sharding(c: _Check, grp: Tx8Group, shape: tuple[int, ...], ne_ops: list[str],
                    normalized: set[int], where: str) -> bool:
    """The sharding rules; False when the sharding cannot even be priced."""
    s, rs, tiles = grp.sharding, grp.reduce_sharding, c.device.tile_count
    if len(s) != len(shape) or min(s, default=1) < 1 or rs < 1:
        c.add("tx8.sharding", where, f"sharding {s} x reduce_sharding {rs} does not give a "
              f"positive count per dim of the iteration space {list(shape)}")
        return False
    if not (all(x == 1 for x in s) and rs == 1) and math.prod(s) * rs != tiles:
        c.add("tx8.sharding", where, f"sharding {s} x reduce_sharding {rs} uses "
              f"{math.prod(s) * rs} tiles; it must use all {tiles} or one")
    for i, (x, o) in enumerate(zip(s, shape, strict=True)):
        if x > o:
            c.add("tx8.sharding", where, f"dim {i} of size {o} is sharded {x} ways")
        if x > 1 and i in normalized:
            c.add("tx8.sharding", where, f"dim {i} is normalized over and cannot be sharded")
    if rs > 1:
        if not ne_ops:
            c.add("tx8.sharding", where, "reduce_sharding > 1 needs an NE op in the group")
        for op in ne_ops:
            if c.g.is_grouped_conv(op):
                c.add("tx8.sharding", where, f"the reduce dim of grouped conv '{op}' is not "
                      "sharded")
            elif c.g.reduce_dim(op) < rs:
                c.add("tx8.sharding", where, f"'{op}' reduces over K={c.g.reduce_dim(op)} "
                      f"< reduce_sharding {rs}")
    return True


def _check_split(c: _Check, grp: Tx8Group, shape: tuple[int, ...], ne_ops: list[str],
                 normalized: set[int], where: str) -> bool:
    """The split rules; False when the split cannot even be priced."""
    p, rp, rs = grp.split, grp.reduce_split, grp.reduce_sharding
    if len(p) != len(shape) or min(p, default=1) < 1 or rp < 1:
        c.add("tx8.split", where, f"split {p} x reduce_split {rp} does not give a positive "
              f"count per dim of the iteration space {list(shape)}")
        return False
    if len(grp.sharding) == len(shape) and min(grp.sharding, default=1) >= 1:
        for i, (x, o, s) in enumerate(zip(p, shape, grp.sharding, strict=True)):
            if x > ceil_div(o, s):
                c.add("tx8.split", where, f"dim {i}: {x} slices of a tile's {ceil_div(o, s)}")
    for i in normalized:
        if p[i] > 1:
            c.add("tx8.split", where, f"dim {i} is normalized over and cannot be split")
    if rp > 1 and not ne_ops:
        c.add("tx8.split", where, "reduce_split > 1 needs an NE op in the group")
    for op in ne_ops:
        if c.g.is_grouped_conv(op):  # its reduce dim is never cut: rs = rp = 1
            if rp > 1:
                c.add("tx8.split", where, f"the reduce dim of grouped conv '{op}' is not split")
        elif rs * rp > c.g.reduce_dim(op):
            c.add("tx8.split", where, f"'{op}' reduces over K={c.g.reduce_dim(op)} < "
                  f"reduce_sharding x reduce_split = {rs * rp}")
    return True


# ----------------------------------------------------------------------------- spm cost


@dataclass
class _Reads:
    """What a group loads of one tensor: the largest slice any op reads, by whom."""

    slice_bytes: int = 0
    whole_bytes: int = 0
    last_reader: int = 0
    by_ne: bool = False


def _spm_cost(c: _Check, grp: Tx8Group, sl: _Slicing) -> _Cost:
    """Buffers, traffic and times of an spm group from its decisions."""
    d = c.device
    tiles = 1 if sl.one_tile else d.tile_count
    reads = _group_reads(c, grp, sl)
    buffers: Counter[BufferKey] = Counter()
    loads: dict[str, int] = {}
    stores: dict[str, int] = {}
    last = len(grp.ops) - 1
    copies = 2 if grp.double_buffer else 1
    prologue = load = store = 0.0

    def transfer(nbytes_: int) -> float:
        return d.dma_latency_us + tiles * nbytes_ / d.ddr_bytes_per_us

    for t, r in reads.items():
        role = "weight" if c.g.is_constant(t) else "input"
        end = last if grp.double_buffer else r.last_reader
        if role == "weight" and t in grp.resident:
            buffers[(t, role, r.whole_bytes, 1, 0, end)] += 1
            loads[t] = tiles * r.whole_bytes
            prologue += transfer(r.whole_bytes)
            continue
        buffers[(t, role, r.slice_bytes, copies, 0, end)] += 1
        per_group = sl.slices if r.by_ne else math.prod(sl.split)  # n w
        loads[t] = tiles * r.slice_bytes * per_group
        load += transfer(r.slice_bytes) / (1 if r.by_ne else sl.rp)
    compute = reduce = 0.0
    for i, op in enumerate(grp.ops):
        for t in c.g.ops[op].outputs:
            size = _slice_bytes(c, t, sl.extents(), grp.layout, sl.rs)
            if _is_stored(c.g, t, grp.ops):
                buffers[(t, "output", size, copies, 0 if grp.double_buffer else i, last)] += 1
                stores[t] = tiles * size * math.prod(sl.split)  # n / rp
                store += transfer(size) / sl.rp
            else:
                buffers[(t, "intermediate", size, 1, i, _last_reader(c.g, t, grp.ops, i))] += 1
        if c.g.ops[op].type in NE_TYPES and (sl.rs > 1 or sl.rp > 1):
            buffers[(c.g.ops[op].outputs[0], "psum", _psum_bytes(c, sl), 1, i, i)] += 1
        # vector ops and the reduce-scatter run once per output slice: 1/rp per slice
        ne = c.g.ops[op].type in NE_TYPES
        compute += _op_compute_us(c, op, sl) / (1 if ne else sl.rp)
        if ne and sl.rs > 1:
            reduce += (sl.rs - 1) * (4 * math.prod(sl.extents()) / sl.rs / d.noc_bytes_per_us
                                     + d.noc_hop_us) / sl.rp
    if grp.double_buffer:
        latency = (d.group_launch_us + prologue + load + compute + reduce + store
                   + (sl.slices - 1) * max(compute + reduce, load + store))
    else:
        latency = d.group_launch_us + prologue + sl.slices * (load + compute + reduce + store)
    return _Cost(buffers, loads, stores, compute, load, store, reduce, latency)


def _group_reads(c: _Check, grp: Tx8Group, sl: _Slicing) -> dict[str, _Reads]:
    """Every tensor the group loads (read by a group op, produced outside the group)."""
    reads: dict[str, _Reads] = {}
    inside = set(grp.ops)
    for i, op in enumerate(grp.ops):
        decl = c.g.ops[op]
        ne = decl.type in NE_TYPES
        # "every tensor but the NE ops' inputs is 1/rs of its slice"
        share = 1 if ne else sl.rs
        for j, t in enumerate(decl.inputs):
            if c.g.producer.get(t) in inside:
                continue
            r = reads.setdefault(t, _Reads())
            r.slice_bytes = max(r.slice_bytes, _slice_bytes(
                c, t, _read_extents(c.g, op, j, sl, whole=False), grp.layout, share))
            r.whole_bytes = max(r.whole_bytes, _slice_bytes(
                c, t, _read_extents(c.g, op, j, sl, whole=True), grp.layout, share))
            r.last_reader = i
            r.by_ne = r.by_ne or ne
    return reads


def _is_stored(g: _Graph, tensor: str, ops: Sequence[str]) -> bool:
    return tensor in g.outputs or any(r not in ops for r in g.readers.get(tensor, ()))


def _last_reader(g: _Graph, tensor: str, ops: Sequence[str], producer: int) -> int:
    # A tensor nobody reads lives at its producer only.
    return max((i for i, op in enumerate(ops) if op in g.readers.get(tensor, ())),
               default=producer)


def _slice_bytes(c: _Check, tensor: str, extents: list[int], layout: str, share: int) -> int:
    """Bytes of one slice of ``tensor``: an activation's last extent padded in the aligned
    layout (weights never are), then ``1/share`` of the elements (rounded up)."""
    dims = list(extents)
    if layout == "aligned" and not c.g.is_constant(tensor):
        dims[-1] = aligned(dims[-1], c.device.channel_alignment)
    return nbytes(ceil_div(math.prod(dims), share), c.g.tensors[tensor].dtype)


def _psum_bytes(c: _Check, sl: _Slicing) -> int:
    """``prod(e)`` f32 elements, never padded (docs/tx8.md: weights and psums are not) and
    not ``1/rs``: the whole partial sum before the reduce-scatter."""
    return nbytes(math.prod(sl.extents()), "f32")


def _read_extents(g: _Graph, op: str, j: int, sl: _Slicing, whole: bool) -> list[int]:
    """The extents of operand ``j`` one slice of ``op`` reads (``whole``: p = 1, rp = 1)."""
    decl, attrs = g.ops[op], g.attrs[op]
    e, shape = sl.extents(whole), g.shape(decl.inputs[j])
    if decl.type in ("matmul", "linear"):
        assert isinstance(attrs, MatmulAttrs)
        return _matmul_read(j, shape, attrs, e, sl.k(g.reduce_dim(op), whole))
    if decl.type == "conv2d":
        assert isinstance(attrs, Conv2dAttrs)
        weight = g.shape(decl.inputs[1])
        return _conv_read(j, g.shape(decl.inputs[0]), weight, attrs, e,
                          sl.k(g.reduce_dim(op), whole))
    if decl.type in POOL_TYPES:
        assert isinstance(attrs, PoolAttrs)
        return _pool_read(shape, attrs, e)
    if decl.type in REDUCE_TYPES:
        assert isinstance(attrs, ReduceAttrs)
        return _reduce_read(shape, attrs, e)
    return _broadcast_read(shape, sl.shape, e)


def _matmul_read(j: int, shape: list[int], attrs: MatmulAttrs, e: list[int],
                 k: int) -> list[int]:
    if j == 0:
        return [*e[:-2], e[-2], k]
    if j == 2:
        return [e[-1]]  # a linear's bias: e_N
    batch = e[:-2] if len(shape) > 2 else []
    return [*batch, e[-1], k] if attrs.transpose_b else [*batch, k, e[-1]]


def _window(size: int, extent: int, kernel: int, stride: int, padding: int,
            dilation: int) -> int:
    """Input rows (or columns) ``extent`` output rows need: the halo, at most the padded input."""
    return min(size + 2 * padding, (extent - 1) * stride + (kernel - 1) * dilation + 1)


def _conv_read(j: int, x: list[int], w: list[int], attrs: Conv2dAttrs, e: list[int],
               k: int) -> list[int]:
    cout, cin_g, kh, kw = w
    grouped = attrs.groups > 1
    if j == 0:
        # Ambiguity: a grouped conv's input channels min(C, e_3 C / Cout) are rounded up
        # when e_3 C / Cout is fractional.
        channels = min(x[3], ceil_div(e[3] * x[3], cout)) if grouped else k
        (sh, sw), (ph, pw), (dh, dw) = attrs.stride, attrs.padding, attrs.dilation
        return [e[0], _window(x[1], e[1], kh, sh, ph, dh), _window(x[2], e[2], kw, sw, pw, dw),
                channels]
    if j == 1:
        return [e[3], cin_g if grouped else k, kh, kw]
    return [e[3]]  # bias


def _pool_read(x: list[int], attrs: PoolAttrs, e: list[int]) -> list[int]:
    (kh, kw), (sh, sw) = attrs.kernel_size, attrs.stride or attrs.kernel_size
    ph, pw = attrs.padding
    return [e[0], _window(x[1], e[1], kh, sh, ph, 1), _window(x[2], e[2], kw, sw, pw, 1), e[3]]


def _reduce_read(x: list[int], attrs: ReduceAttrs, e: list[int]) -> list[int]:
    """``e_i`` on kept dims (in order, with or without keepdim), the whole dim on reduced."""
    reduced = {normalize_dim(d, len(x)) for d in attrs.dims}
    if attrs.keepdim:
        return [size if i in reduced else e[i] for i, size in enumerate(x)]
    kept = iter(e)
    return [size if i in reduced else next(kept) for i, size in enumerate(x)]


def _broadcast_read(shape: list[int], out: tuple[int, ...], e: list[int]) -> list[int]:
    """Right-aligned to ``O``: ``e_i`` where the operand's dim matches ``O_i``, else 1."""
    offset = len(out) - len(shape)
    return [e[offset + j] if offset + j >= 0 and size == out[offset + j] else 1
            for j, size in enumerate(shape)]


def _op_compute_us(c: _Check, op: str, sl: _Slicing) -> float:
    d, decl = c.device, c.g.ops[op]
    if decl.type in NE_TYPES:
        return 2 * _padded_macs(c, op, sl) / d.tile_flops_per_us
    # Ambiguity: "elements the op's output slice" counts prod(e) unpadded even in the
    # aligned layout (the padding is a bytes rule), then 1/rs of it rounded up; a
    # pooling op's 1/rs share is taken before multiplying by the window.
    if decl.type in REDUCE_TYPES:
        x = c.g.shape(decl.inputs[0])
        attrs = c.g.attrs[op]
        assert isinstance(attrs, ReduceAttrs)
        elements = ceil_div(math.prod(_reduce_read(x, attrs, sl.extents())), sl.rs)
    else:
        elements = ceil_div(math.prod(sl.extents()), sl.rs)
        if decl.type in POOL_TYPES:
            pool = c.g.attrs[op]
            assert isinstance(pool, PoolAttrs)
            elements *= math.prod(pool.kernel_size)
    return elements * PASSES.get(decl.type, 1) / d.vector_elements_per_us


def _padded_macs(c: _Check, op: str, sl: _Slicing) -> int:
    """MACs of one slice with the dims padded to the PE array ``[M, K, N]`` (8, 16, 8)."""
    pm, pk, pn = c.device.pe_array
    e, decl = sl.extents(), c.g.ops[op]
    if decl.type == "conv2d":
        _, cin_g, kh, kw = c.g.shape(decl.inputs[1])
        reduce = cin_g if c.g.is_grouped_conv(op) else sl.k(c.g.reduce_dim(op))
        return pad(e[0] * e[1] * e[2], pm) * pad(reduce * kh * kw, pk) * pad(e[3], pn)
    return (math.prod(e[:-2]) * pad(e[-2], pm) * pad(sl.k(c.g.reduce_dim(op)), pk)
            * pad(e[-1], pn))


# ----------------------------------------------------------------------------- layouts


def _check_tensor_layouts(c: _Check, section: Tx8Section,
                          owner: dict[str, int]) -> dict[str, str]:
    """Each activation's layout is its producer group's (inputs compact); returns them."""
    # Ambiguity: "every activation" includes the intermediates that never leave SPM; they
    # carry their group's layout too.
    expected: dict[str, str] = {}
    for t, decl in c.g.tensors.items():
        if decl.kind == "input":
            expected[t] = "compact"
        elif decl.kind == "activation" and c.g.producer[t] in owner:
            expected[t] = section.groups[owner[c.g.producer[t]]].layout
    for t, layout in section.tensor_layouts.items():
        if t not in c.g.tensors or c.g.is_constant(t):
            c.add("tx8.layout", f"tensors.{t}", f"'{t}' is not an activation of the graph")
        elif t in expected and layout != expected[t]:
            c.add("tx8.layout", f"tensors.{t}", f"'{t}' is listed {layout} but its producer "
                  f"stores it {expected[t]}")
    for t in expected.keys() - section.tensor_layouts.keys():
        c.add("tx8.layout", f"tensors.{t}", f"activation '{t}' has no layout in tensor_layouts")
    return expected


def _needed_conversions(c: _Check, groups: Sequence[Tx8Group], owner: dict[str, int],
                        layouts: dict[str, str]) -> dict[tuple[str, str, str], set[str]]:
    """(tensor, from, to) -> consumers: every reader group of the other layout, and the host
    for a graph output stored aligned."""
    needed: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    align = c.device.channel_alignment
    for t, stored in layouts.items():
        width = c.g.shape(t)[-1]
        if width <= align and aligned(width, align) == width:
            continue  # one Cx block already aligned: both layouts lie the same way
        home = owner.get(c.g.producer.get(t, ""))
        for op in c.g.readers.get(t, ()):
            if op in owner and owner[op] != home and groups[owner[op]].layout != stored:
                needed[(t, stored, groups[owner[op]].layout)].add(groups[owner[op]].name)
        if t in c.g.outputs and stored == "aligned":
            needed[(t, "aligned", "compact")].add("host")
    return needed


def _check_conversions(c: _Check, section: Tx8Section, owner: dict[str, int],
                       layouts: dict[str, str]) -> float:
    """The plan's conversions are exactly the needed ones; returns their recomputed latency."""
    d, total = c.device, 0.0
    planned: dict[tuple[str, str, str], list[Tx8Conversion]] = defaultdict(list)
    for conv in section.conversions:
        planned[(conv.tensor, conv.from_, conv.to)].append(conv)
    needed = _needed_conversions(c, section.groups, owner, layouts)
    for key, consumers in needed.items():
        t, old, new = key
        where = f"conversions.{t}"
        size = (c.g.whole_bytes(t, old, d.channel_alignment)
                + c.g.whole_bytes(t, new, d.channel_alignment))
        latency = d.group_launch_us + 2 * d.dma_latency_us + size / d.ddr_bytes_per_us
        total += latency
        if not planned.get(key):
            c.add("tx8.conversions", where, f"'{t}' is stored {old} but {sorted(consumers)} "
                  f"read it {new}; the conversion is missing")
            continue
        conv = planned[key][0]
        if sorted(conv.consumers) != sorted(consumers):
            c.add("tx8.conversions", where, f"{old} -> {new}: consumers {conv.consumers}, "
                  f"expected {sorted(consumers)}")
        if conv.bytes != size:
            c.add("tx8.conversions", where, f"{old} -> {new}: {conv.bytes} bytes, expected "
                  f"{size} (old layout plus new)")
        c.compare("tx8.conversions", where, f"{old} -> {new} latency_us", conv.latency_us,
                  latency)
    for key, convs in planned.items():
        if key not in needed or len(convs) > 1:
            c.add("tx8.conversions", f"conversions.{key[0]}", f"{key[1]} -> {key[2]} is "
                  f"listed {len(convs)} times but {int(key in needed)} is needed")
    return total
