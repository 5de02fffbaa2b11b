"""Tell which problem family a JSON document belongs to, from its content alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from models.errors import InputValidationError, Issue

Family = Literal["fusion", "layout"]

FUSION_KEYS = frozenset({"widths", "heights", "op_types", "base_costs", "native_granularity"})
LAYOUT_FORMAT = "layoutsat-graph"
LAYOUT_KEYS = frozenset({"tensors", "ops"})


def detect_family(data: Any) -> Family:
    """'fusion' for the MLSys 2026 contest format, 'layout' for a ``layoutsat-graph``;
    raise when the document is no known family."""
    if isinstance(data, Mapping) and FUSION_KEYS & data.keys():
        return "fusion"
    if isinstance(data, Mapping) and (data.get("format") == LAYOUT_FORMAT
                                      or LAYOUT_KEYS <= data.keys()):
        return "layout"
    keys = sorted(data.keys())[:8] if isinstance(data, Mapping) else type(data).__name__
    raise InputValidationError(
        [Issue((), "cannot tell the problem family: a fusion problem has the keys "
               f"{sorted(FUSION_KEYS)}, a layout graph has \"format\": \"{LAYOUT_FORMAT}\"; this "
               f"document has {keys}", "family.unknown")],
        "document",
    )
