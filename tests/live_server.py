"""``layoutsat serve`` in a subprocess on a free loopback port, for the tests that need a
real server (load, restarts, concurrency, schemathesis)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``layoutsat serve`` in a subprocess, with its data on ``data_dir``."""

    def __init__(self, data_dir: Path, workers: int = 2, **settings: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "LAYOUTSAT_DATA_DIR": str(data_dir),
               "LAYOUTSAT_POOL_WORKERS": str(workers),
               **{f"LAYOUTSAT_{k.upper()}": v for k, v in settings.items()}}
        self.log = (data_dir / f"server-{self.port}.log").open("w")
        command = [str(Path(sys.executable).with_name("layoutsat")), "serve", "--port",
                   str(self.port)]
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=self.log,
                                        stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, "the server exited while starting"
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not start within 60 s"
            time.sleep(0.2)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.process.send_signal(sig)
        self.process.wait(timeout=60)
        self.log.close()
