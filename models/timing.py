"""The timing fields every solve's answer carries, so a deterministic answer can leave its
wall time out and repeat byte for byte."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

WallTime = Annotated[float | None, Field(
    description="seconds the solve took; null for a deterministic answer, so that it "
    "repeats byte for byte")]
Deterministic = Annotated[bool, Field(
    description="solved under a deterministic work budget and not stopped by the wall "
    "clock: the same input and options give this same answer")]
