"""Benchmark: evaluations on Ray actors (warm simulator workers) against one local warm worker.

Workload: random plans (as a policy writes them) for golden and the mutant states of a small
design (default counter_en_load); each plan's golden evaluation and its state's evaluation,
about --evaluations of them. Every configuration runs the same evaluations once to warm up
(actors placed, builds found in the cache, simulators started), then is timed --reps times,
each time beside the local worker (interleaved, so load drift hits both); its speed-up is taken
inside each repetition and printed as median (min..max). Results are checked equal to the
local worker's (but for timings).

- local, 1 worker: one ``hwtp.sim.warm.WarmPool`` process in this process (the baseline).
- ray, 1 actor / 2 actors: ``hwtp.sim.executors.ray.RayExecutor`` on a local Ray instance
  (``ray.init(num_cpus=2)``), chunks of --chunk evaluations.
- ray, 2 actors, 2 callers: two Ray actors of the job (as a trainer's reward workers), each
  with its own ``RayExecutor`` and half of the evaluations, at once; they find one pool of two
  actors by name, so the rate to expect is the 2-actor row's (timed from the first start to the
  last end, inside the callers). Also timed: each one's first call (the first makes the pool:
  actors placed, builds found, simulators started; the second joins it warm).
- ray, 2 nodes: a simulated two-node cluster on this machine (``ray.cluster_utils.Cluster``,
  one CPU per node), one actor per node.

Reported: evaluations/s, speed-up and efficiency against the local worker (efficiency =
speed-up / actors), Ray's overhead per evaluation with one actor (goal <= 10% at chunks of 64),
bytes per evaluation through Ray (the chunk's evaluations sent, its result lines returned,
pickled), and, with --build, building per node vs shipping the built folder through the
object store. Then the capacity model: cores for --completions x --states per step in
--step-seconds.

Run: python bench/bench_ray.py [--design counter_en_load] [--evaluations 1024] [--chunk 64] [--reps 5] [--build]
"""

from __future__ import annotations

import argparse
import io
import pickle
import shutil
import statistics
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
import ray.cluster_utils
from reps import add_reps_argument, interleaved, load_report, ratios, spread  # bench/ on sys.path

from hwtp.mutators import engine, mutantset
from hwtp.plans.files import plan_input
from hwtp.policy.planning import plan_states
from hwtp.policy.policies import PolicySpec, make_policy
from hwtp.policy.prompt import Templates
from hwtp.rtl.design import load_design
from hwtp.scoring.score import ScoreConfig, prepare
from hwtp.sim.executors.base import Schemata, Target, schemata_targets
from hwtp.sim.executors.ray import RayExecutor
from hwtp.sim.job import Evaluation, Limits
from hwtp.sim.runner import EvalResult
from hwtp.sim.warm import WarmPool


def workload(design_name: str, states: int, evaluations: int, root: Path) -> tuple[Schemata, list[Evaluation]]:
    design = load_design(design_name)
    result = engine.mutate(design, engine.MutationConfig(n=states, seed=0, jobs=2))
    mutantset.write(result, root / design_name)
    mutant_set = mutantset.load(root / design_name)
    names = ["golden", *(m.id for m in mutant_set.states)]
    per_state = max(1, evaluations // (2 * len(names)) + 1)
    policy = make_policy(PolicySpec("random", seed=7), mutant_set)
    records = plan_states(mutant_set, names, per_state, policy, Templates.load(), [])
    prepared = prepare(mutant_set, [plan_input(r) for r in records], ScoreConfig())
    return schemata_targets(mutant_set), list(prepared.evaluations.values())[:evaluations]


def timed(run: Any) -> tuple[float, dict[str, EvalResult]]:
    start = time.perf_counter()
    out = run()
    return time.perf_counter() - start, out


def against_local(local: Any, other: Any, reps: int) -> tuple[list[float], list[float], dict[str, EvalResult]]:
    """Warm ``other`` up once (actors placed, builds found, simulators started), then time it and
    the local worker, interleaved, ``reps`` times: (local seconds, other's seconds, other's last results)."""
    other()
    got = interleaved(reps, {"local": lambda: timed(local), "other": other})
    return [t for t, _ in got["local"]], [t for t, _ in got["other"]], got["other"][-1][1]


def same(a: dict[str, EvalResult], b: dict[str, EvalResult]) -> bool:
    def strip(r: EvalResult) -> dict[str, Any]:
        line = r.as_line()
        line.pop("seconds")
        return line

    return a.keys() == b.keys() and all(strip(a[k]) == strip(b[k]) for k in a)


def ray_rows(actors: int, target: Schemata, evs: list[Evaluation], args: Any, local: Any) -> Row:
    executor = RayExecutor(chunk=args.chunk, actors=actors)
    try:
        return Row(*against_local(local, lambda: timed(lambda: executor.run(target, evs, Limits())), args.reps))
    finally:
        executor.close()


@dataclass(frozen=True)
class Row:
    """A configuration's timings beside the local worker's, one pair per repetition."""

    local_s: list[float]
    seconds: list[float]
    out: dict[str, EvalResult]


@ray.remote(num_cpus=0)
class Caller:
    """A process of the job that scores through the shared actor pool (a reward worker)."""

    def __init__(self, chunk: int) -> None:
        self.executor = RayExecutor(chunk=chunk, actors=2)

    def run(self, target: Schemata, evs: list[Evaluation]) -> tuple[float, float, dict[str, EvalResult]]:
        """(start, end) on the machine's clock (the callers share it here) and the results:
        timed inside, so returning the results to the driver is not counted."""
        start = time.time()
        out = self.executor.run(target, evs, Limits())
        return start, time.time(), out

    def actors(self) -> list[str]:
        return list(self.executor.snapshot()["actors"])


def shared_rows(target: Schemata, evs: list[Evaluation], args: Any, local: Any) -> tuple[Row, list[float]]:
    """Two callers, half of the evaluations each (as two workers' batches), at once: (the row,
    timed from the first start to the last end, and each first call's seconds)."""
    callers = [Caller.remote(args.chunk) for _ in range(2)]  # type: ignore[attr-defined]
    half = len(evs) // 2
    halves = [evs[:half], evs[half:]]
    try:
        firsts = []
        for caller, part in zip(callers, halves, strict=True):  # one by one: the first makes the pool
            start, end, _ = ray.get(caller.run.remote(target, part))
            firsts.append(end - start)
        assert ray.get(callers[0].actors.remote()) == ray.get(callers[1].actors.remote())

        def both() -> tuple[float, dict[str, EvalResult]]:
            done = ray.get([c.run.remote(target, h) for c, h in zip(callers, halves, strict=True)])
            return max(d[1] for d in done) - min(d[0] for d in done), {**done[0][2], **done[1][2]}

        return Row(*against_local(local, both, args.reps)), firsts
    finally:
        for caller in callers:
            ray.kill(caller)  # the actors they made end with them


def bytes_per_evaluation(target: Target, evs: list[Evaluation], results: dict[str, EvalResult], chunk: int) -> float:
    sent = sum(len(pickle.dumps(evs[i : i + chunk])) for i in range(0, len(evs), chunk))
    back = sum(
        len(pickle.dumps([results[e.id].as_line() for e in evs[i : i + chunk]])) for i in range(0, len(evs), chunk)
    )
    return (sent + back + len(pickle.dumps(target))) / len(evs)


def build_compare(target: Target) -> dict[str, float]:
    """Build in an empty cache (what each node does once) vs pack the built folder, pass it
    through the object store and unpack it (what shipping the build would cost)."""
    with tempfile.TemporaryDirectory(prefix="hwtp-bench-build-") as tmp:
        fresh = Target(target.design, target.sources, target.simulator, Path(tmp) / "cache")
        start = time.perf_counter()
        build = fresh.build()
        build_s = time.perf_counter() - start
        start = time.perf_counter()
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            tar.add(build.path, arcname=build.path.name)
        data = buf.getvalue()
        ref = ray.put(data)
        got = ray.get(ref)
        with tarfile.open(fileobj=io.BytesIO(got), mode="r:gz") as tar:
            tar.extractall(Path(tmp) / "unpacked", filter="data")
        ship_s = time.perf_counter() - start
        return {"build_s": build_s, "ship_s": ship_s, "ship_mb": len(data) / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--design", default="counter_en_load")
    ap.add_argument("--states", type=int, default=16)
    ap.add_argument("--evaluations", type=int, default=1024)
    ap.add_argument("--chunk", type=int, default=64)
    add_reps_argument(ap, default=5)
    ap.add_argument("--build", action="store_true", help="Also compare building per node with shipping the build.")
    ap.add_argument("--completions", type=int, default=512)
    ap.add_argument("--step-states", type=int, default=8)
    ap.add_argument("--step-seconds", type=float, default=10.0)
    args = ap.parse_args()
    with load_report("evaluations on Ray actors against one local warm worker"):
        root = Path(tempfile.mkdtemp(prefix="hwtp-bench-ray-"))
        try:
            schemata, evs = workload(args.design, args.states, args.evaluations, root)
            target = schemata.targets[0]  # one part: the set is small
            target.build()  # cached before anything is timed
            n = len(evs)
            print(f"{args.design}: {n} evaluations, chunks of {args.chunk}, {args.reps} reps", flush=True)
            rows: list[tuple[str, int, Row]] = []
            with WarmPool(target.build(), target.design, workers=1) as pool:
                local = lambda: pool.run(evs)  # noqa: E731
                reference = local()  # warm-up; the results every configuration must equal

                ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
                for label, actors in (("ray, 1 actor", 1), ("ray, 2 actors", 2)):
                    rows.append((label, actors, ray_rows(actors, schemata, evs, args, local)))
                row, firsts = shared_rows(schemata, evs, args, local)
                rows.append(("ray, 2 actors, 2 callers", 2, row))
                shipped = build_compare(target) if args.build else None
                ray.shutdown()

                cluster = ray.cluster_utils.Cluster(
                    initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
                )
                cluster.add_node(num_cpus=1)
                ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
                cluster.wait_for_nodes()
                rows.append(("ray, 2 nodes x 1 CPU", 2, ray_rows(2, schemata, evs, args, local)))
                ray.shutdown()
                cluster.shutdown()
            for label, _, row in rows:
                assert same(row.out, reference), label

            local_rates = [n / t for _, _, row in rows for t in row.local_s]
            print(f"local, 1 worker (baseline, measured beside every row): {spread(local_rates).show('.0f')} evals/s")
            print(f"{'configuration':<26}{'evals/s':>20}{'speed-up':>22}{'efficiency':>22}")
            for label, workers, row in rows:
                rate = spread([n / t for t in row.seconds])
                speed_up = ratios(row.local_s, row.seconds)
                efficiency = spread([v / workers for v in speed_up.values])
                print(f"{label:<26}{rate.show('.0f'):>20}{speed_up.show():>22}{efficiency.show('.0%'):>22}")
            print(
                f"first call of the process that makes the shared pool: {firsts[0]:.2f} s; "
                f"of the process that joins it: {firsts[1]:.2f} s (about {len(evs) // 2} evaluations each)"
            )
            ray1 = rows[0][2]
            overhead = spread([r / b - 1 for r, b in zip(ray1.seconds, ray1.local_s, strict=True)])
            per_ms = spread([(r - b) / n * 1e3 for r, b in zip(ray1.seconds, ray1.local_s, strict=True)])
            met = "met" if overhead.median <= 0.10 else "NOT met"
            print(
                f"Ray overhead at chunks of {args.chunk} (1 actor against the local worker): "
                f"{overhead.median:+.1%} ({overhead.low:+.1%}..{overhead.high:+.1%}), "
                f"{per_ms.show('+.2f', ' ms')} per evaluation; goal <= 10% (median): {met}"
            )
            per_ev = bytes_per_evaluation(target, evs, reference, args.chunk)
            print(
                f"bytes per evaluation through Ray: {per_ev:.0f} (evaluations sent + result lines back + target once)"
            )
            if shipped:
                print(
                    f"build per node {shipped['build_s']:.1f} s vs ship the build: {shipped['ship_mb']:.1f} MB "
                    f"packed, through the object store and unpacked in {shipped['ship_s']:.2f} s"
                )
            per_core = n / statistics.median(ray1.seconds)
            step = args.completions * (1 + args.step_states)
            efficiency = statistics.median(ratios(rows[-1][2].local_s, rows[-1][2].seconds).values) / 2
            cores = step / (args.step_seconds * per_core * efficiency)
            print(
                f"capacity (medians): {per_core:.0f} evaluations/s per core (1 actor); a step of {args.completions} "
                f"completions x {args.step_states} states = {step} evaluations (a shared golden each) in "
                f"{args.step_seconds:g} s needs ~{cores:.1f} cores at the 2-node efficiency ({efficiency:.0%})"
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
