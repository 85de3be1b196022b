"""Tests of hwtp.policy.llm.client (the OpenAI-compatible client) and hwtp.policy.llm.cache (its response cache).

Most tests talk to the scripted server of tests/openai_server.py running as its own process;
single functions (Retry-After parsing, backoff) are tested alone or over httpx.MockTransport.
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib.util
import json
import logging
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hwtp.errors import ConfigError, PolicyError
from hwtp.policy.llm.cache import ResponseCache, cache_key
from hwtp.policy.llm.chat import (
    ChatRequest,
    ClientConfig,
    Completion,
    PartialCompletionsError,
    SamplingParams,
    redact_url,
)
from hwtp.policy.llm.client import ChatClient, complete_many
from hwtp.policy.llm.retry import backoff_delay, parse_retry_after, retry_delay


def _load_server_helpers() -> Any:
    path = Path(__file__).with_name("llm_server.py")
    spec = importlib.util.spec_from_file_location("hwtp_tests_llm_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


srv = _load_server_helpers()

KEY_VAR = "HWTP_TEST_LLM_KEY"
KEY = "sk-hwtp-LEAKCHECK-5e1f0c9a7b3d"
MESSAGES = [{"role": "user", "content": "write a test plan for the counter"}]


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    url, proc = srv.start_server({})
    try:
        yield url
    finally:
        srv.stop_server(proc)


@pytest.fixture
def url(server: str) -> str:
    srv.control(server)  # a fresh script and zeroed statistics for every test
    return server


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_VAR, KEY)


def config(endpoint: str, **overrides: Any) -> ClientConfig:
    values: dict[str, Any] = {
        "endpoint": endpoint,
        "model": "test-model",
        "api_key_env": KEY_VAR,
        "connect_timeout": 2.0,
        "read_timeout": 2.0,
        "max_retries": 3,
        "backoff_base": 0.01,
        "backoff_max": 0.05,
        "concurrency": 4,
    }
    values.update(overrides)
    return ClientConfig(**values)


def complete(cfg: ClientConfig, n: int = 1, **kwargs: Any) -> list[Completion]:
    params = kwargs.pop("params", SamplingParams())

    async def run() -> list[Completion]:
        async with ChatClient(cfg, **kwargs) as client:
            return await client.complete(MESSAGES, params, n)

    return asyncio.run(run())


def requests_made(url: str) -> int:
    return int(srv.stats(url)["requests"])


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- plain requests --------------------------------------------------------------------------


def test_n_samples_in_one_request(url: str) -> None:
    srv.control(url, texts=["alpha", "beta gamma", "delta"])
    got = complete(config(url), n=3)
    assert [c.text for c in got] == ["alpha", "beta gamma", "delta"]
    assert [c.index for c in got] == [0, 1, 2]
    assert {c.finish_reason for c in got} == {"stop"}
    assert got[0].usage is not None and got[0].usage.choices == 3
    assert got[0].usage.completion_tokens == 4
    assert got[1].usage is None and got[2].usage is None  # usage counted once per request
    assert got[0].request_id and got[0].model == "test-model" and not got[0].from_cache
    assert requests_made(url) == 1


def test_sampling_params_are_passed_through(url: str) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "plan", "schema": {"type": "object"}}}
    params = SamplingParams(
        temperature=0.7, top_p=0.9, max_tokens=64, seed=11, stop=["END"], response_format=fmt
    )
    complete(config(url), n=2, params=params)
    stats = srv.stats(url)
    body = stats["bodies"][0]
    assert body["model"] == "test-model" and body["messages"] == MESSAGES
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.7, 0.9, 64)
    assert (body["seed"], body["stop"], body["n"]) == (11, ["END"], 2)
    assert body["response_format"] == fmt
    assert stats["paths"] == ["/v1/chat/completions"]
    assert stats["auth"] == [f"Bearer {KEY}"]  # the key travels in the header only...
    assert KEY not in json.dumps(stats["bodies"]) + "".join(stats["paths"])  # ...not elsewhere


def test_finish_reason_length_returns_truncated_text(url: str) -> None:
    srv.control(url, texts=["reasoning: a long analysis"], truncate=9)
    (got,) = complete(config(url))
    assert (got.text, got.finish_reason) == ("reasoning", "length")
    assert requests_made(url) == 1


# --- transient faults, retried -----------------------------------------------------------------


def test_retry_after_is_honoured(url: str) -> None:
    srv.control(url, faults=[{"kind": "status", "status": 429, "retry_after": "1"}])
    start = time.monotonic()
    (got,) = complete(config(url))
    assert time.monotonic() - start >= 1.0
    assert got.text == "hello" and requests_made(url) == 2


def test_429_for_the_first_k_requests(url: str) -> None:
    srv.control(url, faults=[{"kind": "status", "status": 429, "retry_after": "0", "count": 3}])
    assert complete(config(url))[0].text == "hello"
    assert srv.stats(url)["statuses"] == {"429": 3, "200": 1}


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_errors_are_retried(url: str, status: int) -> None:
    srv.control(url, faults=[{"kind": "status", "status": status, "count": 2}])
    assert complete(config(url), n=2)[1].text == "hello"
    assert requests_made(url) == 3


@pytest.mark.parametrize("kind", ["invalid_json", "empty_choices", "no_content", "drop"])
def test_malformed_responses_are_retried(url: str, kind: str) -> None:
    srv.control(url, faults=[{"kind": kind}])
    assert complete(config(url))[0].text == "hello"
    assert requests_made(url) == 2


def test_read_timeout_is_retried(url: str) -> None:
    srv.control(url, faults=[{"kind": "slow", "seconds": 0.6}])
    (got,) = complete(config(url, read_timeout=0.2))
    assert got.text == "hello" and requests_made(url) == 2


# --- faults that end in a clear PolicyError -----------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ({"kind": "status", "status": 503}, "HTTP 503"),
        ({"kind": "status", "status": 429, "retry_after": "0"}, "HTTP 429"),
        ({"kind": "invalid_json"}, "not valid JSON"),
        ({"kind": "empty_choices"}, "no choices"),
        ({"kind": "no_content"}, "no message content"),
        ({"kind": "drop"}, "RemoteProtocolError"),
        ({"kind": "slow", "seconds": 0.4}, "ReadTimeout"),
    ],
)
def test_retries_run_out(url: str, fault: dict[str, Any], reason: str) -> None:
    srv.control(url, faults=[{**fault, "count": 10}])
    with pytest.raises(PolicyError) as info:
        complete(config(url, max_retries=2, read_timeout=0.15))
    message = str(info.value)
    assert message.startswith(f"{url}/chat/completions: gave up after 3 attempts")
    assert reason in message
    assert requests_made(url) == 3


def test_client_errors_fail_at_once_with_the_server_message(url: str) -> None:
    srv.control(url, faults=[{"kind": "status", "status": 404, "message": "model 'x' not found"}])
    with pytest.raises(PolicyError, match=r"HTTP 404 Not Found: model 'x' not found"):
        complete(config(url))
    assert requests_made(url) == 1


def test_long_server_messages_are_truncated(url: str) -> None:
    srv.control(url, faults=[{"kind": "status", "status": 400, "message": "why " * 500}])
    with pytest.raises(PolicyError) as info:
        complete(config(url))
    assert len(str(info.value)) < 500 and str(info.value).endswith("...")


def test_connection_refused_names_the_endpoint_without_credentials() -> None:
    endpoint = f"http://user:hunter2@127.0.0.1:{closed_port()}/v1?token=abc"
    with pytest.raises(PolicyError) as info:
        complete(config(endpoint, max_retries=1))
    message = str(info.value)
    assert "ConnectError" in message and "127.0.0.1" in message
    assert "hunter2" not in message and "token" not in message and "user" not in message


# --- n > 1 fallback and partial results -----------------------------------------------------------


def test_rejected_n_falls_back_to_seeded_single_requests(url: str) -> None:
    srv.control(url, reject_n=True, texts=["seed {seed}"])
    cfg = config(url)

    async def run() -> tuple[list[Completion], list[Completion], bool]:
        async with ChatClient(cfg) as client:
            first = await client.complete(MESSAGES, SamplingParams(seed=7), n=3)
            second = await client.complete(MESSAGES, SamplingParams(seed=7), n=2)
            return first, second, client.supports_n

    first, second, supports_n = asyncio.run(run())
    assert [c.text for c in first] == ["seed 7", "seed 8", "seed 9"]
    assert [c.text for c in second] == ["seed 7", "seed 8"]
    assert all(c.usage is not None and c.usage.choices == 1 for c in first)
    assert not supports_n
    stats = srv.stats(url)
    assert stats["requests"] == 1 + 3 + 2  # the refusal is remembered: no second n=2 attempt
    assert stats["statuses"] == {"400": 1, "200": 5}


def test_fewer_choices_than_asked_are_completed_by_single_requests(url: str) -> None:
    srv.control(url, max_choices=1, texts=["x", "y", "z"])
    got = complete(config(url), n=3)
    # which cycled text each concurrent single request gets depends on arrival order
    assert len(got) == 3 and {c.text for c in got} <= {"x", "y", "z"} and all(c.text for c in got)
    assert [c.index for c in got] == [0, 1, 2]
    assert [b.get("n") for b in srv.stats(url)["bodies"]] == [3, None, None]


def test_failed_sample_keeps_the_others(url: str, tmp_path: Path) -> None:
    srv.control(url, reject_n=True, fail_seeds=[8], texts=["seed {seed}"])
    params = SamplingParams(seed=7)
    with ResponseCache(tmp_path) as cache, pytest.raises(PartialCompletionsError) as info:
        complete(config(url, max_retries=1), n=3, params=params, cache=cache)
    assert [(c.index, c.text) for c in info.value.completions] == [(0, "seed 7"), (2, "seed 9")]
    assert "2 of 3 samples received" in str(info.value)
    srv.control(url, reject_n=True, texts=["seed {seed}"])  # the server recovers
    with ResponseCache(tmp_path) as cache:
        got = complete(config(url), n=3, params=params, cache=cache)
    assert [c.from_cache for c in got] == [True, False, True]
    assert [b["seed"] for b in srv.stats(url)["bodies"]] == [8]  # only the missing sample


def test_complete_many_returns_what_was_received(url: str) -> None:
    srv.control(url, fail_seeds=[5], texts=["ok {seed}"])
    requests = [
        ChatRequest(MESSAGES, SamplingParams(seed=1), n=2),
        ChatRequest(MESSAGES, SamplingParams(seed=5)),
        ChatRequest([{"role": "user", "content": "another"}], SamplingParams(seed=3)),
    ]
    results = complete_many(config(url, max_retries=1), requests)
    assert [r.ok for r in results] == [True, False, True]
    assert [c.text for c in results[0].completions] == ["ok 1", "ok 1"]
    assert results[1].completions == () and isinstance(results[1].error, PolicyError)
    assert "HTTP 503" in str(results[1].error)
    assert [c.text for c in results[2].completions] == ["ok 3"]


def test_complete_many_refuses_a_running_loop(url: str) -> None:
    async def run() -> None:
        complete_many(config(url), [ChatRequest(MESSAGES)])

    with pytest.raises(ConfigError, match="event loop"):
        asyncio.run(run())


def test_concurrency_limit(url: str) -> None:
    srv.control(url, delay=0.2)
    requests = [ChatRequest(MESSAGES, SamplingParams(seed=i)) for i in range(8)]
    results = complete_many(config(url, concurrency=4), requests)
    assert all(r.ok for r in results)
    stats = srv.stats(url)
    assert 2 <= stats["max_inflight"] <= 4
    assert stats["connections"] <= 4 + 1  # kept alive (+1: this stats request)


# --- the response cache ------------------------------------------------------------------------


def test_cache_hit_makes_no_request(url: str, tmp_path: Path) -> None:
    srv.control(url, texts=["one", "two", "three"])
    with ResponseCache(tmp_path) as cache:
        first = complete(config(url), n=3, cache=cache)
        again = complete(config(url), n=3, cache=cache)
        assert cache.count() == 3
    assert requests_made(url) == 1
    assert [c.text for c in again] == [c.text for c in first]
    assert all(c.from_cache for c in again) and not any(c.from_cache for c in first)
    assert again[0].usage == first[0].usage and again[0].request_id == first[0].request_id


def test_cache_requests_only_missing_indices(url: str, tmp_path: Path) -> None:
    with ResponseCache(tmp_path) as cache:
        complete(config(url), n=2, cache=cache)
        got = complete(config(url), n=5, cache=cache)
    assert [c.from_cache for c in got] == [True, True, False, False, False]
    assert [b.get("n") for b in srv.stats(url)["bodies"]] == [2, 3]


def test_cache_key_depends_on_params_but_not_n(url: str, tmp_path: Path) -> None:
    with ResponseCache(tmp_path) as cache:
        complete(config(url), n=1, cache=cache, params=SamplingParams(temperature=0.5, n=4))
        complete(config(url), n=1, cache=cache, params=SamplingParams(temperature=0.5, n=1))
        assert requests_made(url) == 1
        complete(config(url), n=1, cache=cache, params=SamplingParams(temperature=0.6))
        complete(config(url, model="other"), n=1, cache=cache)
    assert requests_made(url) == 3


def test_refresh_bypasses_reads_but_writes(url: str, tmp_path: Path) -> None:
    srv.control(url, texts=["old"])
    with ResponseCache(tmp_path) as cache:
        complete(config(url), n=2, cache=cache)
        srv.control(url, texts=["new"])
        fresh = complete(config(url), n=2, cache=cache, refresh=True)
        assert [c.text for c in fresh] == ["new", "new"] and requests_made(url) == 1
        cached = complete(config(url), n=2, cache=cache)
    assert [c.text for c in cached] == ["new", "new"] and all(c.from_cache for c in cached)
    assert requests_made(url) == 1


def test_cache_is_safe_for_concurrent_processes(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom pathlib import Path\nfrom hwtp.policy.llm.cache import ResponseCache\n"
        "with ResponseCache(Path(sys.argv[1])) as c:\n"
        "    for i in range(300):\n"
        "        c.put(f'k{i}', {'writer': sys.argv[2], 'i': i})\n"
    )
    root = str(Path(__file__).resolve().parents[1])
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(w)], cwd=root)
        for w in range(3)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0, 0]
    with ResponseCache(tmp_path) as cache:
        assert cache.count() == 300
        values = [cache.get(f"k{i}") for i in range(300)]
    assert all(v is not None and v["i"] == i for i, v in enumerate(values))


def test_cache_get_put_and_key() -> None:
    assert cache_key({"a": 1, "b": [1, 2]}) == cache_key({"b": [1, 2], "a": 1})
    assert cache_key({"a": 1}) != cache_key({"a": 2})
    with pytest.raises(ConfigError):
        cache_key({"a": object()})


def test_cache_put_keeps_first_unless_replace(tmp_path: Path) -> None:
    with ResponseCache(tmp_path) as cache:
        cache.put("k", {"v": 1})
        cache.put("k", {"v": 2})
        assert cache.get("k") == {"v": 1}
        cache.put("k", {"v": 3}, replace=True)
        assert cache.get("k") == {"v": 3} and cache.get("missing") is None
        assert cache.get_many(["k", "missing"]) == {"k": {"v": 3}}


# --- the API key never leaks --------------------------------------------------------------------


def test_api_key_never_leaks(url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    scenarios: list[dict[str, Any]] = [
        {"faults": [{"kind": "echo_auth"}]},
        {"faults": [{"kind": "status", "status": 503, "count": 9}]},
        {"faults": [{"kind": "status", "status": 429, "retry_after": "0", "count": 9}]},
        {"faults": [{"kind": "invalid_json", "count": 9}]},
        {"faults": [{"kind": "empty_choices", "count": 9}]},
        {"faults": [{"kind": "no_content", "count": 9}]},
        {"faults": [{"kind": "drop", "count": 9}]},
        {"faults": [{"kind": "slow", "seconds": 0.3, "count": 9}]},
        {"faults": [{"kind": "status", "status": 400, "message": f"bad key {KEY}"}]},
        {"reject_n": True, "fail_seeds": [2]},
    ]
    with ResponseCache(tmp_path) as cache:
        for script in scenarios:
            srv.control(url, **script)
            cfg = config(url, max_retries=1, read_timeout=0.1)
            with pytest.raises(PolicyError) as info:
                complete(cfg, n=2, cache=cache, params=SamplingParams(seed=1))
            errors.append(info.value)
        with pytest.raises(PolicyError) as info:
            complete(config(f"http://127.0.0.1:{closed_port()}/v1", max_retries=1))
        errors.append(info.value)
        srv.control(url)
        got = complete(config(url), n=2, cache=cache)
        client = ChatClient(config(url))
        texts = [repr(client), repr(config(url)), repr(got), repr(cache)]
        asyncio.run(client.aclose())
        db = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert srv.stats(url)["auth"] == [f"Bearer {KEY}"]
    assert isinstance(errors[-2], PartialCompletionsError)  # reject_n + failing seed 2
    for error in errors:
        chain: BaseException | None = error
        while chain is not None:
            texts += [str(chain), repr(chain), repr(getattr(chain, "args", ()))]
            chain = chain.__cause__ or chain.__context__
    texts += [caplog.text] + [repr(r.__dict__) for r in caplog.records]
    assert "Incorrect API key provided: Bearer ***" in str(errors[0])
    assert all(KEY not in text for text in texts)
    assert KEY.encode() not in db


# --- single functions, without a server ---------------------------------------------------------


def test_parse_retry_after() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 0.25 ") == 0.25
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after(email.utils.formatdate(now + 30, usegmt=True), now=now) == 30.0
    assert parse_retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0
    for bad in (None, "", "soon", "nan", "Mon, 99 Foo 2024 00:00:00 GMT"):
        assert parse_retry_after(bad) is None


def test_backoff_is_full_jitter_and_capped() -> None:
    rng = random.Random(0)
    for attempt in range(12):
        delays = [backoff_delay(attempt, 0.5, 8.0, rng) for _ in range(200)]
        ceiling = min(8.0, 0.5 * 2**attempt)
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > 0.8 * ceiling  # spread over the whole interval
    assert backoff_delay(10_000, 0.5, 8.0, rng) <= 8.0


def test_retry_delay_honours_and_caps_retry_after() -> None:
    cfg = ClientConfig("http://127.0.0.1:1/v1", "m", backoff_base=0.01, retry_after_max=5.0)
    rng = random.Random(1)
    assert retry_delay(0, cfg, 2.0, rng) == 2.0
    assert retry_delay(0, cfg, 3600.0, rng) == 5.0
    assert retry_delay(0, cfg, None, rng) <= 0.01


def test_redact_url() -> None:
    assert redact_url("https://u:p@host:8/v1?key=s#f") == "https://host:8/v1"
    assert redact_url("http://[::1") == "<invalid URL>"


def test_retry_after_http_date_over_mock_transport() -> None:
    calls: list[httpx.Request] = []
    slept: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            when = email.utils.formatdate(time.time() + 3, usegmt=True)
            return httpx.Response(503, headers={"Retry-After": when}, text="busy")
        return httpx.Response(200, json={"choices": [{"message": {"content": "hi"}}]})

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def run() -> list[Completion]:
        cfg = config("http://mock.invalid/v1")
        transport = httpx.MockTransport(handler)
        async with ChatClient(cfg, transport=transport, sleep=sleep) as client:
            return await client.complete(MESSAGES)

    (got,) = asyncio.run(run())
    assert got.text == "hi" and got.finish_reason is None and got.usage is None
    assert len(slept) == 1 and 1.5 <= slept[0] <= 3.0
    assert str(calls[0].url) == "http://mock.invalid/v1/chat/completions"
    assert calls[0].headers["authorization"] == f"Bearer {KEY}"


def test_injected_client_is_used_and_not_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_VAR)

    def handler(request: httpx.Request) -> httpx.Response:
        assert "authorization" not in request.headers  # no key set: no header
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}]})

    async def run() -> bool:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
            async with ChatClient(config("http://mock.invalid/v1"), client=http) as client:
                await client.complete(MESSAGES)
            return http.is_closed

    assert asyncio.run(run()) is False


def _mock_complete(handler: Any, n: int) -> list[Completion]:
    async def run() -> list[Completion]:
        transport = httpx.MockTransport(handler)
        async with ChatClient(config("http://mock.invalid/v1"), transport=transport) as client:
            return await client.complete(MESSAGES, n=n)

    return asyncio.run(run())


def test_422_naming_n_falls_back_to_single_requests() -> None:
    seen: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body.get("n"))
        if body.get("n", 1) > 1:
            detail = [{"loc": ["body", "n"], "msg": "Input should be 1", "type": "literal"}]
            return httpx.Response(422, json={"detail": detail})
        return httpx.Response(200, json={"choices": [{"message": {"content": "one"}}]})

    assert [c.text for c in _mock_complete(handler, 3)] == ["one"] * 3
    assert seen == [3, None, None, None]


def test_400_not_about_n_fails_at_once() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(400, json={"error": {"message": "messages must not be empty"}})

    with pytest.raises(PolicyError, match="HTTP 400 Bad Request: messages must not be empty"):
        _mock_complete(handler, 2)
    assert len(seen) == 1


def test_a_failing_cache_does_not_lose_the_sample(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"choices": [{"message": {"content": "kept"}}]})

    cache = ResponseCache(tmp_path)
    cache.close()  # every write now fails

    async def run() -> list[Completion]:
        transport = httpx.MockTransport(handler)
        cfg = config("http://mock.invalid/v1")
        async with ChatClient(cfg, transport=transport, cache=cache, refresh=True) as client:
            return await client.complete(MESSAGES)

    assert [c.text for c in asyncio.run(run())] == ["kept"]


def test_sampling_params_body_and_stop() -> None:
    assert SamplingParams(stop="END").stop == ("END",)
    assert SamplingParams(stop=["a", "b"]).body()["stop"] == ["a", "b"]  # type: ignore[arg-type]
    assert SamplingParams(n=8).body() == {"temperature": 1.0, "top_p": 1.0}  # no n, no Nones


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"temperature": -1}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"n": 0}, "n must be"),
    ],
)
def test_sampling_params_validation(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        SamplingParams(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"endpoint": "127.0.0.1:8000/v1"}, "http"),
        ({"endpoint": "ftp://host/v1"}, "http"),
        ({"endpoint": "http://[::1"}, "http"),
        ({"model": ""}, "model"),
        ({"read_timeout": 0}, "read_timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"concurrency": 0}, "concurrency"),
    ],
)
def test_client_config_validation(kwargs: dict[str, Any], match: str) -> None:
    values = {"endpoint": "http://127.0.0.1:8000/v1", "model": "m", **kwargs}
    with pytest.raises(ConfigError, match=match):
        ClientConfig(**values)


def test_a_huge_retry_after_is_capped_by_the_request_budget(url: str, caplog: pytest.LogCaptureFixture) -> None:
    """A server answering 429 with Retry-After: 100000 on every attempt: the waits of one request
    total at most its timeout (not retries x 120 s), the log says so, and the request fails."""
    srv.control(url, faults=[{"kind": "status", "status": 429, "retry_after": "100000", "count": 10}])
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    cfg = config(url, request_timeout=3.0, max_retries=4)
    logger = "hwtp.policy.llm.client"
    with caplog.at_level("WARNING", logger=logger), pytest.raises(PolicyError, match="gave up after 5"):
        complete(cfg, sleep=sleep)
    assert len(slept) == 4 and sum(slept) <= 3.0 + 4 * cfg.backoff_max
    assert slept[0] == 3.0  # the whole budget at once: what the server asked for is longer
    assert requests_made(url) == 5
    lines = [r.getMessage() for r in caplog.records if "retry 1 of 4" in r.getMessage()]
    assert lines and "Retry-After 100000 s capped" in lines[0] and "--timeout, 3 s, in all" in lines[0], lines


def test_retry_delay_within_a_budget() -> None:
    cfg = ClientConfig("http://127.0.0.1:1/v1", "m", backoff_base=0.0, retry_after_max=120.0)
    rng = random.Random(1)
    assert retry_delay(0, cfg, 100000.0, rng, budget=7.0) == 7.0
    assert retry_delay(0, cfg, 100000.0, rng, budget=-1.0) == 0.0
    assert retry_delay(0, cfg, 2.0, rng, budget=7.0) == 2.0
