"""Benchmark: rewards of batches that span many designs, score_completions vs the workers alone.

A training batch holds completions of many designs (and a large mutant set is several schemata
builds), so one ``hwtp.rewards.score_completions`` call uses a warm pool per build. This
measures such calls on the same batches, in one run, repetitions interleaved:

- workers alone (the baseline): per mutant set, a ``hwtp.sim.warm.WarmPool`` per build with the
  set's process budget, as ``score_completions`` makes them, and every batch's plans compiled
  before the clock starts; a call submits each set's evaluations, then waits for them all and
  assembles the rewards: what the simulators can deliver.
- ``hwtp.rewards.score_completions``: the whole batch in one call (plans read, compiled,
  simulated, rewarded).

Printed: rewards/s of each (median and range over the repetitions), the ratio of each
repetition's pair, the simulator processes each started during the timed calls, and the CPU
per completion of the host process and of the simulators (with both cores full, the rate
follows their sum: the ratio is at best (host alone + simulators) / (host + simulators)). Before
the warm pools' process cap (``HWTP_WARM_PROCESSES``) replaced a bound of 8 pools, every call
over more than 8 builds retired and re-created pools and restarted their simulators (4.4-12 s
per call of 180 completions against ~0.1 s warm); a timed call must start none. Rewards of
the two are checked equal on the same completions.

Both scorers' pools count toward the warm process cap: unless ``HWTP_WARM_PROCESSES`` is set,
the bench sets it to room for both.

Run: python bench/bench_reward_sets.py [--designs a,b,...] [--mutants 8] [--part 5] [--reps 3]
``--part N`` sets ``HWTP_SCHEMATA_PART`` (at most N mutants per schemata build), so each set is
several builds.
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import reps
from bench_rewards import Item, _cpu_s, completions

from hwtp import env, rewards
from hwtp.mutators import engine, mutantset
from hwtp.plans.files import PlanInput
from hwtp.plans.format import extract_plan
from hwtp.rtl.design import load_design
from hwtp.scoring.score import Prepared, ScoreConfig, assemble, prepare
from hwtp.sim import warm
from hwtp.sim.executors.base import schemata_targets

DESIGNS = (
    "counter_en_load,fifo_sync,alu_flags,gray_converter,lfsr,"
    "shift_register,edge_detector,priority_encoder,rr_arbiter,uart_tx"
)


class WorkersAlone:
    """Warm pools of every set's builds (one budget of ``workers`` per set), plans compiled once."""

    def __init__(self, sets: Sequence[Any], workers: int) -> None:
        self.sets = {mutantset.set_hash(s): s for s in sets}
        self.schemata = {digest: schemata_targets(s) for digest, s in self.sets.items()}
        self.pools: list[warm.WarmPool] = []
        self.pool_of: dict[tuple[str, int], warm.WarmPool] = {}
        for digest, schemata in self.schemata.items():
            budget = warm.Budget(workers)
            for part, target in enumerate(schemata.targets):
                pool = warm.WarmPool(target.build(), target.design, workers=workers, budget=budget)
                self.pools.append(pool)
                self.pool_of[digest, part] = pool
        self.compiled: dict[tuple[str, ...], list[tuple[Prepared, list[tuple[int, list[Any]]], str]]] = {}

    def _prepare(self, items: Sequence[Item]) -> list[tuple[Prepared, list[tuple[int, list[Any]]], str]]:
        by_set: dict[str, list[PlanInput]] = {}
        for k, (truth, text) in enumerate(items):
            plan = PlanInput(f"c{k}", extract_plan(text), state=truth["state"])
            by_set.setdefault(truth["mutant_set"], []).append(plan)
        out = []
        for digest, plans in by_set.items():
            prepared = prepare(self.sets[digest], plans, ScoreConfig())
            out.append((prepared, self.schemata[digest].split(list(prepared.evaluations.values())), digest))
        return out

    def __call__(self, items: Sequence[Item]) -> list[float | None]:
        key = tuple(text for _, text in items)
        work = self.compiled.get(key)
        if work is None:
            work = self.compiled[key] = self._prepare(items)
        futures: list[tuple[Prepared, list[Future[Any]]]] = [
            (prepared, [self.pool_of[digest, part].submit(group) for part, group in groups])
            for prepared, groups, digest in work
        ]
        by_plan: dict[tuple[str, str], float | None] = {}
        for prepared, waits in futures:
            results: dict[str, Any] = {}
            for future in waits:
                results.update(future.result())
            for sample in assemble(prepared, results, ScoreConfig().rewards):
                by_plan[sample.plan, sample.state] = sample.reward
        # the completions in order (plan ids are c<k> over the whole batch)
        return [by_plan[f"c{k}", truth["state"]] for k, (truth, _text) in enumerate(items)]

    def close(self) -> None:
        for pool in self.pools:
            pool.close()


def started(pools: Callable[[], Sequence[warm.WarmPool]]) -> dict[warm.WarmPool, int]:
    """Simulator processes each pool has started so far."""
    return {p: p.stats()["processes"] for p in pools()}


def started_since(before: dict[warm.WarmPool, int], pools: Callable[[], Sequence[warm.WarmPool]]) -> int:
    """Processes started since ``before`` by the pools there now (a pool made meanwhile, such as
    one re-created after the registry retired it, counts all of its own)."""
    return sum(n - before.get(p, 0) for p, n in started(pools).items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--designs", default=DESIGNS, help="comma-separated embedded designs")
    parser.add_argument("--mutants", type=int, default=8, help="mutants per design (hwtp mutate -n)")
    parser.add_argument("--part", type=int, default=0, help="at most this many mutants per schemata build")
    parser.add_argument("--per", type=int, default=18, help="completions per design in a batch")
    parser.add_argument("--batches", type=int, default=3, help="batches per timed call sequence")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes per mutant set")
    reps.add_reps_argument(parser)
    args = parser.parse_args()
    if args.part:
        os.environ[env.SCHEMATA_PART_VAR] = str(args.part)
    designs = [d for d in args.designs.split(",") if d]

    with reps.load_report(f"bench_reward_sets: {len(designs)} designs"), tempfile.TemporaryDirectory() as tmp:
        folders = []
        for design in designs:
            folder = Path(tmp) / design
            result = engine.mutate(load_design(design), engine.MutationConfig(n=args.mutants, seed=0, jobs=2))
            mutantset.write(result, folder)
            folders.append(folder)
        sets = [mutantset.load(f) for f in folders]
        builds = sum(len(schemata_targets(s).targets) for s in sets)
        # both scorers' pools count toward the warm process cap: room for each to keep every
        # build's processes (a cap below that restarts simulators on every call, by design)
        os.environ.setdefault(env.WARM_PROCESSES_VAR, str(max(env.DEFAULT_WARM_PROCESSES, 2 * builds * args.workers)))
        batches = [
            [item for s in sets for item in completions(s, args.per, seed=7 + b)] for b in range(args.batches)
        ]
        alone = WorkersAlone(sets, args.workers)
        rewards.configure(states=folders, workers=args.workers)
        starts = {"workers alone": 0, "score_completions": 0}
        count = sum(len(b) for b in batches)
        # CPU per completion of this process (every thread) and of the simulators alive at the end
        host_ms: dict[str, list[float]] = {"workers alone": [], "score_completions": []}
        sim_ms: dict[str, list[float]] = {"workers alone": [], "score_completions": []}
        got: dict[str, list[list[float | None]]] = {"workers alone": [], "score_completions": []}

        def api(items: Sequence[Item]) -> list[float | None]:
            return [r.reward for r in rewards.score_completions(list(items))]

        scorers: dict[str, tuple[Callable[[Sequence[Item]], list[float | None]], Any]] = {
            "workers alone": (alone, lambda: alone.pools),
            "score_completions": (api, lambda: list(warm.pools().values())),
        }
        try:
            for name, (run, _pools) in scorers.items():  # warm-up, untimed: builds, compiled plans, processes
                for batch in batches:
                    got[name].append(run(batch))

            def timed(name: str) -> float:
                run, pools = scorers[name]
                before, sims = started(pools), _cpu_s([pid for p in pools() for pid in p.pids()])
                start = reps.clock()
                for batch in batches:
                    run(batch)
                wall, cpu = reps.since(start)
                after = _cpu_s([pid for p in pools() for pid in p.pids()])
                starts[name] += started_since(before, pools)
                host_ms[name].append(1000 * cpu / count)
                sim_ms[name].append(1000 * sum(c - sims.get(pid, 0.0) for pid, c in after.items()) / count)
                return count / wall

            rates = reps.interleaved(args.reps, {name: functools.partial(timed, name) for name in scorers})
        finally:
            alone.close()
            warm.close_all()

        if got["workers alone"] != got["score_completions"]:
            raise SystemExit("score_completions' rewards differ from the workers alone's on the same completions")
        print(
            f"{len(designs)} designs, {args.mutants} mutants each, {builds} schemata builds in all; "
            f"{args.batches} batches of {len(batches[0])} completions a repetition, {args.reps} repetitions, "
            f"{args.workers} workers per set, at most {os.environ[env.WARM_PROCESSES_VAR]} warm processes; "
            f"rewards equal on {count} completions"
        )
        for name, values in rates.items():
            print(
                f"{name}: {reps.spread(values).show('.0f', ' rewards/s')}; "
                f"simulator processes started during the timed calls: {starts[name]}; CPU per completion: "
                f"host {reps.spread(host_ms[name]).show('.3f', ' ms')}, "
                f"simulators {reps.spread(sim_ms[name]).show('.3f', ' ms')}"
            )
        share = reps.ratios(rates["score_completions"], rates["workers alone"])
        print(f"score_completions / workers alone: {reps.spread([100 * x for x in share.values]).show('.0f', '%')}")


if __name__ == "__main__":
    main()
