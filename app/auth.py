"""Who is calling: optional API keys, and the client every per-client limit and every job
belongs to.

Keys are off by default (local use): a client is then its peer address and every job is
visible to everyone. With keys on (``LAYOUTSAT_API_KEYS`` or ``LAYOUTSAT_API_KEYS_FILE``),
every route but ``/healthz`` needs ``Authorization: Bearer KEY``; the client is the key
(by a digest, never the key itself), and a job is found only with the key that created it.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from app.settings import Settings
from models.errors import Issue

BEARER = "bearer "


@dataclass(frozen=True)
class Caller:
    client: str
    """Who the per-client limits count and whose jobs these are."""
    keyed: bool
    """API keys are on: jobs are private to this caller."""

    def owns(self, job_client: str) -> bool:
        return not self.keyed or hmac.compare_digest(job_client, self.client)


class Unauthorized(HTTPException):
    """No key, or a key the service does not know (answered 401)."""

    def __init__(self, rule: str, msg: str):
        super().__init__(401, msg, headers={"WWW-Authenticate": "Bearer"})
        self.issue = Issue(("headers", "authorization"), msg, rule)

    def as_dict(self) -> dict[str, object]:
        return {"detail": "unauthorized", "errors": [self.issue.as_dict()]}


def load_keys(settings: Settings) -> frozenset[str]:
    """The configured keys: the comma-separated setting and the keys file, one per line.
    A keys file that cannot be read stops the service at start-up, not at the first
    request."""
    keys = {k.strip() for k in settings.api_keys.split(",") if k.strip()}
    if settings.api_keys_file is not None:
        text = Path(settings.api_keys_file).read_text(encoding="utf-8")
        keys |= {line.split("#", 1)[0].strip() for line in text.splitlines()} - {""}
    return frozenset(keys)


def client_id(key: str) -> str:
    return "key:" + hashlib.sha256(key.encode()).hexdigest()[:16]


class Gate:
    """Checks a request's key against the configured ones."""

    def __init__(self, keys: frozenset[str]):
        self.keys = keys
        self._ids = {client_id(k): k for k in keys}

    @property
    def on(self) -> bool:
        return bool(self.keys)

    def caller(self, request: Request) -> Caller:
        if not self.on:
            return Caller(request.client.host if request.client else "unknown", False)
        header = request.headers.get("authorization", "")
        if not header.lower().startswith(BEARER):
            raise Unauthorized("auth.missing", "this service needs an API key: send "
                               "'Authorization: Bearer KEY'")
        given = header[len(BEARER):].strip()
        found = self._ids.get(client_id(given))
        if found is None or not hmac.compare_digest(found, given):
            raise Unauthorized("auth.invalid", "the API key is not one this service knows")
        return Caller(client_id(given), True)


DOCS_PATHS = ("/docs", "/redoc", "/openapi.json", "/static/")


class KeyGate:
    """ASGI middleware: with keys on, every path but ``/healthz`` (and, as configured, the
    API docs and ``/metrics``) answers 401 without a valid key, before any route runs; so
    no route can forget to ask. Routes still ask ``Gate.caller`` who the caller is."""

    def __init__(self, app: ASGIApp, gate: Gate, settings: Settings):
        self.app = app
        self.gate = gate
        self.open = ["/healthz"]
        if settings.docs_public:
            self.open += DOCS_PATHS
        if not settings.metrics_require_key:
            self.open.append("/metrics")

    def _public(self, path: str) -> bool:
        return any(path == p or (p.endswith("/") and path.startswith(p)) or
                   path.startswith(p + "/") for p in self.open)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.gate.on and not self._public(scope["path"]):
            try:
                self.gate.caller(Request(scope))
            except Unauthorized as exc:
                response = JSONResponse(exc.as_dict(), status_code=401, headers=exc.headers)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
