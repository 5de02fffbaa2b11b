"""The JSON body of a route: read on the event loop, parsed in a worker thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request

from app.body import check_content_type, check_encoding, inflate, parse_json


@dataclass(frozen=True)
class JsonBody:
    """A request's JSON body, read but not parsed: parsing (and inflating a gzip body) is
    CPU work, so routes do it in a worker thread (``parse``), never on the event loop."""

    raw: bytes
    gzipped: bool = False

    def parse(self) -> Any:
        return parse_json(inflate(self.raw) if self.gzipped else self.raw)


async def json_body(request: Request) -> JsonBody:
    """A route's body once its content type and encoding are checked; the body-size limit
    (on the bytes sent) is the ``BodyLimit`` middleware's."""
    check_content_type(request.headers.get("content-type"))
    gzipped = check_encoding(request.headers.get("content-encoding"))
    return JsonBody(await request.body(), gzipped)
