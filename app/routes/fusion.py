"""Routes of the fusion (MLSys 2026) family under ``/v1/fusion``."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel

from models.errors import raise_if_any
from models.fusion import FusionProblem, problem_issues
from solver.fusion.problem import summarize

router = APIRouter(prefix="/v1/fusion", tags=["fusion"])

ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    422: {"description": "Invalid input: every fault with its JSON path and rule"},
}


class ProblemSummary(BaseModel):
    valid: bool
    summary: dict[str, Any]


def checked(problem: FusionProblem) -> FusionProblem:
    """The body after the cross-field rules; the schema rules ran when FastAPI parsed it."""
    raise_if_any(problem_issues(problem), "fusion problem")
    return problem


@router.post("/validate", response_model=ProblemSummary, responses=ERROR_RESPONSES,
             summary="Validate a problem and summarize it")
def validate(problem: FusionProblem) -> ProblemSummary:
    """Sizes, graph boundary and compute/I-O lower bounds of a valid problem, or a 422."""
    return ProblemSummary(valid=True, summary=summarize(checked(problem)))
