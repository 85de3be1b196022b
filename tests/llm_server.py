"""Start and drive the scripted OpenAI-compatible test server (tests/openai_server.py).

Used by tests/test_llm.py (through a module-scoped fixture) and bench/bench_llm.py. The server
runs as its own process on 127.0.0.1; its port is read from the ``PORT <n>`` line it prints.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

SERVER = Path(__file__).with_name("openai_server.py")


def start_server(script: Mapping[str, Any] | None = None) -> tuple[str, subprocess.Popen[str]]:
    """Start the server with ``script``; return its base URL (``http://127.0.0.1:N/v1``) and
    process. Stop it with :func:`stop_server`."""
    argv = [sys.executable, str(SERVER), "--script", json.dumps(dict(script or {}))]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        stop_server(proc)
        raise RuntimeError(f"test server did not start: {line!r}")
    return f"http://127.0.0.1:{int(line.split()[1])}/v1", proc


def stop_server(proc: subprocess.Popen[str]) -> None:
    """Stop a server started by :func:`start_server` and reap it."""
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    if proc.stdout is not None:
        proc.stdout.close()


@contextlib.contextmanager
def running_server(script: Mapping[str, Any] | None = None) -> Iterator[str]:
    """A server for the duration of a ``with`` block; yields its base URL."""
    url, proc = start_server(script)
    try:
        yield url
    finally:
        stop_server(proc)


def _root(url: str) -> str:
    return url.rsplit("/v1", 1)[0]


def control(url: str, **script: Any) -> None:
    """Replace the running server's script (keyword arguments) and reset its statistics."""
    data = json.dumps({"script": script}).encode()
    request = urllib.request.Request(f"{_root(url)}/control", data=data, method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        response.read()


def stats(url: str) -> dict[str, Any]:
    """The server's statistics (see tests/openai_server.py)."""
    with urllib.request.urlopen(f"{_root(url)}/stats", timeout=5) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data
