"""The limits every executor honours beyond one evaluation's (:class:`hwtp.sim.job.Limits`
``total_s`` and ``drop_hung``), on the in-memory executor: the contract the witness search
relies on, without a simulator (tests/test_faults.py and tests/test_ray.py check the real ones)."""

from __future__ import annotations

from pathlib import Path

import memory_model as model

from hwtp.plans.format import parse_plan
from hwtp.sim.executors.base import schemata_targets
from hwtp.sim.executors.memory import MemoryExecutor
from hwtp.sim.job import Evaluation, Limits, compile_plan


def _evaluations(tmp_path: Path) -> tuple[object, list[Evaluation]]:
    mutant_set = model.mutant_set(tmp_path)
    ops = compile_plan(parse_plan(model.waiting_plan(model.HANG_CYCLES)), mutant_set.design)
    evs = [
        Evaluation("g", ops),
        Evaluation("h1", ops, model.HANGS),
        Evaluation("k", ops, 1),
        Evaluation("h2", ops, model.HANGS),
        Evaluation("h3", ops, model.HANGS),
    ]
    return schemata_targets(mutant_set), evs


def test_a_state_that_hung_is_not_run_again_with_drop_hung(tmp_path: Path) -> None:
    schemata, evs = _evaluations(tmp_path)
    executor = MemoryExecutor(model.evaluate)
    got = executor.run(schemata, evs, Limits(drop_hung=True))  # type: ignore[arg-type]
    assert executor.ran == ["g", "h1", "k"]
    assert [(got[e.id].status, got[e.id].fault) for e in evs] == [
        ("pass", None), ("timeout", "hang"), ("fail", None), ("timeout", "hang"), ("timeout", "hang")
    ]
    assert got["h2"].reason == f"{got['h1'].reason} (an earlier evaluation)"


def test_without_drop_hung_every_evaluation_runs(tmp_path: Path) -> None:
    schemata, evs = _evaluations(tmp_path)
    executor = MemoryExecutor(model.evaluate)
    executor.run(schemata, evs, Limits())  # type: ignore[arg-type]
    assert executor.ran == [e.id for e in evs]


def test_past_the_total_budget_nothing_runs_and_each_result_says_so(tmp_path: Path) -> None:
    schemata, evs = _evaluations(tmp_path)
    executor = MemoryExecutor(model.evaluate)
    seen: list[str] = []
    got = executor.run(schemata, evs, Limits(total_s=0.0), on_result=lambda r: seen.append(r.id))  # type: ignore[arg-type]
    assert executor.ran == [] and sorted(seen) == sorted(e.id for e in evs)
    assert {(r.status, r.fault, r.reason) for r in got.values()} == {
        ("timeout", "budget", "not run: the time budget was spent")
    }


def test_a_pool_honours_per_evaluation_limits_only() -> None:
    assert Limits().pooled and Limits(wall_s=2.0).pooled
    assert not Limits(total_s=5.0).pooled and not Limits(drop_hung=True).pooled
    assert Limits(wall_s=2.0).key != Limits().key  # pools made for other limits are other pools
