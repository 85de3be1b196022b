"""A small OpenAI-compatible chat server with scripted faults, for hwtp's tests and benchmarks.

Run as its own process: ``python openai_server.py [--script JSON | --script-file PATH]``. It
binds 127.0.0.1 on a free port and prints ``PORT <n>`` on stdout. Stdlib only; one thread per
connection (keep-alive), so it serves many concurrent requests.

Endpoints:

- ``POST /v1/chat/completions`` (any path ending in ``/chat/completions``): answers per script.
- ``POST /control`` with ``{"script": {...}}``: replaces the script and resets the statistics.
- ``GET /stats``: ``{"requests": chat requests seen, "max_inflight": most chat requests
  handled at once, "connections": connections accepted, "statuses": {code: count},
  "auth": [Authorization headers seen, distinct], "bodies": [request bodies, last 500],
  "paths": [request paths, distinct]}``.

Script keys (all optional):

- ``texts``: completion texts, cycled over the choices served (default ``["hello"]``);
  ``{seed}`` and ``{i}`` in a text become the request's seed and the choice index, ``{key}``
  the API key the request carried (a server that reflects it).
- ``status``: answer every chat request with this HTTP status (e.g. 503 forever, 401), with
  ``message`` as the error message.
- ``drip``: answer every chat request with a valid completion sent one byte every ``drip``
  seconds (a read timeout never fires).
- ``huge``: answer every chat request with a valid completion of this many bytes, streamed
  without Content-Length (``huge_declared``: with it).
- ``delay``: seconds to wait before every chat response.
- ``reject_n``: answer ``n > 1`` with a 400 like vLLM's.
- ``max_choices``: return at most this many choices.
- ``truncate``: cut texts to this many characters with ``finish_reason: length``.
- ``fail_seeds``: requests with one of these seeds always get a 503.
- ``faults``: consumed in order, one per chat request, each entry ``count`` times (default 1):
  ``{"kind": "status", "status": 429, "retry_after": "1", "message": "..."}``,
  ``{"kind": "slow", "seconds": 2}`` (then a normal answer), ``{"kind": "invalid_json"}``,
  ``{"kind": "empty_choices"}``, ``{"kind": "no_content"}``, ``{"kind": "drop"}`` (close the
  connection without answering), ``{"kind": "echo_auth"}`` (a 401 whose message quotes the
  Authorization header, as some providers do).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class State:
    """The script and statistics, shared by the handler threads under one lock."""

    def __init__(self, script: dict[str, Any]) -> None:
        self.lock = threading.Lock()
        self.generation = 0  # bumped by reset: a slow answer may outlive its script
        self.reset(script)

    def reset(self, script: dict[str, Any]) -> None:
        with self.lock:
            self.script = script
            self.faults: collections.deque[dict[str, Any]] = collections.deque()
            for fault in script.get("faults", []):
                for _ in range(int(fault.get("count", 1))):
                    self.faults.append(fault)
            self.generation += 1
            self.requests = 0
            self.connections = 0
            self.inflight = 0
            self.max_inflight = 0
            self.choices_served = 0
            self.statuses: collections.Counter[int] = collections.Counter()
            self.auth: list[str] = []
            self.paths: list[str] = []
            self.bodies: collections.deque[Any] = collections.deque(maxlen=500)

    def begin(self, path: str, auth: str | None, body: Any) -> tuple[int, dict[str, Any]]:
        """Count a chat request; return the current generation and the fault it gets."""
        with self.lock:
            self.requests += 1
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            if auth is not None and auth not in self.auth:
                self.auth.append(auth)
            if path not in self.paths:
                self.paths.append(path)
            self.bodies.append(body)
            return self.generation, (self.faults.popleft() if self.faults else {})

    def end(self, generation: int) -> None:
        with self.lock:
            if generation == self.generation:
                self.inflight -= 1

    def texts(self, count: int) -> list[str]:
        with self.lock:
            texts = self.script.get("texts") or ["hello"]
            start = self.choices_served
            self.choices_served += count
        return [texts[(start + k) % len(texts)] for k in range(count)]

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": self.requests,
                "max_inflight": self.max_inflight,
                "connections": self.connections,
                "statuses": {str(k): v for k, v in self.statuses.items()},
                "auth": list(self.auth),
                "paths": list(self.paths),
                "bodies": list(self.bodies),
            }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else small header and body writes meet delayed ACKs
    server: Server

    def setup(self) -> None:
        super().setup()
        with self.server.state.lock:
            self.server.state.connections += 1

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)
        if self.path.endswith("/chat/completions"):
            with self.server.state.lock:
                self.server.state.statuses[status] += 1

    def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(data).encode(), headers)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def do_GET(self) -> None:
        if self.path == "/stats":
            self._json(200, self.server.state.stats())
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        body = self._body()
        if self.path == "/control":
            self.server.state.reset(dict((body or {}).get("script") or {}))
            self._json(200, {"ok": True})
        elif self.path.endswith("/chat/completions"):
            self._chat(body)
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def _chat(self, body: Any) -> None:
        state = self.server.state
        auth = self.headers.get("Authorization")
        self.key = (auth or "").removeprefix("Bearer ")
        generation, fault = state.begin(self.path, auth, body)
        try:
            self._answer(body, auth, fault)
        finally:
            state.end(generation)

    def _answer(self, body: Any, auth: str | None, fault: dict[str, Any]) -> None:
        state = self.server.state
        script = state.script
        if script.get("delay"):
            time.sleep(float(script["delay"]))
        if not isinstance(body, dict):
            self._json(400, {"error": {"message": "body is not a JSON object"}})
            return
        n = int(body.get("n") or 1)
        kind = fault.get("kind")
        if script.get("status"):
            status = int(script["status"])
            message = script.get("message", f"scripted status {status}")
            self._json(status, {"error": {"message": message, "code": status}})
            return
        if script.get("drip"):
            self._drip(json.dumps(self._completion(body, n, kind)).encode(), float(script["drip"]))
            return
        if script.get("huge"):
            self._huge(int(script["huge"]), bool(script.get("huge_declared")))
            return
        if kind == "drop":
            self.close_connection = True
            return
        if kind == "slow":
            time.sleep(float(fault.get("seconds", 1.0)))
        if kind == "status":
            status = int(fault["status"])
            headers = {}
            if fault.get("retry_after") is not None:
                headers["Retry-After"] = str(fault["retry_after"])
            message = fault.get("message", f"scripted status {status}")
            self._json(status, {"error": {"message": message, "code": status}}, headers)
            return
        if kind == "echo_auth":
            self._json(401, {"error": {"message": f"Incorrect API key provided: {auth}"}})
            return
        if kind == "invalid_json":
            self._send(200, b'{"id": "chatcmpl-broken", "choices": [')
            return
        if body.get("seed") in (script.get("fail_seeds") or []):
            self._json(503, {"error": {"message": f"seed {body['seed']} always fails"}})
            return
        if n > 1 and script.get("reject_n"):
            self._json(
                400,
                {
                    "object": "error",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                    "message": f"n must be 1 when using greedy sampling, got {n}.",
                },
            )
            return
        self._json(200, self._completion(body, n, kind))

    def _drip(self, payload: bytes, interval: float) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.flush()
        for k in range(len(payload)):  # ends with a broken pipe once the client gave up
            self.wfile.write(payload[k : k + 1])
            self.wfile.flush()
            time.sleep(interval)

    def _huge(self, size: int, declared: bool) -> None:
        head = (
            b'{"id": "chatcmpl-huge", "object": "chat.completion", "model": "m", "choices": '
            b'[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "'
        )
        tail = b'"}}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if declared:
            self.send_header("Content-Length", str(size))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(head)
        left = size - len(head) - len(tail)
        chunk = b"a" * 65536
        while left > 0:
            self.wfile.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
        self.wfile.write(tail)

    def _completion(self, body: dict[str, Any], n: int, kind: str | None) -> dict[str, Any]:
        state = self.server.state
        script = state.script
        count = min(n, int(script.get("max_choices") or n))
        choices = []
        words = 0
        for i, template in enumerate(state.texts(count)):
            text = template.replace("{seed}", str(body.get("seed"))).replace("{i}", str(i))
            text = text.replace("{key}", getattr(self, "key", ""))
            finish = "stop"
            if script.get("truncate") is not None and len(text) > int(script["truncate"]):
                text, finish = text[: int(script["truncate"])], "length"
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if kind == "no_content":
                message = {"role": "assistant", "content": None}
            words += len(text.split())
            choices.append({"index": i, "message": message, "finish_reason": finish})
        prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        with state.lock:
            serial = state.requests
        return {
            "id": f"chatcmpl-{serial}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "test-model"),
            "choices": [] if kind == "empty_choices" else choices,
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": words,
                "total_tokens": prompt + words,
            },
        }


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, script: dict[str, Any]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.state = State(script)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if not isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", default="{}", help="the script, as JSON")
    parser.add_argument("--script-file", help="read the script from this JSON file")
    args = parser.parse_args(argv)
    if args.script_file:
        with open(args.script_file, encoding="utf-8") as handle:
            script = json.load(handle)
    else:
        script = json.loads(args.script)
    server = Server(script)
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
