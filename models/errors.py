"""One error type for every bad input, so the API, the CLI and the solvers report it alike.

A problem is rejected with *all* the faults found, each with the JSON path of the
offending value and the rule it breaks, because a user fixing a file by hand wants
the whole list at once, not one fault per round trip.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Issue:
    """One fault in an input: where it is (a JSON path) and which rule it breaks."""

    loc: Loc
    msg: str
    rule: str

    @property
    def path(self) -> str:
        """The location as a JSONPath-like string, e.g. ``$.inputs[3][1]``."""
        out = "$"
        for part in self.loc:
            out += f"[{part}]" if isinstance(part, int) else f".{part}"
        return out

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "loc": list(self.loc), "rule": self.rule, "msg": self.msg}

    def __str__(self) -> str:
        return f"{self.path}: {self.msg}"


class InputValidationError(ValueError):
    """Raised when an input breaks one or more rules; carries every fault found."""

    def __init__(self, issues: Sequence[Issue], what: str = "input") -> None:
        if not issues:
            raise ValueError("InputValidationError needs at least one issue")
        self.issues: list[Issue] = list(issues)
        self.what = what
        super().__init__(self.summary())

    def __reduce__(self) -> tuple[object, ...]:
        """Rebuilt from its issues, not its message, when it crosses a process boundary."""
        return (type(self), (self.issues, self.what))

    def summary(self) -> str:
        n = len(self.issues)
        head = f"invalid {self.what}: {n} error{'s' if n != 1 else ''}"
        return head + "".join(f"\n  {issue}" for issue in self.issues)

    def as_dict(self) -> dict[str, object]:
        return {
            "detail": f"invalid {self.what}",
            "errors": [issue.as_dict() for issue in self.issues],
        }


def issues_from_pydantic(exc: ValidationError, prefix: Loc = ()) -> list[Issue]:
    """Translate pydantic's errors into Issues, keeping their locations and messages; a
    custom error type with a dot (``solver.unknown``) is the rule itself, others are
    ``schema.<type>``."""
    return [
        Issue(
            loc=prefix + tuple(part for part in err["loc"] if not _wrapper(part)),
            msg=_pydantic_message(err),
            rule=err["type"] if "." in err["type"] else f"schema.{err['type']}",
        )
        for err in exc.errors(include_url=False)
    ]


PRESET_TAG, SPEC_TAG, TX8_TAG = "is:preset", "is:spec", "is:tx8"
"""The tags of the discriminated unions of devices and meshes (a preset's name, a spec, a
TX8 spec): pydantic puts the tag in an error's location, which names no field."""
UNION_TAGS = frozenset({PRESET_TAG, SPEC_TAG, TX8_TAG})


def _wrapper(part: str | int) -> bool:
    """A location part pydantic adds for a validator around a model or for the member of a
    discriminated union, not a field."""
    return isinstance(part, str) and (part.startswith("function-") or part in UNION_TAGS)


def _pydantic_message(err: dict) -> str:
    msg = str(err["msg"])
    if err["type"] == "missing":
        return f"required field '{err['loc'][-1]}' is missing"
    return msg


def raise_if_any(issues: Iterable[Issue], what: str) -> None:
    """Raise InputValidationError when ``issues`` is not empty."""
    found = list(issues)
    if found:
        raise InputValidationError(found, what)


class NoSolutionError(InputValidationError):
    """A well-formed problem for which a solver finds no valid solution.

    It shares the shape of every input fault (a 422 in the API, exit 1 in the CLI): the
    request is understood, but it cannot be answered.
    """

    def __init__(self, issues: Sequence[Issue], solver: str) -> None:
        self.solver = solver
        super().__init__(issues, f"problem for solver '{solver}'")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.issues, self.solver))

    def summary(self) -> str:
        return f"no solution found by solver '{self.solver}'" + "".join(
            f"\n  {issue}" for issue in self.issues)

    def as_dict(self) -> dict[str, object]:
        return {"detail": f"no solution found by solver '{self.solver}'",
                "errors": [issue.as_dict() for issue in self.issues]}
