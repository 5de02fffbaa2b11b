"""Layout ops the importer made that undo one another, removed after mapping.

The importer puts a permute into channels-last before each op that wants it and one back
after; between two such ops (a ConvNeXt block, a Conv1d stack) the pairs cancel, and so
do reshapes that give back their input's shape. Readers of what a removed op produced are
rewired to what the first op read; a graph output is never removed.
"""

from __future__ import annotations

import math
from collections import defaultdict

from models.layout_ops import BINARY_TYPES, UNARY_TYPES
from solver.onnx_import.builder import Builder

LAYOUT_OPS = ("permute", "transpose", "reshape")


def _perm(op: dict, rank: int) -> list[int]:
    """The permutation a permute or transpose op applies."""
    if op["type"] == "permute":
        return [p % rank for p in op["attrs"]["perm"]]
    perm = list(range(rank))
    a, c = op["attrs"]["dim0"] % rank, op["attrs"]["dim1"] % rank
    perm[a], perm[c] = perm[c], perm[a]
    return perm


def _keeps_element_order(shape: list[int], steps: list[tuple[dict, list[int]]]) -> bool:
    """Do the layout ops ``steps`` (each with its output shape), applied to a tensor of
    ``shape``, leave its elements in their order, i.e. amount to one reshape? Each dim is
    tracked as the run of input dims (size 1 dropped) it holds; a reshape that splits an
    input dim is not followed (False)."""
    dims = [[i] if n != 1 else [] for i, n in enumerate(shape)]
    sizes = dict(enumerate(shape))
    for op, out in steps:
        if op["type"] == "reshape":
            flat, dims = [a for d in dims for a in d], []
            for n in out:
                group, size = [], 1
                while size < n and flat:
                    group.append(flat.pop(0))
                    size *= sizes[group[-1]]
                if size != n:
                    return False
                dims.append(group)
        else:
            dims = [dims[p] for p in _perm(op, len(dims))]
    flat = [a for d in dims for a in d]
    return flat == sorted(flat)


def _only_relabels(op: dict, shape: list[int]) -> bool:
    """A permute that moves only size-1 dims keeps the element order: a reshape."""
    moved = [p for p in _perm(op, len(shape)) if shape[p] != 1]
    return moved == sorted(moved)


class _Canceller:
    """Layout ops (permute, transpose, reshape) that undo one another, removed with the
    readers of what they produced rewired to what the first one read."""

    def __init__(self, b: Builder, outputs: set[str]):
        self.b, self.outputs = b, outputs
        self.readers: dict[str, list[dict]] = defaultdict(list)
        for op in b.ops:
            for t in dict.fromkeys(op["inputs"]):
                self.readers[t].append(op)
        self.dropped: set[int] = set()

    def undoes(self, first: dict, second: dict) -> bool:
        """Does ``second`` give back exactly what ``first`` read?"""
        if second["type"] not in LAYOUT_OPS or second["outputs"][0] in self.outputs:
            return False
        if "reshape" in (first["type"], second["type"]):
            return first["type"] == second["type"] and \
                self.b.shape(first["inputs"][0]) == self.b.shape(second["outputs"][0])
        rank = len(self.b.shape(first["inputs"][0]))
        p1, p2 = _perm(first, rank), _perm(second, rank)
        return [p1[i] for i in p2] == list(range(rank))

    def read(self, op: dict, old: str, new: str) -> None:
        op["inputs"] = [new if t == old else t for t in op["inputs"]]
        if op["type"] == "opaque":
            op["inputs"] = list(dict.fromkeys(op["inputs"]))
        self.readers[old] = [r for r in self.readers[old] if r is not op]
        if not any(r is op for r in self.readers[new]):
            self.readers[new].append(op)

    def drop(self, op: dict, output_too: bool = True) -> None:
        self.dropped.add(id(op))
        for t in dict.fromkeys(op["inputs"]):
            self.readers[t] = [r for r in self.readers[t] if r is not op]
        if output_too:
            del self.b.tensors[op["outputs"][0]]
        if op["type"] == "reshape":
            self.b.report.reshapes_cancelled += 1
        else:
            self.b.report.permutes_cancelled += 1

    def step(self, op: dict) -> bool:
        """Cancel what can be cancelled with layout op ``op``; True when anything was."""
        a, t = op["inputs"][0], op["outputs"][0]
        if t in self.outputs:
            return False
        changed = False
        if op["type"] == "reshape" and self.b.shape(a) == self.b.shape(t):
            for r in list(self.readers[t]):
                self.read(r, t, a)
        for r in list(self.readers[t]):
            if self.undoes(op, r):  # op then its inverse
                for user in list(self.readers[r["outputs"][0]]):
                    self.read(user, r["outputs"][0], a)
                self.drop(r)
                changed = True
            elif op["type"] == r["type"] == "reshape":  # a chain of reshapes: one will do
                self.read(r, t, a)
                changed = True
            else:
                changed |= self.around_elementwise(op, r)
        if not self.readers[t]:
            self.drop(op)
            changed = True
        return changed

    def fold_chain(self, op: dict) -> bool:
        """``op`` and the layout ops after it, through unary elementwise ops, each the only
        reader of the one before: when together they keep the element order (Whisper's
        Conv1d back to channels-first, a reshape, an activation, then a transpose back to
        channels-last), the elementwise ops run on what ``op`` read, the last layout op
        becomes the one reshape and the others go (``op`` by ``step``)."""
        chain, last, steps = [op], 0, [(op, self.b.shape(op["outputs"][0]))]
        while len(readers := self.readers[chain[-1]["outputs"][0]]) == 1 and \
                readers[0]["type"] in (*LAYOUT_OPS, *UNARY_TYPES) and \
                chain[-1]["outputs"][0] not in self.outputs:
            chain.append(readers[0])
            if readers[0]["type"] in LAYOUT_OPS:
                steps.append((readers[0], self.b.shape(readers[0]["outputs"][0])))
                if _keeps_element_order(self.b.shape(op["inputs"][0]), steps):
                    last = len(chain) - 1  # kept (retyped): it may produce a graph output
        if last == 0:
            return False
        source = op["inputs"][0]
        for layout in chain[1:last]:
            if layout["type"] in LAYOUT_OPS:
                self.drop(layout)
        for e in chain[1:last]:
            if e["type"] not in LAYOUT_OPS:
                self.read(e, e["inputs"][0], source)
                self.b.tensors[e["outputs"][0]]["shape"] = list(self.b.shape(op["inputs"][0]))
                source = e["outputs"][0]
        end = chain[last]
        self.read(end, end["inputs"][0], source)
        if end["type"] != "reshape":
            end["type"], end["attrs"] = "reshape", {}
            self.b.report.permutes_as_reshape += 1
        return True

    def around_elementwise(self, op: dict, e: dict) -> bool:
        """op, an elementwise op (unary, or binary with a constant), then op's inverse: the
        elementwise op runs on what op read, its constant permuted to match, and produces
        what the inverse did."""
        v, t = e["outputs"][0], op["outputs"][0]
        users = self.readers[v]
        constants = [x for x in e["inputs"] if x != t]
        binary = e["type"] in BINARY_TYPES and op["type"] != "reshape" and \
            all(self.b.tensors[c]["kind"] == "constant" for c in constants)
        if not (e["type"] in UNARY_TYPES or binary) or v in self.outputs or len(users) != 1 \
                or not self.undoes(op, users[0]):
            return False
        rank = len(self.b.shape(t))
        if any(len(self.b.shape(c)) > rank for c in constants):
            return False
        inverse = users[0]
        self.drop(inverse, output_too=False)
        del self.b.tensors[v]
        self.read(e, t, op["inputs"][0])
        for c in constants:
            self.read(e, c, self.permuted(c, _perm(op, rank)))
            if not self.readers[c]:
                del self.b.tensors[c]
        e["outputs"] = inverse["outputs"]
        return True

    def permuted(self, c: str, perm: list[int]) -> str:
        """Constant ``c``, broadcast against a tensor permuted by ``perm``, in the shape that
        broadcasts the same against the tensor before the permute."""
        shape = self.b.shape(c)
        if math.prod(shape) == 1:
            return c
        padded = [1] * (len(perm) - len(shape)) + shape
        before = [0] * len(perm)
        for j, p in enumerate(perm):
            before[p] = padded[j]
        name = f"{c}:{'x'.join(map(str, before))}"
        self.b.tensors.setdefault(name, {**self.b.tensors[c], "name": name, "shape": before})
        return name

    def run(self) -> None:
        for op in self.b.ops:
            if op["type"] in ("permute", "transpose") and \
                    _only_relabels(op, self.b.shape(op["inputs"][0])):
                op["type"], op["attrs"] = "reshape", {}
                self.b.report.permutes_as_reshape += 1
        while self.cancel_pairs() | self.fold_chains():
            pass
        self.b.ops = [op for op in self.b.ops if id(op) not in self.dropped]

    def live_layout_ops(self) -> list[dict]:
        return [op for op in self.b.ops if op["type"] in LAYOUT_OPS and id(op) not in self.dropped]

    def cancel_pairs(self) -> bool:
        """The pairwise rules of ``step`` until none applies; True when any did."""
        changed = False
        while any([self.step(op) for op in self.live_layout_ops() if id(op) not in self.dropped]):
            changed = True
        return changed

    def fold_chains(self) -> bool:
        """Chains the pairwise rules leave (``fold_chain``), then what that frees."""
        folded = False
        for op in self.live_layout_ops():
            if id(op) not in self.dropped and op["outputs"][0] not in self.outputs \
                    and self.fold_chain(op):
                self.step(op)
                folded = True
        return folded


def cancel_layout_ops(b: Builder, outputs: set[str]) -> None:
    """Remove from ``b`` the layout ops that cancel (``outputs``: the graph outputs)."""
    _Canceller(b, outputs).run()
