"""Start the real service (`claudeops serve`: gunicorn + scheduler) for a test."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.support.database import database_env

CLAUDEOPS = Path(sys.executable).with_name("claudeops")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Service:
    def __init__(self, state_dir: Path, env: dict[str, str], workers: int = 2, host: str = "127.0.0.1"):
        self.host = host
        self.port = free_port()
        # An IPv6 loopback is asked at itself; any other address at IPv4's loopback.
        self.base_url = f"http://[::1]:{self.port}" if ":" in host else f"http://127.0.0.1:{self.port}"
        self.log_path = state_dir.parent / "serve.log"
        self.env = dict(os.environ, CLAUDEOPS_STATE_DIR=str(state_dir), **{**database_env(state_dir), **env})
        self.workers = workers
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> "Service":
        log = open(self.log_path, "wb")
        self.process = subprocess.Popen(
            [str(CLAUDEOPS), "serve", "--host", self.host, "--port", str(self.port), "--workers", str(self.workers)],
            env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"claudeops serve exited early:\n{self.log()}")
            try:
                if self.get("/api/v1/health")[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"claudeops serve did not answer in {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def request(self, method: str, path: str, body: dict | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {**({"Content-Type": "application/json"} if data else {}), **(headers or {})}
        request = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict]:
        return self.request("GET", path, headers=headers)

    def post(self, path: str, body: dict | None = None, headers: dict[str, str] | None = None) -> tuple[int, dict]:
        return self.request("POST", path, body if body is not None else {}, headers)

    def terminate(self, timeout: float = 40.0) -> int:
        """SIGTERM, as an init system would; returns the exit code."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            raise

    def group_alive(self) -> bool:
        try:
            os.killpg(self.process.pid, 0)
        except ProcessLookupError:
            return False
        return True
