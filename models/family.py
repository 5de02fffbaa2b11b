"""Tell which problem family a JSON document belongs to, from its content alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from models.errors import InputValidationError, Issue

Family = Literal["fusion", "layout"]

FUSION_KEYS = frozenset({"widths", "heights", "op_types", "base_costs", "native_granularity"})


def detect_family(data: Any) -> Family:
    """'fusion' for the MLSys 2026 contest format; raise when the document is no known family."""
    if isinstance(data, Mapping) and FUSION_KEYS & data.keys():
        return "fusion"
    keys = sorted(data.keys())[:8] if isinstance(data, Mapping) else type(data).__name__
    raise InputValidationError(
        [Issue((), "cannot tell the problem family: a fusion problem has the keys "
               f"{sorted(FUSION_KEYS)}; this document has {keys}", "family.unknown")],
        "document",
    )
