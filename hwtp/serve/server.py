"""Running the service: a listening socket, uvicorn, and a graceful stop on SIGTERM/SIGINT.

The socket is bound before uvicorn starts, so ``--port 0`` works and the address printed is the
one that accepts. On SIGTERM or SIGINT uvicorn stops accepting, lets every accepted request
finish (no time limit beyond the requests' own), then runs the application's shutdown, which
closes the warm pools; the process then exits 0. A second SIGINT forces the exit. Signals are
captured for the duration of the service only and not raised again afterwards (uvicorn would,
which turns a graceful stop into ``hwtp: terminated``, exit 143).
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in _SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv4 or IPv6 by the host's address)."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    # proto IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say TCP, and
    # without it a response's body waits for the client's delayed ACK of its headers (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def run(
    app: Any, sock: socket.socket, log_level: str = "warning", on_started: Callable[[], None] | None = None
) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM/SIGINT, then stop gracefully (see the module doc)."""
    config = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,  # request lines only, but nothing a trainer needs per request
        lifespan="on",
        timeout_graceful_shutdown=None,
        server_header=False,
    )
    server = _Server(config)
    if on_started is not None:
        original = server.startup

        async def startup(sockets: list[socket.socket] | None = None) -> None:
            await original(sockets=sockets)
            if server.started:
                on_started()

        server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])
