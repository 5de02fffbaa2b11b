"""Structured JSON logs with a request id, and Prometheus metrics.

Every request gets an id (the client's ``X-Request-ID`` if it sent one), echoed in the
response header and in its log line, so a client's report can be matched to the server's
log. Metrics use a registry per application, so test apps never share counters.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("layoutsat.http")

SOLVE_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and the record's fields."""

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {"ts": round(record.created, 3), "level": record.levelname,
                                "logger": record.name, "msg": record.getMessage(),
                                **getattr(record, "fields", {})}
        if record.exc_info:
            body["exc"] = self.formatException(record.exc_info)
        return json.dumps(body, default=str)


def configure_logging(as_json: bool) -> None:
    """The ``layoutsat`` loggers write to stderr, as JSON lines or plain text."""
    root = logging.getLogger("layoutsat")
    if any(getattr(h, "layoutsat", False) for h in root.handlers):
        return
    handler = logging.StreamHandler()
    handler.layoutsat = True  # type: ignore[attr-defined]
    handler.setFormatter(JsonFormatter() if as_json else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s %(fields)s", defaults={"fields": ""}))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False


class Metrics:
    """The service's Prometheus metrics; gauges of jobs and the pool are read at scrape
    time from the callables given."""

    def __init__(self, job_counts: Callable[[], dict[str, int]],
                 pool_size: Callable[[], int], pool_busy: Callable[[], int],
                 pool_in_flight: Callable[[], int]):
        self.registry = CollectorRegistry()
        self.requests = Counter("layoutsat_requests", "HTTP requests by route and status",
                                ["method", "route", "status"], registry=self.registry)
        self.request_seconds = Histogram("layoutsat_request_duration_seconds",
                                         "HTTP request duration by route", ["route"],
                                         registry=self.registry)
        self.solve_seconds = Histogram("layoutsat_solve_duration_seconds",
                                       "Solve wall time by kind and solver",
                                       ["kind", "solver"], buckets=SOLVE_BUCKETS,
                                       registry=self.registry)
        self.cache = Counter("layoutsat_cache_lookups", "Result cache lookups by outcome",
                             ["outcome"], registry=self.registry)
        for name, read, doc in (("layoutsat_pool_workers", pool_size, "worker processes"),
                                ("layoutsat_pool_busy", pool_busy, "workers running a solve"),
                                ("layoutsat_pool_in_flight", pool_in_flight,
                                 "solves running or waiting for a worker")):
            Gauge(name, doc, registry=self.registry).set_function(read)
        self.registry.register(_JobsCollector(job_counts))

    def solved(self, kind: str, solver: str, seconds: float) -> None:
        self.solve_seconds.labels(kind, solver).observe(seconds)

    def cache_lookup(self, hit: bool) -> None:
        self.cache.labels("hit" if hit else "miss").inc()


class _JobsCollector:
    def __init__(self, counts: Callable[[], dict[str, int]]):
        self.counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("layoutsat_jobs", "Jobs by state", labels=["state"])
        for state, n in self.counts().items():
            family.add_metric([state], n)
        yield family


class RequestLog:
    """ASGI middleware: request id, one JSON log line and the request metrics per request."""

    def __init__(self, app: ASGIApp, metrics: Metrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"x-request-id", b"").decode("latin-1")
        request_id = given if 0 < len(given) <= 128 and given.isprintable() else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"],
                                      (b"x-request-id", request_id.encode("latin-1"))]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.requests.labels(scope["method"], route, str(status)).inc()
            self.metrics.request_seconds.labels(route).observe(seconds)
            client = scope.get("client")
            log.info("request", extra={"fields": {
                "request_id": request_id, "method": scope["method"], "path": scope["path"],
                "route": route, "status": status, "duration_ms": round(seconds * 1000, 2),
                "client": client[0] if client else None}})
