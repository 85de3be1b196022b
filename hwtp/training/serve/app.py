"""The ASGI application of ``hwtp serve`` (Starlette): routes, bearer token, bounds, metrics.

``POST /reward`` (OpenRLHF), ``POST /verify``, ``/seed_session``, ``/close_session`` and
``/aggregate_metrics`` (a NeMo Gym resources server), ``GET /health``, ``GET /metrics``.
Every answer is JSON; every refusal is ``{"error": "..."}`` with a 4xx/5xx status that says
whose fault it is: 400 unreadable body, 401 token, 413 too large, 422 wrong field or unknown
mutant set, 503 busy (``Retry-After``), 504 over the request's time limit, 500 a simulator
failure. Scoring itself is :mod:`hwtp.rewards`; nothing here computes a reward.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from hwtp import __version__
from hwtp.errors import HwtpError, RewardError
from hwtp.rewards.refusals import announce
from hwtp.training.serve import nemo_gym, protocol
from hwtp.training.serve.batcher import Batcher, ScoreFn
from hwtp.training.serve.limits import Admission, Busy, ServeLimits
from hwtp.training.serve.metrics import Metrics
from hwtp.training.serve.protocol import RequestError

_log = logging.getLogger(__name__)


class _Refused(Exception):
    """Answer at once with ``status``, ``message`` and extra headers (no scoring)."""

    def __init__(self, status: int, message: str, reason: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
        self.headers = headers or {}


def create_app(
    score: ScoreFn,
    limits: ServeLimits | None = None,
    token: str | None = None,
    states: Sequence[str] = (),
    on_shutdown: Callable[[], None] | None = None,
    executor_stats: Callable[[], dict[str, Any]] | None = None,
) -> Starlette:
    """The service around ``score`` (``hwtp.rewards.score_completions`` in ``hwtp serve``).

    ``token``: when set, every route but ``/health`` needs ``Authorization: Bearer <token>``.
    ``on_shutdown`` runs after the last accepted request was answered (closes the warm pools).
    ``executor_stats`` (``hwtp.rewards.executor_stats``) adds where simulations run to /metrics.
    """
    limits = limits or ServeLimits()
    metrics = Metrics()
    admission = Admission(limits.concurrency, limits.queue, metrics)
    batcher = Batcher(score, metrics, limits.scoring_threads, limits.max_batch_items)
    expected = token.encode("utf-8") if token else None

    def check_token(request: Request) -> None:
        if expected is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode("utf-8"), expected):
            raise _Refused(401, "missing or wrong bearer token", "unauthorized", {"WWW-Authenticate": "Bearer"})

    async def read_json(request: Request) -> Any:
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                raise _Refused(400, "Content-Length is not a number", "malformed")
            if int(declared) > limits.max_body_bytes:
                raise _Refused(
                    413, f"body of {declared} bytes exceeds the limit of {limits.max_body_bytes}", "too_large"
                )
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limits.max_body_bytes:
                raise _Refused(413, f"body exceeds the limit of {limits.max_body_bytes} bytes", "too_large")
            chunks.append(chunk)
        return protocol.decode_json(b"".join(chunks))

    async def scored(items: list[protocol.Item], deadline: float) -> list[Any]:
        try:
            async with admission.slot():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                return await batcher.score(items, left)
        except Busy:
            raise _Refused(
                503,
                f"busy: {limits.concurrency} requests in flight and {limits.queue} queued",
                "busy",
                {"Retry-After": str(limits.retry_after_s)},
            ) from None

    def endpoint(
        route: str, handler: Callable[[Request], Awaitable[Response]], *, auth: bool = True
    ) -> Callable[[Request], Awaitable[Response]]:
        async def wrapped(request: Request) -> Response:
            start = time.monotonic()
            try:
                if auth:
                    check_token(request)
                response = await handler(request)
            except _Refused as exc:
                metrics.reject(exc.reason)
                response = _error(exc.status, exc.message, exc.headers)
            except RequestError as exc:
                metrics.reject("malformed" if exc.status < 413 or exc.status == 422 else "too_large")
                response = _error(exc.status, exc.message)
            except RewardError as exc:
                metrics.reject("ground_truth")
                announce(f"serve {route} 422", str(exc))  # OpenRLHF's client drops the body
                response = _error(422, str(exc))
            except (TimeoutError, asyncio.TimeoutError):
                response = _error(504, f"request exceeded its time limit of {limits.request_timeout_s:g} s")
            except ClientDisconnect:  # the client went away while sending its body: nobody to answer
                _log.info("hwtp serve: %s: the client disconnected before its request was read", route)
                metrics.reject("disconnected")
                response = _error(400, "client disconnected")
            except HwtpError as exc:
                response = _error(500, f"scoring failed: {exc}")
            except Exception:
                _log.exception("hwtp serve: %s failed", route)
                response = _error(500, "internal error (logged by the service)")
            metrics.request_done(route, response.status_code, time.monotonic() - start)
            return response

        return wrapped

    async def reward(request: Request) -> Response:
        deadline = time.monotonic() + limits.request_timeout_s
        parsed = protocol.parse_reward(await read_json(request), limits.max_items)
        items = protocol.reward_items(parsed)
        results = await scored(items, deadline) if items else []
        return _JSON(protocol.reward_response(results))

    async def verify(request: Request) -> Response:
        deadline = time.monotonic() + limits.request_timeout_s
        body, item = protocol.parse_verify(await read_json(request))
        (result,) = await scored([item], deadline)
        return _JSON(protocol.verify_response(body, result))

    def nemo_gym_route(answer: Callable[[Any], dict[str, Any]]) -> Callable[[Request], Awaitable[Response]]:
        async def route(request: Request) -> Response:
            return JSONResponse(answer(await read_json(request)))

        return route

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": __version__, "states": list(states)})

    async def metrics_route(request: Request) -> Response:
        executor = executor_stats() if executor_stats is not None else None
        if request.query_params.get("format") == "prometheus":
            return PlainTextResponse(metrics.prometheus(executor), media_type="text/plain; version=0.0.4")
        extra = {} if executor is None else {"executor": executor}
        return JSONResponse({**metrics.snapshot(), "pending_items": batcher.pending_items, **extra})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await batcher.drain()
            batcher.close()
            if on_shutdown is not None:
                await asyncio.get_running_loop().run_in_executor(None, on_shutdown)

    routes = [
        Route("/reward", endpoint("/reward", reward), methods=["POST"]),
        Route("/verify", endpoint("/verify", verify), methods=["POST"]),
        *(
            Route(path, endpoint(path, nemo_gym_route(answer)), methods=["POST"])
            for path, answer in (
                ("/seed_session", nemo_gym.seed_session),
                ("/close_session", nemo_gym.close_session),
                ("/aggregate_metrics", nemo_gym.aggregate_metrics),
            )
        ),
        Route("/health", endpoint("/health", health, auth=False), methods=["GET"]),
        Route("/metrics", endpoint("/metrics", metrics_route), methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.metrics = metrics
    return app


class _JSON(JSONResponse):
    """JSON with non-ASCII escaped: a body echoed back may hold text that is not Unicode (a lone
    surrogate, ``"\\ud800"``), which JSON can carry escaped but UTF-8 cannot encode."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return _JSON({"error": message}, status_code=status, headers=headers)
