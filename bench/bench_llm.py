"""Benchmark of hwtp.policy.llm.client against the local OpenAI-compatible test server.

Run: ``python bench/bench_llm.py`` (with hwtp importable). Two parts, each measured against a
baseline in the same run:

1. Throughput: the server waits 50 ms before each answer. Requests per second of the hwtp
   client at concurrency 1, 8 and 32 against a plain sequential ``httpx.Client`` loop
   (goal: >= 20x at concurrency 32).
2. Overhead: the server answers at once. Time per request of the hwtp client issuing one
   request at a time (request building, retry bookkeeping, parsing, with and without a
   response cache write per sample) against bare loops that post and decode the JSON with a
   plain ``httpx.Client`` and a plain ``httpx.AsyncClient`` (goal: <= 2x), in wall time and
   in this process's CPU time (the client's own cost: far less sensitive than wall time to
   other work on the machine, which also delays the server).

Every measurement runs once per repetition (``--reps``, interleaved with its baseline); each
figure and each ratio (taken inside a repetition) is printed as median (min..max).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from reps import Clock, add_reps_argument, clock, interleaved, load_report, ratios, since, spread  # bench/ on sys.path

from hwtp.policy.llm.cache import ResponseCache
from hwtp.policy.llm.chat import ChatRequest, ClientConfig, SamplingParams
from hwtp.policy.llm.client import ChatClient, complete_many

DELAY_S = 0.05


def _server_helpers() -> Any:
    path = Path(__file__).resolve().parents[1] / "tests" / "llm_server.py"
    spec = importlib.util.spec_from_file_location("hwtp_bench_llm_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _prompt(i: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You write hardware test plans in YAML."},
        {"role": "user", "content": f"Design {i}: a 4-bit counter with enable. Write a plan."},
    ]


def _body(i: int) -> dict[str, Any]:
    return {"model": "bench", "messages": _prompt(i), "temperature": 1.0, "top_p": 1.0}


def bare_loop(url: str, count: int) -> Clock:
    """Seconds for ``count`` sequential posts with a plain httpx.Client (JSON decoded)."""
    with httpx.Client(timeout=30) as client:
        client.post(f"{url}/chat/completions", json=_body(-1)).json()  # warm the connection
        start = clock()
        for i in range(count):
            data = client.post(f"{url}/chat/completions", json=_body(i)).json()
            assert data["choices"][0]["message"]["content"]
        return since(start)


def bare_async_loop(url: str, count: int) -> Clock:
    """Seconds for ``count`` sequential posts with a plain httpx.AsyncClient (JSON decoded)."""

    async def run() -> Clock:
        async with httpx.AsyncClient(timeout=30) as client:
            await client.post(f"{url}/chat/completions", json=_body(-1))
            start = clock()
            for i in range(count):
                response = await client.post(f"{url}/chat/completions", json=_body(i))
                assert response.json()["choices"][0]["message"]["content"]
            return since(start)

    return asyncio.run(run())


def hwtp_concurrent(url: str, count: int, concurrency: int) -> float:
    """Seconds for ``count`` prompts through ``complete_many`` at ``concurrency``."""
    config = ClientConfig(url, "bench", concurrency=concurrency)
    requests = [ChatRequest(_prompt(i), SamplingParams()) for i in range(count)]
    start = time.perf_counter()
    results = complete_many(config, requests)
    elapsed = time.perf_counter() - start
    assert all(r.ok for r in results), [r.error for r in results if r.error][:1]
    return elapsed


def hwtp_sequential(url: str, count: int, cache: ResponseCache | None) -> Clock:
    """Seconds for ``count`` prompts awaited one at a time (cache misses, then writes)."""
    config = ClientConfig(url, "bench", concurrency=1)

    async def run() -> Clock:
        async with ChatClient(config, cache=cache, refresh=True) as client:
            await client.complete(_prompt(-1))  # warm the connection
            start = clock()
            for i in range(count):
                await client.complete(_prompt(i))
            return since(start)

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description="hwtp.policy.llm.client throughput and overhead")
    add_reps_argument(parser, default=5)
    parser.add_argument("--count", type=int, default=1000, help="requests per overhead repetition")
    args = parser.parse_args()
    with load_report("hwtp.policy.llm.client against the local test server"):
        os.environ.pop("OPENAI_API_KEY", None)  # never send a real key to the local server
        srv = _server_helpers()
        rows: list[tuple[str, str, str]] = []
        url, proc = srv.start_server({"delay": DELAY_S, "texts": ["tests:\n  - name: t\n"]})
        try:
            seq_count, levels = 40, (1, 8, 32)
            counts = {c: max(40, c * 20) for c in levels}
            throughput: dict[str, Any] = {"base": lambda: seq_count / bare_loop(url, seq_count)[0]}
            for c in levels:
                throughput[f"c{c}"] = lambda c=c: counts[c] / hwtp_concurrent(url, counts[c], c)
            rates = interleaved(args.reps, throughput)
            rows.append(
                ("sequential httpx.Client loop (baseline)", f"{spread(rates['base']).show('.1f')} req/s", "1.0x")
            )
            for c in levels:
                goal = "  (goal >= 20x)" if c == 32 else ""
                rows.append(
                    (
                        f"hwtp complete_many, concurrency {c}",
                        f"{spread(rates[f'c{c}']).show('.1f')} req/s",
                        f"{ratios(rates[f'c{c}'], rates['base']).show('.1f', 'x')}{goal}",
                    )
                )
            srv.control(url, texts=["tests:\n  - name: t\n"])  # answer at once
            with tempfile.TemporaryDirectory() as tmp, ResponseCache(Path(tmp)) as cache:
                per = interleaved(
                    args.reps,
                    {
                        "sync": lambda: bare_loop(url, args.count),
                        "async": lambda: bare_async_loop(url, args.count),
                        "cache": lambda: hwtp_sequential(url, args.count, cache),
                        "plain": lambda: hwtp_sequential(url, args.count, None),
                    },
                )
            for kind, which in (("wall", 0), ("CPU", 1)):
                ms = {name: [c[which] / args.count * 1e3 for c in clocks] for name, clocks in per.items()}
                rows += [
                    (
                        f"bare httpx.Client loop, no delay (baseline), {kind}",
                        f"{spread(ms['sync']).show()} ms/req",
                        "1.00x",
                    ),
                    (
                        f"bare httpx.AsyncClient loop, no delay, {kind}",
                        f"{spread(ms['async']).show()} ms/req",
                        ratios(ms["async"], ms["sync"]).show(unit="x"),
                    ),
                ]
                for name, label in (("cache", "hwtp client + cache write"), ("plain", "hwtp client")):
                    rows.append(
                        (
                            f"{label}, no delay, {kind}",
                            f"{spread(ms[name]).show()} ms/req",
                            f"{ratios(ms[name], ms['sync']).show(unit='x')} vs sync, "
                            f"{ratios(ms[name], ms['async']).show(unit='x')} vs async  (goal <= 2x)",
                        )
                    )
        finally:
            srv.stop_server(proc)
        width = max(len(r[0]) for r in rows)
        print(f"{'measurement':<{width}}  {'median (min..max)':>28}  ratio, median (min..max)")
        for name, value, ratio in rows:
            print(f"{name:<{width}}  {value:>28}  {ratio}")


if __name__ == "__main__":
    main()
