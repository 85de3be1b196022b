"""Named endpoint faults for tests/test_endpoint_faults.py.

The server is the scripted OpenAI-compatible server of tests/openai_server.py (its own
process on 127.0.0.1, started and driven through tests/llm_server.py); this module only names
the faults a user meets in practice and builds their scripts:

- ``unavailable``: 503 on every request, forever;
- ``unauthorized``: 401 on every request (a wrong key);
- ``refused``: nothing listens on the port (:func:`refused_url`);
- ``drip``: a valid answer sent one byte every 2 s (never times out per read);
- ``oversized``: a valid answer of 50 MB, streamed without Content-Length;
- ``surrogate``: a completion with a lone surrogate (JSON ``"\\ud800"``);
- ``truncated``: completions cut off with ``finish_reason: length``;
- ``reflect``: a completion that quotes the API key the request carried;
- ``healthy``: the given completion, always.
"""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path
from typing import Any

_spec = importlib.util.spec_from_file_location("hwtp_tests_llm_server_f", Path(__file__).with_name("llm_server.py"))
assert _spec is not None and _spec.loader is not None
llm_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llm_server)

start_server = llm_server.start_server
stop_server = llm_server.stop_server
running_server = llm_server.running_server
control = llm_server.control
stats = llm_server.stats

OVERSIZED_BYTES = 50 * 1024 * 1024
DRIP_INTERVAL_S = 2.0
MODES = ("healthy", "unavailable", "unauthorized", "drip", "oversized", "surrogate", "truncated", "reflect")


def script(mode: str, completion: str) -> dict[str, Any]:
    """The server script of ``mode``; ``completion`` is what a healthy server answers."""
    scripts: dict[str, dict[str, Any]] = {
        "healthy": {"texts": [completion]},
        "unavailable": {"status": 503, "message": "the model is loading"},
        "unauthorized": {"status": 401, "message": "Incorrect API key provided"},
        "drip": {"drip": DRIP_INTERVAL_S},
        "oversized": {"huge": OVERSIZED_BYTES},
        "surrogate": {"texts": [completion + "\n# odd text: \ud800 end\n"]},
        "truncated": {"texts": [completion], "truncate": 12},
        "reflect": {"texts": [completion + "\n# your key is {key}\n"]},
    }
    return scripts[mode]


def switch(url: str, mode: str, completion: str, **extra: Any) -> None:
    """Give the running server at ``url`` the script of ``mode`` (statistics zeroed)."""
    control(url, **script(mode, completion), **extra)


def refused_url() -> str:
    """A base URL on which nothing listens (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
