"""When the running command began: the process's start when ``layoutsat`` is the process
(``app.cli.main`` sets it), else unset, and a command's time limit counts from when it is
called (a test's in-process runner, an embedding program)."""

from __future__ import annotations

at: float | None = None
