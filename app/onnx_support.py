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


def parse_dims(values: list[str]) -> dict[str, int]:
    """``NAME=VALUE`` pairs (``--dim`` / ``?dim=``) as a mapping, or every malformed one."""
    dims, issues = {}, []
    for i, v in enumerate(values):
        name, _, value = v.partition("=")
        if name and value.isdigit() and int(value) > 0:
            dims[name] = int(value)
        else:
            issues.append(Issue(("dim", i), f"dim takes NAME=VALUE with a positive VALUE, got "
                                f"'{v}'", "option.dim"))
    if issues:
        raise InputValidationError(issues, "options")
    return dims
