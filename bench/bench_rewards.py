"""Benchmark: the reward of a completion, one at a time and in batches, baseline vs warm workers.

Workload: completions (random plans as a policy would write them, each for one state) of a
small sequential design (default counter_en_load), with the ground truth an export carries
({"design", "state", "mutant_set"}). The timed batches score completions never scored before,
each repetition its own, as a training run does; ``--warm`` other completions scored first
(untimed) bring the plan reader's tables of steps and port values to where a run's are after
its first few thousand completions (with this policy a completion then holds ~0.1-0.4 steps
the reader has not seen, against ~6 in a run's first 640). A reward needs the plan's golden
evaluation and its state's evaluation.

Scorers (each turns a list of (ground truth, completion) into rewards; add one to SCORERS):

- baseline: one completion per call, the way the library could score before warm workers:
  ``hwtp.scoring.score.score`` on that one plan, so a simulator process per call. Batches are scored
  completion by completion (measured on --baseline-batch completions, reported per second).
- score() per batch: the whole batch in one ``hwtp.scoring.score.score`` call (one process start per
  call, -j workers), for reference.
- warm pool: ``hwtp.sim.warm.WarmPool`` through the Python API (``hwtp.scoring.score.prepare``,
  ``pool.submit`` per chunk of 16 completions so compiling overlaps simulating, ``assemble``),
  plans read by ``hwtp.plans.format.extract_plan`` (hwtp.yamlio, the located loader): the old reading,
  beside the next row's in the same run.
- hwtp.rewards.score_completions: the batched core every trainer adapter calls (plans read by
  ``hwtp.plans.fastread`` when ``hwtp[fast]`` is installed; the line "plan reader" says).
- hwtp serve: the reward service over HTTP (``POST /reward``), started as its own process.
- warm pool, simulation only: the same pool with every plan compiled before the clock starts
  (what the workers deliver: queueing, the socket, the simulators).

Reported, in one run: p50/p99 latency of a single completion; rewards/s for ``--batches``
batches of 64, ``--reps`` times (median and range; 40 batches, 2,560 completions, make a
repetition of the warm scorers last ~0.7 s on 2 cores: with 10, ~0.2 s, single repetitions
scattered by twice as much); each scorer's ratio to the baseline; for the warm
scorers, CPU per completion of the host process (the caller's thread and the pool's socket
threads: reading, checking and compiling plans, the socket lines, the results) and of the
simulator processes, and the share of the machine's CPU left idle during its batches (with
the cores full, the rate follows the CPU per completion; idle CPU is what overlap loses); the
load average. Every scorer's rewards are checked against the
baseline's on the same completions. Goals (issue 28): host CPU per completion <= the
simulators'; ``score_completions`` >= 80% of the workers-alone rate; >= 1,000 rewards/s on 2
idle cores; warm p50 <= 20 ms (>= 50x the baseline).

Run: python bench/bench_rewards.py [--design counter_en_load] [--workers 2]
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from reps import add_reps_argument, interleaved

from hwtp import rewards
from hwtp.mutators import engine, mutantset
from hwtp.mutators.stimulus import StimulusConfig
from hwtp.plans import fastread
from hwtp.plans.files import PlanInput
from hwtp.plans.format import extract_plan
from hwtp.policy.policies import PlanRequest, RandomPolicy
from hwtp.rewards import core as reward_core
from hwtp.rtl.design import load_design
from hwtp.scoring.score import ScoreConfig, assemble, prepare, schemata_build, score
from hwtp.sim import warm
from hwtp.sim.warm import WarmPool

#: Completions compiled per pool.submit in a batch: the next chunk compiles while one simulates.
_CHUNK = 16
Item = tuple[dict[str, str], str]  # (ground truth, completion text)
HWTP = shutil.which("hwtp") or str(Path(sys.executable).with_name("hwtp"))
Scorer = Callable[[Sequence[Item]], list[float | None]]


@dataclass
class Context:
    """What every scorer may use: the mutant set (on disk at ``folder``), its build, options."""

    mutant_set: Any
    folder: Path
    workers: int
    closers: list[Callable[[], None]] = field(default_factory=list)
    #: seconds by part, for scorers that report where their time goes (name -> part -> s)
    parts: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the simulator processes' pids of a scorer's warm pools (name -> function), for CPU accounting
    pids: dict[str, Callable[[], list[int]]] = field(default_factory=dict)


def _plans(items: Sequence[Item]) -> list[PlanInput]:
    out = []
    for k, (truth, text) in enumerate(items):
        try:
            out.append(PlanInput(f"c{k}", extract_plan(text), state=truth["state"]))
        except Exception as exc:  # an unreadable completion scores as invalid, as it would in training
            out.append(PlanInput(f"c{k}", None, str(exc), state=truth["state"]))
    return out


def baseline(ctx: Context) -> Scorer:
    """One ``score()`` call (one simulator process) per completion."""

    def run(items: Sequence[Item]) -> list[float | None]:
        rewards: list[float | None] = []
        for plan in _plans(items):
            result = score(ctx.mutant_set, [plan], ScoreConfig(states=(plan.state or "golden",)))
            rewards.append(result.results[0].reward)
        return rewards

    return run


def score_per_batch(ctx: Context) -> Scorer:
    """One ``score()`` call for the whole batch (one process start per call, -j workers)."""

    def run(items: Sequence[Item]) -> list[float | None]:
        plans = _plans(items)
        states = tuple(dict.fromkeys(p.state or "golden" for p in plans))
        result = score(ctx.mutant_set, plans, ScoreConfig(states=states, jobs=ctx.workers))
        return [r.reward for r in result.results]

    return run


def warm_pool(ctx: Context) -> Scorer:
    """The warm pool through the Python API: compile, ``pool.submit`` per chunk, assemble."""
    mutant_set = ctx.mutant_set
    pool = WarmPool(schemata_build(mutant_set), mutant_set.design, workers=ctx.workers)
    ctx.closers.append(pool.close)
    ctx.pids["hwtp warm pool (Python API)"] = pool.pids
    config = ScoreConfig()
    parts = ctx.parts.setdefault("hwtp warm pool (Python API)", {})
    parts.update({"parse, compile (simulating meanwhile)": 0.0, "wait for the rest": 0.0})

    def run(items: Sequence[Item]) -> list[float | None]:
        # compile the next chunk while the workers simulate the previous one (pool.submit)
        start = time.perf_counter()
        pending = []
        for k in range(0, len(items), _CHUNK):
            prepared = prepare(mutant_set, _plans(items[k : k + _CHUNK]), config)
            pending.append((prepared, pool.submit(list(prepared.evaluations.values()))))
        middle = time.perf_counter()
        rewards: list[float | None] = [
            r.reward for prepared, future in pending for r in assemble(prepared, future.result(), config.rewards)
        ]
        parts["parse, compile (simulating meanwhile)"] += middle - start
        parts["wait for the rest"] += time.perf_counter() - middle
        return rewards

    return run


def rewards_api(ctx: Context) -> Scorer:
    """``hwtp.rewards.score_completions``: what the trainer adapters call (warm pool inside)."""
    rewards.configure(states=[ctx.folder], workers=ctx.workers)
    ctx.closers.append(warm.close_all)
    ctx.pids["hwtp.rewards.score_completions"] = lambda: [p for pool in warm.pools().values() for p in pool.pids()]
    return lambda items: [r.reward for r in rewards.score_completions(list(items))]


def serve(ctx: Context) -> Scorer:
    """``hwtp serve`` over HTTP (``POST /reward``, OpenRLHF's shape), a process of its own."""
    proc = subprocess.Popen(
        [HWTP, "serve", str(ctx.folder), "--port", "0", "--workers", str(ctx.workers)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ctx.folder.parent,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on " not in line:
        raise SystemExit(f"hwtp serve did not start: {line}")
    client = httpx.Client(base_url=line.split("listening on ")[1].split()[0], timeout=300.0)

    def close() -> None:
        client.close()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)

    ctx.closers.append(close)

    def run(items: Sequence[Item]) -> list[float | None]:
        body = {"query": [text for _, text in items], "labels": [json.dumps(truth) for truth, _ in items]}
        answer = client.post("/reward", json=body)
        answer.raise_for_status()
        return list(answer.json()["rewards"])

    return run


@dataclass(frozen=True)
class Column:
    """A scorer factory; ``slow`` ones (a process start per call) are measured on fewer calls."""

    make: Callable[[Context], Scorer]
    slow: bool = False
    primed: bool = False  # every timed batch is run once before the timed repetitions (else none)


def workers_alone(ctx: Context) -> Scorer:
    """The warm pool alone: every batch's plans compiled the first time it is seen (the
    warm-up, untimed), so a timed call is only ``pool.run`` (queueing, the socket, the
    simulators) and ``assemble``: what the workers can deliver."""
    mutant_set, config = ctx.mutant_set, ScoreConfig()
    pool = WarmPool(schemata_build(mutant_set), mutant_set.design, workers=ctx.workers)
    ctx.closers.append(pool.close)
    ctx.pids[SIMULATION_ONLY] = pool.pids
    compiled: dict[tuple[str, ...], Any] = {}

    def run(items: Sequence[Item]) -> list[float | None]:
        key = tuple(text for _, text in items)
        prepared = compiled.get(key)
        if prepared is None:
            prepared = compiled[key] = prepare(mutant_set, _plans(items), config)
        results = pool.run(list(prepared.evaluations.values()))
        return [r.reward for r in assemble(prepared, results, config.rewards)]

    return run


SIMULATION_ONLY = "warm pool, simulation only (plans compiled beforehand)"

#: The scorers, in table order; the first is the baseline the ratios refer to.
SCORERS: dict[str, Column] = {
    "baseline: score() per completion": Column(baseline, slow=True),
    "score() per batch": Column(score_per_batch, slow=True),
    "hwtp warm pool (Python API)": Column(warm_pool),
    "hwtp.rewards.score_completions": Column(rewards_api),
    "hwtp serve (HTTP POST /reward)": Column(serve),
    SIMULATION_ONLY: Column(workers_alone, primed=True),
}


def completions(mutant_set: Any, count: int, seed: int) -> list[Item]:
    """``count`` completions spread over golden and the mutant states, with their ground truth."""
    states = ["golden", *(m.id for m in mutant_set.states)]
    policy = RandomPolicy(mutant_set, seed=seed, stimulus=StimulusConfig(tests=1, cycles=16))
    per_state = -(-count // len(states))
    generated = policy.generate([PlanRequest(s, []) for s in states], per_state)
    digest = mutantset.set_hash(mutant_set)
    items = [
        ({"design": mutant_set.design.name, "state": state, "mutant_set": digest}, g.text or "")
        for k in range(per_state)
        for state, gens in zip(states, generated, strict=True)
        for g in gens[k : k + 1]
    ]
    return items[:count]


@dataclass
class Measured:
    single_ms: list[float]
    rates: list[float]  # rewards/s of each repetition of the batches
    batch_size: int
    rewards: list[float | None]
    host_ms: list[float] = field(default_factory=list)  # host process CPU per completion, each repetition
    sim_ms: list[float] = field(default_factory=list)  # simulator processes' CPU per completion
    gc_ms: list[float] = field(default_factory=list)  # of host_ms: full garbage collections
    idle: list[float] = field(default_factory=list)  # % of the machine's CPU idle during each repetition

    @property
    def batch_rate(self) -> float:
        return statistics.median(self.rates)


_TICK = os.sysconf("SC_CLK_TCK")
_GC = {"started": 0.0, "full": 0.0, "count": 0.0}  # full collections: CPU seconds and how many


def _gc_watch(phase: str, info: dict[str, Any]) -> None:
    """gc.callbacks: CPU of this process's full (generation 2) collections."""
    if phase == "start":
        _GC["started"] = time.process_time()
    elif info["generation"] == 2:
        _GC["full"] += time.process_time() - _GC["started"]
        _GC["count"] += 1


def _machine() -> tuple[int, int]:
    """(idle, total) clock ticks of every CPU so far (/proc/stat; idle includes waiting for I/O)."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return ticks[3] + ticks[4], sum(ticks)


def _cpu_s(pids: Sequence[int]) -> dict[int, float]:
    """CPU seconds (user + system) each of the processes ``pids`` has used so far."""
    out = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) / _TICK
    return out


def _timed(calls: Sequence[Callable[[], Any]], done: int, pids: Callable[[], list[int]] | None, m: Measured) -> None:
    """One repetition: ``calls`` (``done`` completions in all), their rate and, with ``pids``,
    the CPU per completion of this process and of the simulators."""
    host0, sim0, gc0, start = time.process_time(), _cpu_s(pids() if pids else []), _GC["full"], time.perf_counter()
    idle0, total0 = _machine()
    for call in calls:
        call()
    elapsed, host = time.perf_counter() - start, time.process_time() - host0
    idle1, total1 = _machine()
    m.rates.append(done / elapsed)
    m.idle.append(100 * (idle1 - idle0) / max(1, total1 - total0))
    if pids:  # the simulators alive at the end (one started meanwhile counts from 0)
        sims = sum(cpu - sim0.get(pid, 0.0) for pid, cpu in _cpu_s(pids()).items())
        m.host_ms.append(1000 * host / done)
        m.sim_ms.append(1000 * sims / done)
        m.gc_ms.append(1000 * (_GC["full"] - gc0) / done)


def _repetitions(
    run: Scorer, reps: Iterator[list[list[Item]]], pids: Callable[[], list[int]] | None, m: Measured
) -> Callable[[], None]:
    """One call per repetition: the next repetition's batches of ``reps``, timed into ``m``."""

    def one() -> None:
        chunks = next(reps)
        _timed([functools.partial(run, c) for c in chunks], sum(map(len, chunks)), pids, m)

    return one


def singles(run: Scorer, items: list[Item], count: int) -> Measured:
    """Latency of ``count`` single-completion calls (after a warm-up: builds cached, processes started)."""
    run(items[:2])
    latencies, rewards = [], []
    for k in range(count):
        item = items[k % len(items)]
        start = time.perf_counter()
        rewards.extend(run([item]))
        latencies.append((time.perf_counter() - start) * 1000)
    return Measured(latencies, [], 0, rewards)


def measure(run: Scorer, items: list[Item], count: int, batches: int, batch: int) -> Measured:
    """``count`` single calls (latency), then ``batches`` batches of ``batch`` (one rate): one
    repetition of one scorer, for benchmarks that alternate their own scorers (bench_schemes)."""
    m = singles(run, items, count)
    chunks = _batches(items, batches, batch)
    _timed([functools.partial(run, c) for c in chunks], batches * batch, None, m)
    m.batch_size = batch
    return m


def _spread(values: list[float], digits: int = 0) -> str:
    """``median (min–max)`` of repeated measurements."""
    if not values:
        return "–"
    f = f"{{:.{digits}f}}"
    return f"{f.format(statistics.median(values))} ({f.format(min(values))}–{f.format(max(values))})"


def _batches(items: Sequence[Item], count: int, batch: int) -> list[list[Item]]:
    """``count`` batches of ``batch`` consecutive ``items``, starting over at the end."""
    return [[items[(b * batch + i) % len(items)] for i in range(batch)] for b in range(count)]


def reading_ms(mutant_set: Any, warm_items: Sequence[Item], reps: list[list[list[Item]]]) -> list[float]:
    """CPU per completion of reading each repetition's completions as ``score_completions`` does
    (the response, :class:`hwtp.plans.fastread.Reader`, the plan id), each repetition with a
    fresh reader that has read ``warm_items`` first (untimed), as in the timed batches."""
    out = []
    for chunks in reps:
        reader = fastread.Reader(mutant_set.design, ScoreConfig().limits.max_cycles)
        for truth, text in warm_items:
            reward_core._plan_input(text, truth["state"], None, reader)
        items = [item for chunk in chunks for item in chunk]
        start = time.process_time()
        for truth, text in items:
            reward_core._plan_input(text, truth["state"], None, reader)
        out.append(1000 * (time.process_time() - start) / len(items))
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--design", default="counter_en_load")
    parser.add_argument("--mutants", type=int, default=16, help="mutants to generate (hwtp mutate -n)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes per pool / score -j")
    parser.add_argument("--singles", type=int, default=200, help="single-completion calls per scorer")
    parser.add_argument(
        "--batches", type=int, default=40, help="batches per scorer and repetition (40 x 64: ~0.7 s on 2 cores)"
    )
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--slow-singles", type=int, default=10, help="single calls of scorers that start a process")
    parser.add_argument("--slow-batches", type=int, default=2, help="batches of scorers that start a process")
    parser.add_argument("--baseline-batch", type=int, default=16, help="completions per batch for the baseline")
    add_reps_argument(parser)
    parser.add_argument(
        "--warm", type=int, default=2560, help="completions scored untimed before the batches (the reader's tables)"
    )
    parser.add_argument("--only", action="append", help="run only the scorers whose name contains this")
    args = parser.parse_args()
    if args.warm < args.batch:
        parser.error(f"--warm {args.warm}: at least one batch ({args.batch}) starts the pools before the timed batches")

    with tempfile.TemporaryDirectory(prefix="hwtp-bench-rewards-") as tmp:
        folder = Path(tmp) / "mutants"
        result = engine.mutate(
            load_design(args.design), engine.MutationConfig(n=args.mutants, seed=0, jobs=args.workers)
        )
        mutantset.write(result, folder)
        ctx = Context(mutantset.load(folder), folder, args.workers)
        schemata_build(ctx.mutant_set)  # cached before anything is timed
        # The timed batches score completions never scored before, as training does: each
        # repetition its own, after --warm others (untimed) have brought the reader's tables of
        # steps and port values to where a run's are after its first few thousand completions.
        per_rep = args.batch * args.batches
        head = max(args.batch, args.singles)
        pool = completions(ctx.mutant_set, head + args.warm + per_rep * args.reps, seed=7)
        items, warm_items = pool[:head], pool[head : head + args.warm]
        fresh = [_batches(pool[head + args.warm + r * per_rep :], args.batches, args.batch) for r in range(args.reps)]
        rows: dict[str, Measured] = {}
        gc.callbacks.append(_gc_watch)
        load_before = os.getloadavg()
        try:
            timed: list[tuple[str, Scorer]] = []
            for k, (name, column) in enumerate(SCORERS.items()):
                if k and args.only and not any(word in name for word in args.only):
                    continue
                run = column.make(ctx)
                rows[name] = singles(run, items, args.slow_singles if column.slow else args.singles)
                batch = args.baseline_batch if k == 0 else args.batch
                rows[name].batch_size = batch
                if column.slow:
                    count = 1 if k == 0 else args.slow_batches
                    chunks = _batches(items, count, batch)
                    _timed([functools.partial(run, c) for c in chunks], count * batch, None, rows[name])
                    continue
                # untimed: the pools' processes started (single calls need one) and the reader warm
                for chunk in _batches(warm_items, len(warm_items) // batch, batch):
                    run(chunk)
                if column.primed:  # the workers alone: every timed batch's plans compiled here
                    for chunk in (c for chunks in fresh for c in chunks):
                        run(chunk)
                timed.append((name, run))
            # repetitions interleaved, the order reversed on every other one: each sees the same load
            interleaved(
                args.reps, {name: _repetitions(run, iter(fresh), ctx.pids.get(name), rows[name]) for name, run in timed}
            )
            read = reading_ms(ctx.mutant_set, warm_items, fresh)
        finally:
            for close in ctx.closers:
                close()
        load_after = os.getloadavg()

    base_name = next(iter(rows))
    base = rows[base_name]
    checked = len(base.rewards)
    for name, m in rows.items():
        if m.rewards[:checked] != base.rewards[:checked]:
            raise SystemExit(f"{name}: rewards differ from the baseline's on the same completions")
    design = ctx.mutant_set.design.name
    print(
        f"\n{design}: {len(ctx.mutant_set.states)} mutant states + golden, {args.workers} workers, "
        f"{os.cpu_count()} CPUs; rewards equal the baseline's on {checked} completions\n"
    )
    print(
        "| scorer | p50 ms (1 completion) | p99 ms | rewards/s (batches) | p50 speed-up | throughput ratio "
        "| host CPU ms/completion | simulators' CPU ms/completion |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    base_p50 = statistics.median(base.single_ms)
    for name, m in rows.items():
        p50, p99 = statistics.median(m.single_ms), percentile(m.single_ms, 99)
        size = f" (batch of {m.batch_size})" if m.batch_size != args.batch else ""
        rate = _spread(m.rates, 2 if m.batch_rate < 10 else 0)
        print(
            f"| {name} | {p50:.1f} | {p99:.1f} | {rate}{size} | {base_p50 / p50:.0f}x "
            f"| {m.batch_rate / base.batch_rate:.0f}x | {_spread(m.host_ms, 3)} | {_spread(m.sim_ms, 3)} |"
        )
    print(
        f"\nbaseline measured on {len(base.single_ms)} single calls and one batch of {base.batch_size} "
        f"(one completion per call: its rate does not depend on the batch size); batches of the others: "
        f"{args.reps} repetitions of {args.batches} x {args.batch}, median (range)"
    )
    print(
        f"load average (1, 5, 15 min): before {', '.join(f'{x:.1f}' for x in load_before)}; "
        f"after {', '.join(f'{x:.1f}' for x in load_after)}; {os.cpu_count()} CPUs"
    )
    for name, parts in ctx.parts.items():
        total = sum(parts.values()) or 1.0
        shares = ", ".join(f"{part} {100 * seconds / total:.0f}%" for part, seconds in parts.items())
        print(f"{name}: where the time goes: {shares}")
    fast = "rapidyaml + orjson" if fastread.FAST else "NOT installed (pip install 'hwtp[fast]'): the old loader"
    print(f"plan reader: {fast}")
    warm_row = rows.get("hwtp warm pool (Python API)")
    if warm_row:
        p50 = statistics.median(warm_row.single_ms)
        print(
            f"goal: warm p50 {p50:.1f} ms <= 20 ms: {'met' if p50 <= 20 else 'NOT met'}; "
            f">= 50x baseline: {'met' if base_p50 / p50 >= 50 else 'NOT met'} ({base_p50 / p50:.0f}x)"
        )
    api, alone = rows.get("hwtp.rewards.score_completions"), rows.get(SIMULATION_ONLY)
    if api and api.host_ms:
        host, sim = statistics.median(api.host_ms), statistics.median(api.sim_ms)
        print(
            f"goal: host CPU per completion {host:.3f} ms <= the simulators' {sim:.3f} ms: "
            f"{'met' if host <= sim else 'NOT met'} ({host / sim:.2f}x)"
        )
        print(
            f"score_completions: host CPU per completion {_spread(api.host_ms, 3)} ms, of which reading the "
            f"plans (response, fastread.Reader, plan id; measured alone on the same completions) "
            f"{_spread(read, 3)} ms and full garbage collections {_spread(api.gc_ms, 3)} ms"
        )
    idle = [f"{name} {_spread(m.idle, 1)}%" for name, m in rows.items() if m.idle and m.host_ms]
    if idle:  # simulators without work while a call runs: what the rate loses beyond CPU per completion
        print(f"the machine's idle CPU during the timed batches: {'; '.join(idle)}")
    for name, m in rows.items():
        if m.gc_ms and name != "hwtp.rewards.score_completions":
            print(f"{name}: full garbage collections {_spread(m.gc_ms, 3)} ms of host CPU per completion")
    if api and alone:
        share = [a / w for a, w in zip(api.rates, alone.rates, strict=True)]
        print(
            f"goal: score_completions >= 80% of the workers-alone rate: "
            f"{'met' if statistics.median(share) >= 0.8 else 'NOT met'} ({_spread([100 * x for x in share])}%, "
            f"repetitions paired in order)"
        )
    if api:
        print(
            f"goal: >= 1,000 rewards/s on 2 idle cores: {'met' if api.batch_rate >= 1000 else 'NOT met'} "
            f"({api.batch_rate:.0f}/s at load {load_before[0]:.1f}"
            f"{'; the machine was not idle' if load_before[0] > 0.5 else ''})"
        )


if __name__ == "__main__":
    main()
