"""The registry of problem families: adding a family is its folder plus one line here.

A family's module is imported when the family is first asked for (``family``), so a
command line that solves one family does not import the others (0.2 s of start-up, which a
contest's time limit counts). ``FAMILIES`` holds every family, imported on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import import_module
from typing import Any

from models.errors import InputValidationError, Issue
from solver.family import Family

MODULES = {"fusion": "solver.fusion.family", "layout": "solver.layout.family",
           "iopddl": "solver.iopddl.family"}
"""Each family's module (it defines ``FAMILY``), by family name."""


def family(name: str) -> Family:
    """The family called ``name``, or a fault listing the known ones."""
    if name not in MODULES:
        raise InputValidationError([Issue(
            ("kind",), f"unknown problem family '{name[:100]}'; known: {', '.join(MODULES)}",
            "family.unknown")], "request")
    return import_module(MODULES[name]).FAMILY


@cache
def every_family() -> dict[str, Family]:
    """Every family by name (importing each)."""
    return {name: family(name) for name in MODULES}


def __getattr__(name: str) -> Any:
    """``FAMILIES``: ``every_family()``, made when first imported from here."""
    if name == "FAMILIES":
        return every_family()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def detect(doc: Any) -> Family:
    """The family a document belongs to, from its content alone; a fault that says what
    each family looks like and what this document has."""
    if isinstance(doc, Mapping):
        for f in every_family().values():
            if f.recognizes(doc):
                return f
    seen = sorted(map(str, doc.keys()))[:8] if isinstance(doc, Mapping) else type(doc).__name__
    hints = "; ".join(f.hint for f in every_family().values())
    raise InputValidationError(
        [Issue((), f"cannot tell the problem family: {hints}; this document has {seen}",
               "family.unknown")], "document")


def mismatch(expected: Family, doc: Any) -> InputValidationError | None:
    """When ``doc`` is plainly a document of another family than ``expected``: one fault
    naming the family detected and where its documents go (``None`` otherwise)."""
    if not isinstance(doc, Mapping) or expected.recognizes(doc):
        return None
    for f in every_family().values():
        if f is not expected and f.recognizes(doc):
            return InputValidationError([Issue(
                (), f"this is a {f.document}, not a {expected.document}: use "
                f"'layoutsat {f.name} ...' or POST /v1/{f.name}/...", "family.mismatch")],
                expected.document)
    return None
