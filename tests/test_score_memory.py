"""``hwtp.scoring.score`` on the in-memory executor: the scoring logic without Verilator, against a
Python model of a tiny design (tests/memory_model.py)."""

from __future__ import annotations

from pathlib import Path

import memory_model as model
import pytest

from hwtp.errors import MutantError
from hwtp.mutators.mutantset import GOLDEN
from hwtp.plans.files import PlanInput
from hwtp.plans.format import parse_plan
from hwtp.scoring.scheme import RewardScheme
from hwtp.scoring.score import Outcome, ScoreConfig, score
from hwtp.sim.executors.base import schemata_targets
from hwtp.sim.executors.memory import MemoryExecutor
from hwtp.sim.job import Evaluation, Limits

STATES = (GOLDEN, "m0001", "m0002", "m0003", "m0004")


def _inputs(**plans: str) -> list[PlanInput]:
    return [PlanInput(k, parse_plan(v), None, None) for k, v in plans.items()]


def test_outcomes_follow_the_model(tmp_path: Path) -> None:
    """A plan checking 1+1=2 tells golden from a-b, a|b and a^b but not from b+a (equivalent:
    its ceiling is the pass level); 0+0=0 tells none apart; a wrong expectation fails golden."""
    mutant_set = model.mutant_set(tmp_path)
    executor = MemoryExecutor(model.evaluate)
    plans = _inputs(strong=model.plan((1, 1, 2)), weak=model.plan((0, 0, 0)), wrong=model.plan((1, 1, 3)))
    scores = score(mutant_set, plans, ScoreConfig(), executor=executor)
    got = {(r.plan, r.state): (r.outcome, r.reward, r.ceiling) for r in scores.results}
    assert got[("strong", GOLDEN)] == (Outcome.PASSED, 1.0, 1.0)
    for state in ("m0001", "m0002", "m0003"):
        assert got[("strong", state)] == (Outcome.DETECTED, 2.0, 2.0)
        assert got[("weak", state)] == (Outcome.PASSED, 1.0, 2.0)
    assert got[("strong", "m0004")] == (Outcome.PASSED, 1.0, 1.0)
    assert {got[("wrong", s)][:2] for s in STATES} == {(Outcome.GOLDEN_FAIL, 0.0)}
    assert scores.golden_pass_rate == pytest.approx(2 / 3)
    assert scores.mutant_set == mutant_set.set_hash
    assert (scores.build_seconds, scores.build_cached) == (0.0, True)  # the executor's report: it built nothing


def test_each_evaluation_runs_once_and_golden_is_shared(tmp_path: Path) -> None:
    """Two plans on five states: each plan's golden run serves all its samples."""
    mutant_set = model.mutant_set(tmp_path)
    executor = MemoryExecutor(model.evaluate)
    ticks: list[int] = []
    scores = score(
        mutant_set,
        _inputs(a=model.plan((1, 1, 2)), b=model.plan((2, 3, 5))),
        ScoreConfig(),
        progress=ticks.append,
        executor=executor,
    )
    assert sorted(executor.ran) == sorted(f"{p}@{s}" for p in "ab" for s in STATES)
    assert scores.evaluations == len(executor.ran) == sum(ticks) == 10


def test_a_timeout_is_indeterminate_never_a_kill(tmp_path: Path) -> None:
    """m0003 hangs on a long wait: that sample is a timeout (the pass level, not the detect
    level), while the same plan still detects m0001."""
    mutant_set = model.mutant_set(tmp_path)
    scores = score(
        mutant_set,
        _inputs(w=model.waiting_plan(model.HANG_CYCLES)),
        ScoreConfig(),
        executor=MemoryExecutor(model.evaluate),
    )
    got = {r.state: r for r in scores.results}
    assert got["m0003"].outcome == Outcome.TIMEOUT and got["m0003"].reward == 1.0
    assert got["m0001"].outcome == Outcome.DETECTED


def test_a_dense_scheme_counts_the_share_killed(tmp_path: Path) -> None:
    """kill-fraction: 2+1=3 is seen by a-b (1) only, a|b and a^b give 3 too: one kill of the
    three killable mutants (b+a is equivalent, not counted), on every state alike."""
    mutant_set = model.mutant_set(tmp_path)
    config = ScoreConfig(scheme=RewardScheme("kill-fraction"))
    scores = score(mutant_set, _inputs(p=model.plan((2, 1, 3))), config, executor=MemoryExecutor(model.evaluate))
    assert {r.outcome for r in scores.results if r.state != "m0001"} == {Outcome.PASSED}
    for r in scores.results:
        assert r.detail is not None and r.detail["kills"] == {"killed": 1, "of": 3}
        assert r.reward == pytest.approx(1.0 + 1 / 3) and r.ceiling == 2.0


def test_the_memory_executor_keeps_the_protocol(tmp_path: Path) -> None:
    """Results through on_result once per id (a repeated id runs once), futures from submit,
    and a selector value the schemata lacks refused as a real executor refuses it."""
    schemata = schemata_targets(model.mutant_set(tmp_path))
    executor = MemoryExecutor(model.evaluate)
    ops = ({"name": "t", "ops": [["d", [["a", 1], ["b", 1]]], ["e", [["y", 2, 31, 2]]]]},)
    evaluations = [Evaluation("g", ops, 0), Evaluation("g", ops, 0), Evaluation("m", ops, 2)]
    seen: list[str] = []
    results = executor.run(schemata, evaluations, Limits(), on_result=lambda r: seen.append(r.id))
    assert seen == ["g", "m"] and results["g"].status == "pass" and results["m"].status == "fail"
    assert executor.submit(schemata, evaluations[:1], Limits()).result()["g"].status == "pass"
    with pytest.raises(MutantError, match="selector value 9"):
        executor.submit(schemata, [Evaluation("x", ops, 9)], Limits()).result()
