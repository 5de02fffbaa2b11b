"""Jobs and cached results in SQLite, so an accepted job survives a restart of the server.

One connection per call (SQLite serializes writers; WAL lets readers go on), which makes the
store safe to use from the event loop's threads, the dispatcher and the worker processes
that report progress.
"""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

JobState = Literal["queued", "running", "done", "failed", "cancelled"]
JOB_STATES: tuple[JobState, ...] = ("queued", "running", "done", "failed", "cancelled")
FINISHED: tuple[JobState, ...] = ("done", "failed", "cancelled")

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    client TEXT NOT NULL,
    state TEXT NOT NULL,
    payload TEXT NOT NULL,
    options TEXT NOT NULL,
    cache_key TEXT NOT NULL,
    created REAL NOT NULL,
    started REAL,
    finished REAL,
    attempts INTEGER NOT NULL DEFAULT 0,
    progress TEXT,
    result TEXT,
    error TEXT,
    cached INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, created);
CREATE TABLE IF NOT EXISTS cache (
    key TEXT PRIMARY KEY,
    result TEXT NOT NULL,
    created REAL NOT NULL
);
"""


@dataclass(frozen=True)
class JobRow:
    """One job as stored; ``payload``, ``options``, ``progress`` and ``result`` are JSON."""

    id: str
    kind: str
    client: str
    state: JobState
    payload: Any
    options: dict[str, Any]
    cache_key: str
    created: float
    started: float | None
    finished: float | None
    attempts: int
    progress: dict[str, Any] | None
    result: Any
    error: str | None
    cached: bool


def _row(r: sqlite3.Row) -> JobRow:
    loads = lambda text: None if text is None else json.loads(text)  # noqa: E731
    return JobRow(r["id"], r["kind"], r["client"], r["state"], loads(r["payload"]),
                  loads(r["options"]), r["cache_key"], r["created"], r["started"],
                  r["finished"], r["attempts"], loads(r["progress"]), loads(r["result"]),
                  r["error"], bool(r["cached"]))


class JobStore:
    """Create, claim, finish, cancel and expire jobs; get and put cached results."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        try:
            yield db
        finally:
            db.close()

    def create(self, kind: str, client: str, payload: Any, options: dict[str, Any],
               cache_key: str, result: str | None = None, cached: bool = False,
               max_active: int | None = None) -> JobRow | None:
        """A queued job; with ``result`` (JSON text, from the cache) one already done.
        With ``max_active``: None, and nothing stored, when the client already has that
        many queued or running jobs (checked and inserted in one transaction)."""
        now = time.time()
        job_id = uuid.uuid4().hex
        done = result is not None
        state = "done" if done else "queued"
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            if max_active is not None and not done and db.execute(
                    "SELECT COUNT(*) FROM jobs WHERE client = ? AND state IN "
                    "('queued', 'running')", (client,)).fetchone()[0] >= max_active:
                db.execute("ROLLBACK")
                return None
            db.execute(
                "INSERT INTO jobs (id, kind, client, state, payload, options, cache_key, "
                "created, started, finished, attempts, result, cached) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (job_id, kind, client, state, json.dumps(payload), json.dumps(options),
                 cache_key, now, now if state != "queued" else None, now if done else None,
                 int(state != "queued"), result, int(cached)))
            db.execute("COMMIT")
        return self.get(job_id)

    def get(self, job_id: str) -> JobRow | None:
        with self._db() as db:
            r = db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        return _row(r) if r else None

    def claim_next(self, kinds: tuple[str, ...]) -> JobRow | None:
        """The oldest queued job of ``kinds``, atomically marked running (its attempt
        counted)."""
        marks = ",".join("?" * len(kinds))
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            r = db.execute(f"SELECT id FROM jobs WHERE state = 'queued' AND kind IN ({marks}) "
                           "ORDER BY created LIMIT 1", kinds).fetchone()
            if r is None:
                db.execute("COMMIT")
                return None
            db.execute("UPDATE jobs SET state = 'running', started = ?, "
                       "attempts = attempts + 1 WHERE id = ?", (time.time(), r["id"]))
            db.execute("COMMIT")
        return self.get(r["id"])

    def progress(self, job_id: str, progress: dict[str, Any]) -> None:
        with self._db() as db:
            db.execute("UPDATE jobs SET progress = ? WHERE id = ? AND state = 'running'",
                       (json.dumps(progress), job_id))

    def finish(self, job_id: str, result: str) -> bool:
        """Done with ``result`` (JSON text); False when the job was cancelled meanwhile."""
        return self._end(job_id, "done", result=result)

    def fail(self, job_id: str, error: str) -> bool:
        return self._end(job_id, "failed", error=error)

    def cancel(self, job_id: str) -> bool:
        """Cancel a queued or running job; False when it had already finished."""
        return self._end(job_id, "cancelled", error="cancelled by the client")

    def _end(self, job_id: str, state: JobState, result: str | None = None,
             error: str | None = None) -> bool:
        with self._db() as db:
            cur = db.execute(
                "UPDATE jobs SET state = ?, finished = ?, result = ?, error = ? "
                "WHERE id = ? AND state IN ('queued', 'running')",
                (state, time.time(), result, error, job_id))
        return cur.rowcount == 1

    def recover(self, max_attempts: int) -> tuple[int, int]:
        """After a restart: jobs that were running go back to the queue, or fail when they
        already had ``max_attempts`` starts. Returns (re-queued, failed)."""
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            failed = db.execute(
                "UPDATE jobs SET state = 'failed', finished = ?, error = ? "
                "WHERE state = 'running' AND attempts >= ?",
                (time.time(), f"the server stopped while the job ran, {max_attempts} "
                 "time(s); not retried again", max_attempts)).rowcount
            requeued = db.execute("UPDATE jobs SET state = 'queued', progress = NULL "
                                  "WHERE state = 'running'").rowcount
            db.execute("COMMIT")
        return requeued, failed

    def requeue_running(self, ids: list[str] | None = None) -> int:
        """Jobs stopped by a shutdown go back to the queue (all running jobs, or those of
        ``ids``); unlike a crash's, such a start never makes a job fail."""
        where = "state = 'running'"
        args: tuple[Any, ...] = ()
        if ids is not None:
            if not ids:
                return 0
            where += f" AND id IN ({','.join('?' * len(ids))})"
            args = tuple(ids)
        with self._db() as db:
            return db.execute("UPDATE jobs SET state = 'queued', progress = NULL, started = "
                              f"NULL WHERE {where}", args).rowcount

    def expire(self, older_than_s: float) -> list[str]:
        """Delete finished jobs and cached results older than ``older_than_s``; the ids of
        the jobs deleted (their files are the caller's to remove)."""
        cutoff = time.time() - older_than_s
        finished = ",".join(f"'{state}'" for state in FINISHED)
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            gone = [r["id"] for r in db.execute(
                f"SELECT id FROM jobs WHERE state IN ({finished}) AND finished < ?",
                (cutoff,)).fetchall()]
            db.executemany("DELETE FROM jobs WHERE id = ?", [(i,) for i in gone])
            db.execute("DELETE FROM cache WHERE created < ?", (cutoff,))
            db.execute("COMMIT")
        return gone

    def counts(self) -> dict[str, int]:
        with self._db() as db:
            rows = db.execute("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state").fetchall()
        found = {r["state"]: r["n"] for r in rows}
        return {state: found.get(state, 0) for state in JOB_STATES}

    def cached(self, key: str) -> str | None:
        """A result (JSON text) stored under ``key``."""
        with self._db() as db:
            r = db.execute("SELECT result FROM cache WHERE key = ?", (key,)).fetchone()
        return r["result"] if r else None

    def remember(self, key: str, result: str) -> None:
        with self._db() as db:
            db.execute("INSERT OR REPLACE INTO cache (key, result, created) VALUES (?,?,?)",
                       (key, result, time.time()))
