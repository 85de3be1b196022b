"""Warm simulator workers (hwtp.sim.warm): the same results as batch scoring, no process start
per call, many callers at once, hangs and crashes contained, idle and registry bounds."""

from __future__ import annotations

import dataclasses
import gc
import os
import re
import signal
import threading
import time
import weakref
from typing import Any

import pytest

from hwtp.errors import ConfigError, DesignError, SimulationError
from hwtp.mutators.stimulus import StimulusConfig
from hwtp.plans.files import PlanInput
from hwtp.plans.format import extract_plan, load_plan_file, parse_plan
from hwtp.policy.policies import PlanRequest, RandomPolicy
from hwtp.rtl.design import load_design
from hwtp.scoring.score import ScoreConfig, prepare, run_evaluations, schemata_build
from hwtp.sim import procs, warm
from hwtp.sim.executors.base import schemata_targets
from hwtp.sim.executors.warm import WarmExecutor
from hwtp.sim.job import Evaluation, Limits, compile_plan
from hwtp.sim.runner import EvalResult
from hwtp.sim.warm import Budget, WarmPool, budget_for, close_all, pool_for, pools, serving

pytestmark = pytest.mark.sim

SEQUENTIAL, COMBINATIONAL = "counter_en_load", "gray_converter"


class Case:
    """A mutant set, its schemata build and evaluations of many plans, with batch results."""

    def __init__(self, mutant_set: Any) -> None:
        self.mutant_set = mutant_set
        self.design = mutant_set.design
        policy = RandomPolicy(mutant_set, seed=3, stimulus=StimulusConfig(tests=2, cycles=12))
        generated = policy.generate([PlanRequest("golden", [])], 6)[0]
        plans = [PlanInput(f"r{g.index}", extract_plan(g.text or "")) for g in generated]
        reference = load_design(self.design.name).root / "plans" / "reference.yaml"
        plans.append(PlanInput("reference", load_plan_file(reference)))
        plans += [PlanInput(f"w_{mid}", plan) for mid, plan in sorted(mutant_set.witnesses.items())[:6]]
        self.evaluations = list(prepare(mutant_set, plans, ScoreConfig()).evaluations.values())
        self.build = schemata_build(mutant_set)
        self.reference = run_evaluations(self.build, self.design, self.evaluations, ScoreConfig(jobs=2))

    def pool(self, **options: Any) -> WarmPool:
        return WarmPool(self.build, self.design, **options)


def lines(results: dict[str, EvalResult]) -> list[dict[str, Any]]:
    """Result lines without the harness's timings."""
    return [{k: v for k, v in r.as_line().items() if k != "seconds"} for r in results.values()]


@pytest.fixture(scope="module")
def cases(mutated: Any) -> dict[str, Case]:
    return {name: Case(mutated(name)) for name in (SEQUENTIAL, COMBINATIONAL)}


def gone(pid: int, within: float = 5.0) -> bool:
    """Whether process ``pid`` has ended (reaped or a zombie) within ``within`` seconds."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("name", [SEQUENTIAL, COMBINATIONAL])
def test_results_equal_batch_scoring_and_one_process_serves_every_call(cases: dict[str, Case], name: str) -> None:
    case = cases[name]
    statuses = {r.status for r in case.reference.values()}
    assert {"pass", "fail"} <= statuses  # plans that pass and plans that detect
    with case.pool(workers=1) as pool:
        first = pool.run(case.evaluations)
        assert list(first) == list(case.reference)
        assert lines(first) == lines(case.reference)
        [pid] = pool.pids()
        start = time.perf_counter()
        for i in range(20):  # many calls, in pieces and whole, in another order
            part = case.evaluations[i::7][::-1]
            got = pool.run(part)
            assert lines(got) == [lines({e.id: case.reference[e.id]})[0] for e in part]
        seconds = time.perf_counter() - start
        assert pool.pids() == [pid]
        assert pool.stats()["processes"] == 1
    assert gone(pid)
    print(f"measured: {name}: 20 warm calls in {seconds * 1000:.0f} ms on one process")


def test_concurrent_callers_get_their_own_results(cases: dict[str, Case]) -> None:
    case = cases[SEQUENTIAL]
    evs = case.evaluations
    failures: list[str] = []
    with case.pool(workers=2) as pool:

        def caller(k: int) -> None:
            for round_ in range(5):
                part = evs[(k + round_) % 5 :: 5]  # callers overlap: the same ids in several calls
                got = pool.run(part)
                want = {e.id: case.reference[e.id] for e in part}
                if lines(got) != lines(want):
                    failures.append(f"caller {k} round {round_}")

        threads = [threading.Thread(target=caller, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not failures
        futures = [pool.submit(evs[k::3]) for k in range(3)]  # the non-blocking form
        for k, future in enumerate(futures):
            assert lines(future.result(60)) == lines({e.id: case.reference[e.id] for e in evs[k::3]})
        stats = pool.stats()
        assert stats["processes"] == len(pool.pids()) <= 2
        assert stats["queued"] == 0 and stats["busy"] == 0


def _hung(case: Case) -> Evaluation:
    """An evaluation that simulates for minutes: compiled ops with one wait of 10^9 cycles
    (no plan may ask for that many; the budget must stop it all the same)."""
    return Evaluation("hung", ({"name": "forever", "ops": [["w", 10**9]]},))


def test_a_hung_evaluation_is_a_timeout_within_its_budget_and_the_pool_goes_on(cases: dict[str, Case]) -> None:
    case = cases[SEQUENTIAL]
    before, after = case.evaluations[:3], case.evaluations[3:6]
    with case.pool(workers=1, limits=Limits(wall_s=1.0)) as pool:
        pool.run(before)
        [pid] = pool.pids()
        start = time.monotonic()
        got = pool.run([*before, _hung(case), *after])
        seconds = time.monotonic() - start
        hung = got.pop("hung")
        assert (hung.status, hung.fault, hung.reason) == ("timeout", "hang", "evaluation exceeded 1 s")
        assert lines(got) == lines({e.id: case.reference[e.id] for e in (*before, *after)})
        assert 1.0 <= seconds < 1.0 + 8, seconds  # the budget, then a fresh process for the rest
        assert gone(pid)
        assert pool.pids() and pool.pids() != [pid]
        assert lines(pool.run(case.evaluations)) == lines(case.reference)
        assert pool.stats()["processes"] == 2
    print(f"measured: a hang (budget 1 s) settled and the rest run in {seconds:.2f} s")


def _with_slow(case: Case) -> tuple[list[Evaluation], dict[str, EvalResult]]:
    """The case's evaluations and 30 slow ones after them (a process busy long enough to be
    killed mid-batch), with their batch results."""
    slow_plan = parse_plan("tests:\n- name: slow\n  steps:\n  - wait: 20000\n  - expect: {q: 0}\n")
    slow = [Evaluation(f"slow{i}", compile_plan(slow_plan, case.design)) for i in range(30)]
    slow_reference = run_evaluations(case.build, case.design, slow, ScoreConfig())
    return [*case.evaluations, *slow], {**case.reference, **slow_reference}


def _one_death_blamed(got: dict[str, EvalResult], evs: list[Evaluation], reference: dict[str, EvalResult]) -> None:
    """Nothing lost, exactly one evaluation blamed for the death, every other result right."""
    assert list(got) == [e.id for e in evs]
    errors = [r for r in got.values() if r.status == "error"]
    assert len(errors) == 1 and errors[0].reason and errors[0].reason.startswith("simulator process died")
    assert lines({k: v for k, v in got.items() if v.status != "error"}) == lines(
        {e.id: reference[e.id] for e in evs if e.id != errors[0].id}
    )


def test_a_killed_worker_loses_and_duplicates_nothing(cases: dict[str, Case]) -> None:
    case = cases[SEQUENTIAL]
    evs, reference = _with_slow(case)
    with case.pool(workers=1) as pool:
        pool.run(case.evaluations[:1])
        [pid] = pool.pids()
        box: dict[str, Any] = {}
        caller = threading.Thread(target=lambda: box.update(got=pool.run(evs)))
        base = pool.stats()["evaluations"]
        caller.start()
        while pool.stats()["evaluations"] < base + len(case.evaluations) + 3:
            time.sleep(0.001)
        os.kill(pid, signal.SIGKILL)
        caller.join(120)
        got: dict[str, EvalResult] = box["got"]
        _one_death_blamed(got, evs, reference)
        # nothing run twice: every result but the held one came from the simulator exactly once
        assert pool.stats()["evaluations"] - base == len(evs) - 1
        assert pool.stats()["processes"] == 2 and pool.pids() != [pid]


def test_a_worker_killed_while_idle_costs_no_evaluation(cases: dict[str, Case]) -> None:
    case = cases[COMBINATIONAL]
    with case.pool(workers=1) as pool:
        pool.run(case.evaluations[:2])
        [pid] = pool.pids()
        os.kill(pid, signal.SIGKILL)
        assert gone(pid)
        assert lines(pool.run(case.evaluations)) == lines(case.reference)  # no error blamed on any
        assert pool.stats()["processes"] == 2


def test_a_worker_dead_before_its_first_result_after_idle_costs_no_evaluation(cases: dict[str, Case]) -> None:
    # the work reached an idle process's socket, then the process died without a result (killed
    # while stopped, or its last thread still exiting when the send went through): nothing shows
    # any evaluation killed it, so they run again in one fresh process; a fresh process that
    # dies before its first result blames the evaluation it held
    case = cases[SEQUENTIAL]
    long_plan = parse_plan("tests:\n- name: long\n  steps:\n  - wait: 20000\n  - expect: {q: 0}\n")
    long = Evaluation("long", compile_plan(long_plan, case.design))
    with case.pool(workers=1) as pool:
        pool.run(case.evaluations[:1])
        [first] = pool.pids()
        os.kill(first, signal.SIGSTOP)  # it reads nothing now: the next call's lines wait in its socket
        batch = [long, *case.evaluations]
        future = pool.submit(batch)
        while pool.stats()["queued"] == len(batch):
            time.sleep(0.001)
        time.sleep(0.2)  # taken (a window of them), then sent at once
        os.kill(first, signal.SIGKILL)
        assert gone(first)
        while pool.pids() in ([], [first]):
            time.sleep(0.001)
        [second] = pool.pids()
        os.kill(second, signal.SIGKILL)  # busy with the long evaluation, no result yet
        got = future.result(120)
        assert got["long"].status == "error" and (got["long"].reason or "").startswith("simulator process died")
        del got["long"]
        assert lines(got) == lines(case.reference)
        assert pool.stats()["processes"] == 3


def test_idle_workers_stop_and_start_again(cases: dict[str, Case]) -> None:
    case = cases[COMBINATIONAL]
    with case.pool(workers=1, idle_seconds=0.5) as pool:
        pool.run(case.evaluations[:2])
        [pid] = pool.pids()
        time.sleep(1.5)
        assert pool.pids() == [] and pool.stats()["workers"] == 0
        assert gone(pid)
        assert lines(pool.run(case.evaluations)) == lines(case.reference)
        assert pool.stats()["processes"] == 2


def test_a_simulator_starved_past_its_start_up_budget_in_wall_time_still_starts(
    cases: dict[str, Case], starve_next_process: Any
) -> None:
    # the budget counts the process's own CPU seconds: a simulator that gets no CPU for 9 s (a
    # busy machine, a Ray worker's nice 15) is not taken for a design that never settles at time 0
    case = cases[SEQUENTIAL]
    with case.pool(limits=Limits(startup_s=6.0)) as pool:
        stopper = starve_next_process(9.0)
        start = time.monotonic()
        got = pool.run(case.evaluations[:2])
        stopper.join()
        assert time.monotonic() - start >= 9.0  # it was stopped before it got ready
    assert lines(got) == lines({e.id: case.reference[e.id] for e in case.evaluations[:2]})


def test_start_up_failure_fails_the_call_not_the_pool(cases: dict[str, Case]) -> None:
    case = cases[COMBINATIONAL]
    with case.pool(limits=Limits(startup_s=0.01)) as pool, pytest.raises(DesignError, match="start-up budget"):
        pool.run(case.evaluations[:2])
    with case.pool() as pool:
        two = case.evaluations[:2]
        assert lines(pool.run(two)) == lines({e.id: case.reference[e.id] for e in two})
    with pytest.raises(SimulationError, match="closed"):
        pool.run(case.evaluations[:1])


def test_the_registry_is_bounded_and_close_all_leaves_no_process(cases: dict[str, Case]) -> None:
    close_all()
    made: list[WarmPool] = []

    def make(case: Case) -> WarmPool:
        made.append(case.pool(workers=1))
        return made[-1]

    try:
        a = pool_for("a", lambda: make(cases[SEQUENTIAL]), max_pools=2)
        a.run(cases[SEQUENTIAL].evaluations[:2])
        [pid_a] = a.pids()
        b = pool_for("b", lambda: make(cases[COMBINATIONAL]), max_pools=2)
        b.run(cases[COMBINATIONAL].evaluations[:2])
        assert pool_for("a", lambda: make(cases[SEQUENTIAL]), max_pools=2) is a  # no new pool
        assert list(pools()) == ["b", "a"]
        [pid_b] = b.pids()
        c = pool_for("c", lambda: make(cases[COMBINATIONAL]), max_pools=2)  # "b" is least recently used
        assert list(pools()) == ["a", "c"] and len(made) == 3
        assert gone(pid_b)  # retired: its process stopped once its work was done
        assert lines(b.run(cases[COMBINATIONAL].evaluations[:2]))  # a caller still holding it is served
        c.run(cases[COMBINATIONAL].evaluations[:2])
        pids = [pid_a, *c.pids()]
    finally:
        close_all()
    assert pools() == {}
    assert all(gone(pid) for pid in pids)
    assert all(p.closed for p in made)
    assert not procs._live  # every process hwtp started has ended


def test_pools_that_share_a_budget_run_no_more_processes_at_once_than_it_has(cases: dict[str, Case]) -> None:
    """The pools of one mutant set's builds share one budget: a pool whose share is taken starts
    no process and runs nothing until one is free, then gives batch scoring's results; an idle
    process keeps no share (the next call of another pool runs at once)."""
    seq = comb = cases[SEQUENTIAL]  # two pools of one build stand for two builds of one set
    budget = Budget(1)
    with seq.pool(workers=2, budget=budget) as first, comb.pool(workers=2, budget=budget) as second:
        assert lines(first.run(seq.evaluations)) == lines(seq.reference)
        assert budget.used == 0 and first.pids()  # its process stays warm, holding no share
        assert budget.acquire(1.0)  # another build's worker runs
        waiting = second.submit(comb.evaluations)
        time.sleep(1.0)
        assert not waiting.done() and second.stats()["processes"] == 0
        budget.release()
        assert lines(waiting.result(60)) == lines(comb.reference)
        futures = [first.submit(seq.evaluations), second.submit(comb.evaluations)]  # both at once
        most = 0
        while not all(f.done() for f in futures):
            most = max(most, budget.used)
            time.sleep(0.001)
        assert lines(futures[0].result()) == lines(seq.reference)
        assert lines(futures[1].result()) == lines(comb.reference)
        assert most <= 1 and budget.used == 0


def test_a_pool_closed_while_waiting_for_its_share_fails_its_call(cases: dict[str, Case]) -> None:
    case = cases[COMBINATIONAL]
    budget = Budget(1)
    assert budget.acquire(1.0)
    pool = case.pool(budget=budget)
    waiting = pool.submit(case.evaluations)
    time.sleep(0.3)
    pool.close()
    with pytest.raises(SimulationError, match="closed"):
        waiting.result(10)
    assert pool.stats()["processes"] == 0
    budget.release()


def test_a_shared_budget_is_one_per_set_and_forgotten_once_no_pool_holds_it() -> None:
    held = budget_for("set", 2)
    assert budget_for("set", 2) is held
    assert budget_for("set", 3) is not held and budget_for("other", 2) is not held
    gone_with = weakref.ref(held)
    del held
    gc.collect()
    assert gone_with() is None  # the registry does not keep a budget alive on its own


def _served(pool: WarmPool, evaluations: list[Evaluation], between: Any = None) -> dict[str, EvalResult]:
    """``pool.submit(evaluations)`` waited for as the reward path does: inside ``serving()``, a
    pump between two steps of Python work (``between()`` called at each)."""
    with serving() as pump:
        future = pool.submit(evaluations)
        while not future.done():
            pump()
            sum(range(2000))  # a plan's reading, holding the GIL
            if between is not None:
                between()
        return future.result()


def test_a_serving_caller_routes_the_results_itself_and_other_callers_get_theirs(
    cases: dict[str, Case], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = cases[SEQUENTIAL]
    evs = case.evaluations
    # a CPU for the serving thread beside both processes: the other callers' runs start the
    # second process while it serves (on 2 CPUs running_cap would defer it to the end)
    monkeypatch.setattr(warm, "usable_cpus", lambda: 3)
    with case.pool(workers=2) as pool:
        pool.run(evs[:4])  # a process started (a serving caller never starts one)
        served = pool.stats()["served"]
        others: dict[int, dict[str, EvalResult]] = {}
        threads = [threading.Thread(target=lambda k=k: others.update({k: pool.run(evs[k::3])})) for k in range(3)]
        for t in threads:
            t.start()
        for _ in range(3):
            assert lines(_served(pool, evs)) == lines(case.reference)
        for t in threads:
            t.join(120)
        for k in range(3):
            assert lines(others[k]) == lines({e.id: case.reference[e.id] for e in evs[k::3]})
        stats = pool.stats()
        assert stats["served"] > served  # the pump did route results (not only the threads)
        assert stats["queued"] == 0 and stats["busy"] == 0 and stats["processes"] == 2
        assert lines(pool.run(evs)) == lines(case.reference)  # the threads serve again afterwards


def test_a_pump_serves_the_pool_with_work_and_passes_the_idle_ones_by(
    cases: dict[str, Case], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a batch over many designs leaves most pools idle between two plans: the pump touches only
    # the workers with work in flight, unsent or queued, and still routes every result
    seq, comb = cases[SEQUENTIAL], cases[COMBINATIONAL]
    pumped: list[Any] = []
    real = warm._Worker.pump
    monkeypatch.setattr(warm._Worker, "pump", lambda self: (pumped.append(self.pool), real(self))[1])
    with seq.pool(workers=2) as busy, comb.pool(workers=1) as idle, comb.pool(workers=1) as other:
        busy.run(seq.evaluations[:4])  # processes started everywhere
        idle.run(comb.evaluations[:2])
        other.run(comb.evaluations[:2])
        served = busy.stats()["served"]
        pumped.clear()
        assert lines(_served(busy, seq.evaluations)) == lines(seq.reference)
        assert busy.stats()["served"] > served  # the pump routed results
        assert pumped and set(pumped) == {busy}  # never the pools with nothing to do
        assert lines(_served(idle, comb.evaluations)) == lines(comb.reference)  # and each in its turn
        assert idle in pumped and other not in pumped


def test_while_a_caller_serves_it_keeps_a_cpu_and_the_other_processes_start_when_it_stops(
    cases: dict[str, Case], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = cases[SEQUENTIAL]
    evs, reference = _with_slow(case)
    monkeypatch.setattr(warm, "usable_cpus", lambda: 2)
    assert warm.running_cap() is None  # nobody serves: no cap
    with case.pool(workers=2) as pool:
        pool.run(evs)  # both processes started and used (no cap outside serving)
        assert pool.stats()["processes"] == 2 and warm.running() == 0
        running: list[int] = []
        with serving() as pump:
            assert warm.running_cap() == 1  # 2 CPUs, one of them the serving thread's
            future = pool.submit(evs)
            while not future.done():
                pump()
                running.append(warm.running())
                sum(range(2000))  # a plan's reading, holding the GIL
        assert lines(future.result()) == lines(reference)
        assert max(running) == 1 and len(running) > 10  # one process at a time while it served
        # submitted while serving, waited for after: the second process starts when it stops
        seen: list[int] = []
        with serving() as pump:
            future = pool.submit(evs)
            pump()
        while not future.done():
            seen.append(warm.running())
            time.sleep(0.001)
        assert lines(future.result()) == lines(reference)
        assert max(seen) == 2
        assert pool.stats()["processes"] == 2 and pool.stats()["busy"] == 0 and warm.running() == 0


def test_a_pump_passes_by_the_worker_the_running_cap_leaves_out(
    cases: dict[str, Case], monkeypatch: pytest.MonkeyPatch
) -> None:
    # on 2 CPUs one process runs while a caller reads: the pump serves it, and does not take (and
    # give back) a budget share for the other one before each plan only to find it may not start
    case = cases[SEQUENTIAL]
    monkeypatch.setattr(warm, "usable_cpus", lambda: 2)
    left_out: list[Any] = []
    real = warm._Worker.pump

    def pump(self: Any) -> None:
        if not self.inflight and not self.out and not self.running and warm.running() >= (warm.running_cap() or 99):
            left_out.append(self)
        real(self)

    with case.pool(workers=2) as pool:
        pool.run(case.evaluations)  # both processes started (no cap outside serving)
        assert pool.stats()["processes"] == 2
        monkeypatch.setattr(warm._Worker, "pump", pump)
        served = pool.stats()["served"]
        assert lines(_served(pool, case.evaluations)) == lines(case.reference)
        assert pool.stats()["served"] > served  # the pump did serve the process that ran
        # (a worker thread may start the other process between the pump's look at the count
        # and this wrapper's: at most once in a call, where the pump before each plan made many)
        assert len(left_out) <= 1, f"{len(left_out)} pumps of a worker that could not start"


def test_the_running_cap_leaves_each_serving_thread_a_cpu_and_at_least_one_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(warm, "usable_cpus", lambda: 4)
    inside, entered, leave = [], threading.Event(), threading.Event()

    def serve_too() -> None:
        with serving():
            entered.set()
            leave.wait(30)

    with serving():
        inside.append(warm.running_cap())
        other = threading.Thread(target=serve_too)
        other.start()
        assert entered.wait(30)
        inside.append(warm.running_cap())
        leave.set()
        other.join(30)
        inside.append(warm.running_cap())
    assert inside == [3, 2, 3] and warm.running_cap() is None
    monkeypatch.setattr(warm, "usable_cpus", lambda: 1)
    with serving():
        assert warm.running_cap() == 1  # never none: the work must go on


def test_a_worker_killed_while_a_caller_serves_it_loses_and_duplicates_nothing(cases: dict[str, Case]) -> None:
    case = cases[SEQUENTIAL]
    evs, reference = _with_slow(case)
    with case.pool(workers=1) as pool:
        pool.run(case.evaluations[:1])
        [pid] = pool.pids()
        base = pool.stats()["evaluations"]
        killed: list[int] = []

        def kill_once() -> None:
            if not killed and pool.stats()["evaluations"] >= base + len(case.evaluations) + 3:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

        got = _served(pool, evs, kill_once)
        assert killed
        _one_death_blamed(got, evs, reference)
        assert pool.stats()["evaluations"] - base == len(evs) - 1  # nothing run twice
        assert pool.stats()["processes"] == 2 and pool.pids() != [pid]


def test_a_hang_while_a_caller_serves_is_a_timeout_and_the_rest_is_run(cases: dict[str, Case]) -> None:
    case = cases[SEQUENTIAL]
    before, after = case.evaluations[:3], case.evaluations[3:6]
    with case.pool(workers=1, limits=Limits(wall_s=1.0)) as pool:
        pool.run(before)
        got = _served(pool, [*before, _hung(case), *after])
        hung = got.pop("hung")
        assert (hung.status, hung.fault, hung.reason) == ("timeout", "hang", "evaluation exceeded 1 s")
        assert lines(got) == lines({e.id: case.reference[e.id] for e in (*before, *after)})
        assert pool.stats()["processes"] == 2


def test_a_serving_caller_that_stops_pumping_holds_up_no_one(cases: dict[str, Case]) -> None:
    # inside serving() but busy elsewhere (a build on first use): past the lease the threads
    # serve their processes again, so another caller's evaluations finish meanwhile
    case = cases[COMBINATIONAL]
    with case.pool(workers=1) as pool:
        pool.run(case.evaluations[:1])
        box: dict[str, Any] = {}
        with serving() as pump:
            pump()
            other = threading.Thread(target=lambda: box.update(got=pool.run(case.evaluations)))
            other.start()
            other.join(120)  # no pump at all while it runs
            assert not other.is_alive()
        assert lines(box["got"]) == lines(case.reference)


def test_a_serving_caller_submitting_chunk_after_chunk_under_a_budget_of_one_never_stalls(
    cases: dict[str, Case],
) -> None:
    # the reward path's rhythm (read a chunk, submit it, pump while reading the next) with one
    # process allowed across two pools: the pump hands work to threads that are waiting for it
    # and routes their results, and every chunk of both pools still finishes
    seq, comb = cases[SEQUENTIAL], cases[COMBINATIONAL]
    budget = Budget(1)
    with seq.pool(workers=1, budget=budget) as first, comb.pool(workers=1, budget=budget) as second:
        first.run(seq.evaluations[:1])
        second.run(comb.evaluations[:1])
        for round_ in range(20):
            futures = []
            with serving() as pump:
                for k in range(6):
                    case, pool = (seq, first) if (round_ + k) % 2 else (comb, second)
                    chunk = case.evaluations[k % 3 :: 3][:2]
                    futures.append((case, chunk, pool.submit(chunk)))
                    for _ in range(k * 7 % 5):
                        pump()
                        sum(range(3000))  # reading a plan, holding the GIL
            for case, chunk, future in futures:
                assert lines(future.result(60)) == lines({e.id: case.reference[e.id] for e in chunk}), round_
        assert budget.used == 0


def live(pools_: list[WarmPool]) -> int:
    """Simulator processes alive in ``pools_``."""
    return sum(len(p.pids()) for p in pools_)


def test_a_call_over_more_sets_than_the_old_eight_pool_bound_restarts_no_simulator(cases: dict[str, Case]) -> None:
    # a batch of many designs (or a set of many schemata parts) touches a pool each: calling it
    # again must find every pool warm, not retire the least recently used ones and restart them
    case = cases[SEQUENTIAL]
    base = schemata_targets(case.mutant_set)
    sets = [dataclasses.replace(base, key=f"many-{i}") for i in range(12)]
    close_all()
    executor = WarmExecutor(workers=1)
    try:
        for schemata in sets:
            assert lines(executor.run(schemata, case.evaluations, Limits())) == lines(case.reference)
        first = dict(pools())
        started = sum(p.stats()["processes"] for p in first.values())
        assert len(first) == 12 and started == 12
        for schemata in reversed(sets):
            assert lines(executor.run(schemata, case.evaluations, Limits())) == lines(case.reference)
        again = pools()
        assert all(again[k] is first[k] for k in first)  # the same pools, none retired
        assert sum(p.stats()["processes"] for p in again.values()) == started  # and no simulator restarted
    finally:
        executor.close()
        close_all()


def test_the_registry_keeps_many_pools_by_default(cases: dict[str, Case]) -> None:
    close_all()
    try:
        made = [pool_for(f"p{i}", lambda: cases[COMBINATIONAL].pool(workers=1)) for i in range(40)]
        assert list(pools()) == [f"p{i}" for i in range(40)]
        assert not any(p.closed for p in made)
    finally:
        close_all()


def test_processes_past_the_cap_stop_the_idlest_elsewhere(cases: dict[str, Case], monkeypatch: Any) -> None:
    # five pools, three processes allowed in all: starting one stops the process that was handed
    # work least recently (in another pool), never a busy one, and every result stays right
    monkeypatch.setenv("HWTP_WARM_PROCESSES", "3")
    case = cases[SEQUENTIAL]
    made = [case.pool(workers=1) for _ in range(5)]
    try:
        pids = []
        for n, pool in enumerate(made):
            assert lines(pool.run(case.evaluations)) == lines(case.reference)
            pids.append(pool.pids()[0])
            assert wait_for(lambda: live(made) <= 3), live(made)
            assert pool.pids() == [pids[n]]  # the one that just worked stays
        assert gone(pids[0]) and gone(pids[1])  # the least recently used stopped
        assert [len(p.pids()) for p in made] == [0, 0, 1, 1, 1]
        four = case.evaluations[:4]
        assert lines(made[0].run(four)) == lines({e.id: case.reference[e.id] for e in four})
        assert wait_for(lambda: live(made) <= 3)
        assert gone(pids[2])  # now the idlest
        assert [len(p.pids()) for p in made] == [1, 0, 0, 1, 1]
        # many callers at once in every pool: all five may run (busy processes never stop), all right
        threads = [threading.Thread(target=lambda p=p: results.append(lines(p.run(case.evaluations)))) for p in made]
        results: list[list[dict[str, Any]]] = []
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert results == [lines(case.reference)] * 5
        assert wait_for(lambda: live(made) <= 3)
    finally:
        for pool in made:
            pool.close()


def test_a_bad_process_cap_is_a_config_error_naming_the_variable(cases: dict[str, Case], monkeypatch: Any) -> None:
    for bad in ("0", "-2", "many", "1.5"):
        monkeypatch.setenv("HWTP_WARM_PROCESSES", bad)
        with pytest.raises(ConfigError, match=rf"HWTP_WARM_PROCESSES='{re.escape(bad)}': expected a whole number"):
            cases[COMBINATIONAL].pool()


def wait_for(condition: Any, within: float = 60.0) -> bool:
    """Whether ``condition()`` holds within ``within`` seconds (wide: a busy machine is slow)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())
