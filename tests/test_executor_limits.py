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


def test_the_offline_policy_simulates_golden_on_the_executor_it_is_given(tmp_path: Path) -> None:
    from hwtp.plans.format import extract_plan
    from hwtp.policy.policies import PlanRequest, PolicySpec, make_policy

    mutant_set = model.mutant_set(tmp_path)
    executor = MemoryExecutor(model.evaluate)
    generated = make_policy(PolicySpec("random", seed=1), mutant_set, executor).generate([PlanRequest("golden", [])], 2)
    assert len(executor.ran) == 2  # one golden evaluation per sample, none elsewhere
    assert all(g.error is None for g in generated[0])
    # the expectations are golden's outputs, so the plan passes on the model's golden
    plan = extract_plan(generated[0][0].text or "", source="random")
    ops = compile_plan(plan, mutant_set.design)
    assert model.evaluate(Evaluation("check", ops), Limits()).status == "pass"


def test_the_witness_search_runs_on_any_executor(tmp_path: Path) -> None:
    """On the in-memory executor: a witness for each mutant golden's outputs tell apart, none
    for the equivalent one (b + a); with no time budget, nothing searched."""
    from hwtp.mutators.stimulus import StimulusConfig
    from hwtp.mutators.witness import WitnessConfig, find_witnesses

    mutant_set = model.mutant_set(tmp_path)
    executor = MemoryExecutor(model.evaluate)
    targets = [(m.id, m.index) for m in mutant_set.valid]
    config = WitnessConfig(cycles=400, stimulus=StimulusConfig(tests=2, cycles=8))
    search = find_witnesses(schemata_targets(mutant_set), targets, config, executor)
    assert set(search.witnesses) == {"m0001", "m0002", "m0003"} and not search.hung
    for mid, plan in search.witnesses.items():  # each witness passes on golden and fails on its mutant
        ops = compile_plan(plan, mutant_set.design)
        index = next(m.index for m in mutant_set.valid if m.id == mid)
        assert model.evaluate(Evaluation("g", ops), Limits()).status == "pass"
        assert model.evaluate(Evaluation("m", ops, index), Limits()).status == "fail"
    spent = find_witnesses(schemata_targets(mutant_set), targets, WitnessConfig(total_s=0.0), executor)
    assert not spent.witnesses and spent.unsearched == len(targets)
