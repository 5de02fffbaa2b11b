"""The registry of problem families: adding a family is its folder plus one line here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from models.errors import InputValidationError, Issue
from solver.family import Family
from solver.fusion.family import FAMILY as FUSION
from solver.iopddl.family import FAMILY as IOPDDL
from solver.layout.family import FAMILY as LAYOUT

FAMILIES: dict[str, Family] = {f.name: f for f in (FUSION, LAYOUT, IOPDDL)}


def family(name: str) -> Family:
    """The family called ``name``, or a fault listing the known ones."""
    if name not in FAMILIES:
        raise InputValidationError([Issue(
            ("kind",), f"unknown problem family '{name[:100]}'; known: {', '.join(FAMILIES)}",
            "family.unknown")], "request")
    return FAMILIES[name]


def detect(doc: Any) -> Family:
    """The family a document belongs to, from its content alone; a fault that says what
    each family looks like and what this document has."""
    if isinstance(doc, Mapping):
        for f in FAMILIES.values():
            if f.recognizes(doc):
                return f
    seen = sorted(map(str, doc.keys()))[:8] if isinstance(doc, Mapping) else type(doc).__name__
    hints = "; ".join(f.hint for f in FAMILIES.values())
    raise InputValidationError(
        [Issue((), f"cannot tell the problem family: {hints}; this document has {seen}",
               "family.unknown")], "document")


def mismatch(expected: Family, doc: Any) -> InputValidationError | None:
    """When ``doc`` is plainly a document of another family than ``expected``: one fault
    naming the family detected and where its documents go (``None`` otherwise)."""
    if not isinstance(doc, Mapping) or expected.recognizes(doc):
        return None
    for f in FAMILIES.values():
        if f is not expected and f.recognizes(doc):
            return InputValidationError([Issue(
                (), f"this is a {f.document}, not a {expected.document}: use "
                f"'layoutsat {f.name} ...' or POST /v1/{f.name}/...", "family.mismatch")],
                expected.document)
    return None
