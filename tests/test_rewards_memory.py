"""The reward scorer on the in-memory executor: grouping, dedup, indeterminate rewards and
multi-design batches without Verilator (a Python model of a tiny design: tests/memory_model.py)."""

from __future__ import annotations

from pathlib import Path

import memory_model as model
import pytest

from hwtp.errors import RewardError
from hwtp.mutators.mutantset import GOLDEN, MutantSet
from hwtp.plans.files import PlanInput
from hwtp.plans.format import parse_plan
from hwtp.rewards import Scorer, Settings
from hwtp.scoring.score import ScoreConfig, score
from hwtp.sim.executors.memory import MemoryExecutor


def _truth(mutant_set: MutantSet, state: str) -> dict[str, str]:
    return {"design": mutant_set.design.name, "state": state, "mutant_set": mutant_set.set_hash}


def _scorer(*sets: MutantSet) -> tuple[Scorer, MemoryExecutor]:
    executor = MemoryExecutor(model.evaluate)
    return Scorer(Settings(workers=1), executor, sets), executor


def test_rewards_are_score_rewards(tmp_path: Path) -> None:
    """A completion's reward is the one ``hwtp score`` gives its plan on that state."""
    mutant_set = model.mutant_set(tmp_path)
    texts = [model.plan((1, 1, 2)), model.plan((0, 0, 0)), model.plan((2, 1, 3))]
    states = [GOLDEN, "m0001", "m0002", "m0004"]
    scorer, _ = _scorer(mutant_set)
    got = scorer.score_completions([(_truth(mutant_set, s), t) for t in texts for s in states])
    plans = [PlanInput(f"p{i}", parse_plan(t), None, None) for i, t in enumerate(texts)]
    scores = score(mutant_set, plans, ScoreConfig(), executor=MemoryExecutor(model.evaluate))
    want = {(r.plan, r.state): r for r in scores.results}
    for k, r in enumerate(got):
        sample = want[(f"p{k // len(states)}", states[k % len(states)])]
        assert (r.reward, r.outcome, r.ceiling, r.state) == (
            sample.reward,
            sample.outcome.value,
            sample.ceiling,
            sample.state,
        )
    assert [r.reward for r in got[:4]] == [1.0, 2.0, 2.0, 1.0]  # 1+1=2: passes golden, kills a-b and a|b


def test_identical_completions_simulate_once(tmp_path: Path) -> None:
    """Four completions of one plan on one state (two differing only in prose around it): one
    golden run and one run on the state; every completion gets the reward."""
    mutant_set = model.mutant_set(tmp_path)
    scorer, executor = _scorer(mutant_set)
    text = model.plan((1, 1, 2))
    items = [(_truth(mutant_set, "m0001"), t) for t in (text, text, f"Here is my plan:\n{text}", text)]
    got = scorer.score_completions(items)
    assert [r.reward for r in got] == [2.0] * 4
    assert len(executor.ran) == 2 and sorted(e.rpartition("@")[2] for e in executor.ran) == [GOLDEN, "m0001"]


def test_a_timeout_gives_no_reward(tmp_path: Path) -> None:
    """m0003 hangs on a long wait: reward None (indeterminate), never a number; the same plan
    on m0001 earns the detect level."""
    mutant_set = model.mutant_set(tmp_path)
    scorer, _ = _scorer(mutant_set)
    text = model.waiting_plan(model.HANG_CYCLES)
    hung, killed = scorer.score_completions([(_truth(mutant_set, "m0003"), text), (_truth(mutant_set, "m0001"), text)])
    assert hung.reward is None and hung.indeterminate and hung.outcome == "timeout" and hung.detail["indeterminate"]
    assert killed.reward == 2.0 and not killed.indeterminate


def test_a_batch_of_two_designs_keeps_its_order(tmp_path: Path) -> None:
    """Items of two designs interleaved: grouped per mutant set for the work, answered in the
    items' order, each with its own design's verdict."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one, two = model.mutant_set(tmp_path / "a", "add_one"), model.mutant_set(tmp_path / "b", "add_two")
    scorer, executor = _scorer(one, two)
    strong, wrong = model.plan((1, 1, 2)), model.plan((1, 1, 3))
    items = [
        (_truth(one, "m0002"), strong),
        (_truth(two, GOLDEN), wrong),
        (_truth(two, "m0002"), strong),
        (_truth(one, GOLDEN), strong),
    ]
    got = scorer.score_completions(items)
    assert [(r.design, r.state, r.outcome) for r in got] == [
        ("add_one", "m0002", "detected"),
        ("add_two", GOLDEN, "golden_fail"),
        ("add_two", "m0002", "detected"),
        ("add_one", GOLDEN, "passed"),
    ]
    assert len(executor.ran) == 5  # add_one: the plan on golden and m0002; add_two: both plans on golden, one on m0002


def test_an_invalid_completion_costs_only_its_own_reward(tmp_path: Path) -> None:
    mutant_set = model.mutant_set(tmp_path)
    scorer, executor = _scorer(mutant_set)
    bad, good = scorer.score_completions(
        [(_truth(mutant_set, "m0001"), "no plan here"), (_truth(mutant_set, "m0001"), model.plan((1, 1, 2)))]
    )
    assert (bad.outcome, bad.reward) == ("invalid", 0.0) and bad.detail.get("reason")
    assert good.reward == 2.0
    assert len(executor.ran) == 2  # the invalid one simulated nothing


def test_a_scorer_knows_only_the_sets_it_holds(tmp_path: Path) -> None:
    """Given its mutant sets, a scorer reads nothing from disk: another hash is refused by name."""
    mutant_set = model.mutant_set(tmp_path)
    scorer, executor = _scorer(mutant_set)
    truth = {**_truth(mutant_set, GOLDEN), "mutant_set": "0" * 64}
    with pytest.raises(RewardError, match="mutant set 000000000000 of design 'add4'"):
        scorer.score_completions([(truth, model.plan((1, 1, 2)))])
    assert executor.ran == []
    with pytest.raises(RewardError, match="not a state"):
        scorer.score_completions([(_truth(mutant_set, "m0099"), model.plan((1, 1, 2)))])
