"""Stack N copies of an imported block (a decoder layer) into one deep graph, so a model
with billions of parameters is imported from one exported layer."""

from __future__ import annotations

from typing import Any

from models.errors import InputValidationError, Issue


def carried_pair(doc: dict[str, Any]) -> tuple[str, str]:
    """The (input, output) the copies chain through: the first graph output and the graph
    input of the same shape and dtype (a layer's hidden state in and out)."""
    tensors = {t["name"]: t for t in doc["tensors"]}
    out = tensors[doc["outputs"][0]]
    for t in doc["tensors"]:
        if t["kind"] == "input" and t["shape"] == out["shape"] and t["dtype"] == out["dtype"]:
            return t["name"], out["name"]
    raise InputValidationError([Issue(("repeat",), f"cannot stack copies: no graph input has "
                                      f"the shape {out['shape']} of the first output "
                                      f"'{out['name']}' to chain through", "repeat.no_carry")],
                               "import options")


def stack(doc: dict[str, Any], copies: int) -> dict[str, Any]:
    """``copies`` chained copies: copy k reads copy k-1's carried output where copy 0 read
    the carried input. Every other input (a KV cache) and every weight is per copy; the
    outputs are the last carried output and every copy's other outputs."""
    if copies == 1:
        return doc
    carried_in, carried_out = carried_pair(doc)
    tensors, ops, outputs = [], [], []
    for k in range(copies):
        def name(n: str, k: int = k) -> str:
            if n == carried_in and k > 0:
                return f"L{k - 1}.{carried_out}"
            return f"L{k}.{n}"

        tensors += [{**t, "name": name(t["name"])} for t in doc["tensors"]
                    if not (k > 0 and t["name"] == carried_in)]
        ops += [{**op, "name": f"L{k}.{op['name']}", "inputs": [name(i) for i in op["inputs"]],
                 "outputs": [name(o) for o in op["outputs"]]} for op in doc["ops"]]
        outputs += [name(o) for o in doc["outputs"]
                    if o != carried_out or k == copies - 1]
    return {**doc, "name": f"{doc['name']}-x{copies}", "tensors": tensors, "ops": ops,
            "outputs": outputs}
