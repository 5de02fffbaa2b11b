"""The ONNX importer is optional (``pip install 'layoutsat[import]'``): load it on demand
and turn its absence into a clear input error rather than an ImportError."""

from __future__ import annotations

from types import ModuleType

from models.errors import InputValidationError, Issue


def importer() -> ModuleType:
    try:
        import solver.onnx_import as module
    except ImportError as exc:
        raise InputValidationError([Issue((), f"ONNX import needs the onnx package ({exc}): "
                                          "pip install 'layoutsat[import]'",
                                          "import.unavailable")], "request") from None
    return module


MAX_DIM = 2**31 - 1


def parse_dims(values: list[str], loc: tuple[str, ...] = ("dim",)) -> dict[str, int]:
    """``NAME=VALUE`` pairs (``--dim`` / ``?dim=``) as a mapping, or every malformed one
    (located under ``loc``)."""
    dims, issues = {}, []
    for i, v in enumerate(values):
        name, _, value = v.partition("=")
        if name and value.isdigit() and 0 < int(value) <= MAX_DIM:
            dims[name] = int(value)
        else:
            issues.append(Issue((*loc, i), f"dim takes NAME=VALUE with VALUE in 1..{MAX_DIM}, "
                                f"got '{v[:100]}'", "option.dim"))
    if issues:
        raise InputValidationError(issues, "options")
    return dims
