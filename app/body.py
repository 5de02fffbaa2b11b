"""Reading a JSON request body with every fault named: the content type, the encoding,
the syntax, how deep it nests and how long its numbers are.

FastAPI's own body parsing answers a bare 400 for most of these (a 10,000-level nesting
raises RecursionError inside the parser, a 5,000-digit integer ValueError); here each is
a 4xx whose body names the field and the rule, like every other input fault.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

import numpy as np

from models.errors import InputValidationError, Issue

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a document may have (the formats need under 10)."""
MAX_NUMBER_DIGITS = 40
"""Longest run of digits in a number; every numeric field is bounded far below 10^40."""
JSON_TYPES = ("application/json",)
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_DIGIT_MARKS = bytes(0x31 if chr(b).isdigit() and b < 128 else 0x30 for b in range(256))
"""Digits to b"1", every other byte to b"0": a long number is then a run of b"1" that
``bytes.find`` finds at memory speed (a regex took 4 s on a 93 MB contest file)."""
_LONG_NUMBER = b"1" * (MAX_NUMBER_DIGITS + 1)
_BRACKETS = bytes(range(256)).translate(None, b"[]{}")
_DEPTH_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


class UnsupportedMediaType(InputValidationError):
    """A body sent with a content type the route does not read (answered 415)."""


def check_content_type(content_type: str | None) -> None:
    media = (content_type or "").split(";")[0].strip().lower()
    if media in JSON_TYPES or media.endswith("+json"):
        return
    shown = f"'{media}'" if media else "missing"
    raise UnsupportedMediaType([Issue(
        ("headers", "content-type"), f"content-type is {shown}; send the body as "
        "application/json", "content_type.unsupported")], "request")


def parse_json(raw: bytes, what: str = "request body") -> Any:
    """The document in ``raw`` (``what``: how messages name it), or an InputValidationError
    naming what is wrong with it. NaN and Infinity are not JSON and are refused."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputValidationError([Issue(
            (), f"{what} is not UTF-8: byte {exc.start} (0x{raw[exc.start]:02x}) "
            "cannot be decoded", "json.encoding")], "request") from None
    outside_strings = _STRING.sub(b'""', raw)
    depth = _depth(outside_strings)
    if depth > MAX_DEPTH:
        raise InputValidationError([Issue(
            (), f"{what} nests arrays and objects {depth} levels deep; at most "
            f"{MAX_DEPTH} are allowed", "json.depth")], "request")
    long = outside_strings.translate(_DIGIT_MARKS).find(_LONG_NUMBER)
    if long >= 0:
        raise InputValidationError([Issue(
            (), f"{what} has a number with more than {MAX_NUMBER_DIGITS} digits (at "
            f"byte {long}); no field takes one", "json.number_size")], "request")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InputValidationError([Issue(
            (), f"{what} is not valid JSON: {exc.msg} at line {exc.lineno} column "
            f"{exc.colno}", "json.invalid")], "request") from None
    except (ValueError, RecursionError) as exc:
        raise InputValidationError([Issue(
            (), f"{what} is not valid JSON: {exc}", "json.invalid")],
            "request") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _depth(data: bytes) -> int:
    """Deepest nesting of ``[`` / ``{`` in ``data`` (strings already blanked out)."""
    steps = data.translate(_DEPTH_STEP, _BRACKETS)
    if not steps:
        return 0
    return int(np.cumsum(np.frombuffer(steps, dtype=np.int8), dtype=np.int64).max())


MAX_INFLATED_BYTES = 1024 * 1024 * 1024
"""Largest body a gzip-encoded request may expand to (an IOPDDL contest file expands from
2 MB to 93 MB; a gzip bomb expands 1,000-fold)."""


def inflate(raw: bytes, what: str = "request body", limit: int = MAX_INFLATED_BYTES) -> bytes:
    """A gzip stream's content, refused past ``limit`` bytes (checked as it expands)."""
    stream = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = stream.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise InputValidationError([Issue(
            (), f"{what} is not valid gzip: {exc}", "gzip.invalid")], "request") from None
    if len(out) > limit or stream.unconsumed_tail:
        raise InputValidationError([Issue(
            (), f"{what} expands past {limit} bytes, the most a gzip body may hold",
            "gzip.size")], "request")
    if not stream.eof:
        raise InputValidationError([Issue(
            (), f"{what} is a truncated gzip stream", "gzip.invalid")], "request")
    return out


def check_encoding(encoding: str | None) -> bool:
    """Whether the body is gzip-encoded; any encoding but gzip and identity is refused."""
    value = (encoding or "identity").strip().lower()
    if value in ("identity", ""):
        return False
    if value in ("gzip", "x-gzip"):
        return True
    raise UnsupportedMediaType([Issue(
        ("headers", "content-encoding"), f"content-encoding '{value[:40]}' is not read; send "
        "the body plain or gzip-encoded", "content_encoding.unsupported")], "request")
