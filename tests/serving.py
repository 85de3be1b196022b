"""``hwtp serve`` as a process of its own, for the tests that talk to it over HTTP (tests/ is on
pytest's ``pythonpath``)."""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

HWTP = shutil.which("hwtp") or str(Path(sys.executable).with_name("hwtp"))


class ServeProcess:
    """``hwtp serve`` started as a user does: a process of its own on a free port of 127.0.0.1, cwd
    outside the repository, ``HWTP_SERVE_TOKEN`` unset unless ``env`` is given."""

    def __init__(self, states: Path, cwd: Path, *args: str, env: dict[str, str] | None = None) -> None:
        environ = dict(os.environ if env is None else env)
        if env is None:
            environ.pop("HWTP_SERVE_TOKEN", None)
        self.proc = subprocess.Popen(
            [HWTP, "serve", str(states), "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env=environ,
        )
        line = self._first_line(120.0)  # with --executor ray it connects to the cluster first
        if "listening on http://127.0.0.1:" not in line:
            self._fail("hwtp serve did not start: " + line)
        self.banner = line
        self.url = line.split("listening on ")[1].split()[0]
        self.client = httpx.Client(base_url=self.url, timeout=300.0)

    def _first_line(self, seconds: float) -> str:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            if not sel.select(seconds):
                self._fail(f"hwtp serve printed nothing in {seconds:.0f} s")
        return self.proc.stdout.readline()

    def _fail(self, what: str) -> None:
        """Kill a server that did not start and reap it (no process is left behind), then fail
        with what it wrote on stderr."""
        self.proc.kill()
        try:
            _, err = self.proc.communicate(timeout=30.0)
        except subprocess.TimeoutExpired:
            err = "(stderr unread: the process did not exit after SIGKILL)"
        raise AssertionError(f"{what}\n{err}")

    def post(self, path: str, body: Any, **kwargs: Any) -> Any:
        return self.client.post(path, json=body, **kwargs)

    def json(self, path: str, body: Any) -> Any:
        """The answer to a request that must succeed."""
        answer = self.post(path, body)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def metrics(self) -> Any:
        return self.client.get("/metrics").json()

    def stop(self, sig: int = signal.SIGTERM, seconds: float = 60.0) -> tuple[int, str, str]:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            out, err = self.proc.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
            raise AssertionError("hwtp serve did not stop: " + err) from None
        return self.proc.returncode, out, err
