"""Running the service: a listening socket, uvicorn, and a graceful stop on SIGTERM/SIGINT.

The socket is bound before uvicorn starts, so ``--port 0`` works and the address printed is the
one that accepts. On SIGTERM or SIGINT uvicorn stops accepting, lets every accepted request
finish (no time limit beyond the requests' own), then runs the application's shutdown, which
closes the warm pools; the process then exits 0. A second SIGINT forces the exit. Signals are
captured for the duration of the service only and not raised again afterwards (uvicorn would,
which turns a graceful stop into ``hwtp: terminated``, exit 143).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_log = logging.getLogger(__name__)


def _bounded_protocol(read_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a bound on the time a client takes to send each request (headers
    and body), counted from the moment its connection opens or its previous answer was sent. uvicorn
    bounds only the idle time between requests: a client sending a byte now and then would otherwise
    hold a connection forever (slowloris). Past the bound the connection is closed."""

    class _Bounded(H11Protocol):
        _read_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._read_timer = self.loop.call_later(read_timeout, self._read_expired)

        def _disarm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def _read_expired(self) -> None:
            self._read_timer = None
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
                _log.info("hwtp serve: closed a connection that took over %g s to send its request", read_timeout)
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
                self._disarm()  # the whole request is in: the time it takes to answer is the app's

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()  # the next request on this connection gets the same bound

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return _Bounded


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
    app: Any,
    sock: socket.socket,
    log_level: str = "warning",
    on_started: Callable[[], None] | None = None,
    read_timeout: float = 30.0,
) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM/SIGINT, then stop gracefully (see the module doc).
    ``read_timeout``: seconds a client may take to send one request (headers and body)."""
    config = uvicorn.Config(
        app,
        http=_bounded_protocol(read_timeout),
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
