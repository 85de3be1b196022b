"""Benchmark: ``hwtp serve`` over HTTP against the Python API it wraps, on the same completions.

Both score with warm simulator workers (``hwtp.rewards.score_completions``); the difference is
HTTP, JSON and the service's admission and batching. Workload: random plans as a policy would
write them for golden and the mutant states of a small sequential design (default
counter_en_load), with the ground truth an export carries. Reported: p50/p99 latency of one
completion per call and rewards/s for batches of 64, for each path, and serve's ratio to the API
(goal: serve within 2x). The rewards of both paths are checked equal. The two run one after the
other, never at once, so they do not share the cores.

Run: python bench/bench_serve.py [--design counter_en_load] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from hwtp import mutate as engine
from hwtp import rewards
from hwtp.design import load_design
from hwtp.policy import PlanRequest, RandomPolicy
from hwtp.score import schemata_build
from hwtp.sim import warm
from hwtp.stimulus import StimulusConfig

Item = tuple[dict[str, str], str]
Scorer = Callable[[Sequence[Item]], list[float]]
HWTP = shutil.which("hwtp") or str(Path(sys.executable).with_name("hwtp"))


def completions(mutant_set: Any, count: int, seed: int) -> list[Item]:
    states = ["golden", *(m.id for m in mutant_set.states)]
    policy = RandomPolicy(mutant_set, seed=seed, stimulus=StimulusConfig(tests=2, cycles=16))
    per_state = -(-count // len(states))
    generated = policy.generate([PlanRequest(s, []) for s in states], per_state)
    digest = engine.set_hash(mutant_set)
    items = [
        ({"design": mutant_set.design.name, "state": state, "mutant_set": digest}, g.text or "")
        for k in range(per_state)
        for state, gens in zip(states, generated, strict=True)
        for g in gens[k : k + 1]
    ]
    return items[:count]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def measure(run: Scorer, items: list[Item], singles: int, batches: int, batch: int) -> dict[str, Any]:
    run(items[:batch])  # warm-up: workers started, every plan's golden run cached alike
    latencies, single_rewards = [], []
    for k in range(singles):
        start = time.perf_counter()
        single_rewards += run([items[k % len(items)]])
        latencies.append((time.perf_counter() - start) * 1000)
    elapsed, done, batch_rewards = 0.0, 0, []
    for b in range(batches):
        chunk = [items[(b * batch + i) % len(items)] for i in range(batch)]
        start = time.perf_counter()
        batch_rewards += run(chunk)
        elapsed += time.perf_counter() - start
        done += len(chunk)
    return {
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "rate": done / elapsed,
        "rewards": single_rewards + batch_rewards,
    }


def python_api(folder: Path, workers: int) -> Scorer:
    rewards.configure(states=[folder], workers=workers)

    def run(items: Sequence[Item]) -> list[float]:
        return [0.0 if r.reward is None else r.reward for r in rewards.score_completions(list(items))]

    return run


class Service:
    def __init__(self, folder: Path, workers: int, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [HWTP, "serve", str(folder), "--port", "0", "--workers", str(workers)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "listening on " not in line:
            raise SystemExit(f"hwtp serve did not start: {line}")
        self.client = httpx.Client(base_url=line.split("listening on ")[1].split()[0], timeout=300.0)

    def run(self, items: Sequence[Item]) -> list[float]:
        body = {"query": [text for _, text in items], "labels": [json.dumps(truth) for truth, _ in items]}
        answer = self.client.post("/reward", json=body)
        answer.raise_for_status()
        return list(answer.json()["rewards"])

    def close(self) -> None:
        self.client.close()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--design", default="counter_en_load")
    parser.add_argument("--mutants", type=int, default=16)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="simulator processes per pool")
    parser.add_argument("--singles", type=int, default=200)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="hwtp-bench-serve-") as tmp:
        folder = Path(tmp) / "mutants"
        design = load_design(args.design)
        engine.write(engine.mutate(design, engine.MutationConfig(n=args.mutants, seed=0, jobs=args.workers)), folder)
        mutant_set = engine.load(folder)
        schemata_build(mutant_set)  # cached before anything is timed
        items = completions(mutant_set, max(args.batch, args.singles), seed=7)

        api = measure(python_api(folder, args.workers), items, args.singles, args.batches, args.batch)
        warm.close_all()
        service = Service(folder, args.workers, Path(tmp))
        try:
            http = measure(service.run, items, args.singles, args.batches, args.batch)
        finally:
            service.close()

    if http["rewards"] != api["rewards"]:
        raise SystemExit("hwtp serve and the Python API disagree on some rewards")
    print(f"{args.design}, {args.mutants} mutants, {args.workers} workers, batches of {args.batch}")
    print(f"{'path':<28}{'p50 ms':>10}{'p99 ms':>10}{'rewards/s':>12}")
    for name, row in (("Python API (warm pool)", api), ("hwtp serve (HTTP /reward)", http)):
        print(f"{name:<28}{row['p50_ms']:>10.2f}{row['p99_ms']:>10.2f}{row['rate']:>12.0f}")
    print(
        f"serve / API: p50 x{http['p50_ms'] / api['p50_ms']:.2f}, "
        f"throughput x{api['rate'] / http['rate']:.2f} slower (goal: within 2x)"
    )


if __name__ == "__main__":
    main()
