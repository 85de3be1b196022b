"""``hwtp run``'s scoring stage on the in-memory executor: every result stored as it arrives,
and a run killed midway resumes with only the missing evaluations (no Verilator: a Python
model of a tiny design, tests/memory_model.py)."""

from __future__ import annotations

from pathlib import Path

import memory_model as model
import pytest

from hwtp.errors import SimulationError
from hwtp.mutators.mutantset import GOLDEN, MutantSet
from hwtp.plans.files import Generated, PlanRecord
from hwtp.run.config import RunConfig
from hwtp.run.loop import score_stage
from hwtp.run.store import DesignRow, PlanRow, StateRow, Store, open_store
from hwtp.sim.executors.memory import MemoryExecutor
from hwtp.sim.job import Evaluation, Limits
from hwtp.sim.runner import EvalResult

PLANS = {GOLDEN: model.plan((1, 1, 2)), "m0001": model.plan((0, 0, 0)), "m0002": model.plan((1, 1, 2))}


def _fill(store: Store, mutant_set: MutantSet) -> None:
    name = mutant_set.design.name
    states = [StateRow(GOLDEN, 0), *(StateRow(m.id, m.index) for m in mutant_set.states)]
    store.put_design(DesignRow(name, "", mutant_set.design.content_hash, "m", mutant_set.set_hash), states)
    rows = []
    for state, text in PLANS.items():
        plan = f"{state}-s00"
        record = PlanRecord(plan, state, 0, "test", {}, [], Generated(0, text), None, name, mutant_set.set_hash)
        rows.append(PlanRow(name, state, 0, plan, record))
    store.put_plans(rows)


class _Killed(MemoryExecutor):
    """The model, until ``left`` evaluations have run: then the run dies (a killed process)."""

    def __init__(self, left: int) -> None:
        super().__init__(self._once)
        self.left = left

    def _once(self, ev: Evaluation, limits: Limits) -> EvalResult:
        if self.left == 0:
            raise SimulationError("killed")
        self.left -= 1
        return model.evaluate(ev, limits)


def test_a_killed_score_stage_resumes_with_only_the_missing_evaluations(tmp_path: Path) -> None:
    mutant_set = model.mutant_set(tmp_path)
    name = mutant_set.design.name
    config = RunConfig(jobs=1)
    with open_store(tmp_path / "whole") as whole:
        _fill(whole, mutant_set)
        full = MemoryExecutor(model.evaluate)
        score_stage(whole, mutant_set, config, lambda *_a, **_k: None, full)
        expected = sorted(whole.samples(name), key=lambda s: (s.plan, s.state))
    assert len(full.ran) == 3 + 2  # each plan on golden, and the two mutant-state plans on their state
    with open_store(tmp_path / "resumed") as store:
        _fill(store, mutant_set)
        with pytest.raises(SimulationError):
            score_stage(store, mutant_set, config, lambda *_a, **_k: None, _Killed(2))
        kept = set(store.evaluations(name))
        assert len(kept) == 2 and not store.stage_done(name, "score") and not store.samples(name)
        rest = MemoryExecutor(model.evaluate)
        score_stage(store, mutant_set, config, lambda *_a, **_k: None, rest)
        assert sorted(rest.ran) == sorted(set(full.ran) - kept)  # only the missing ones ran
        assert sorted(store.samples(name), key=lambda s: (s.plan, s.state)) == expected
    assert {(s.state, s.outcome.value) for s in expected} == {
        (GOLDEN, "passed"),
        ("m0001", "passed"),
        ("m0002", "detected"),
    }
