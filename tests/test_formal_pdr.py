"""The formal classifier's unbounded stage (ABC pdr) and its batch model, on debouncer."""

from __future__ import annotations

import pytest

from hwtp.mutators import engine
from hwtp.mutators.formal import yosys
from hwtp.mutators.mutantset import MutantClass
from hwtp.rtl.design import load_design

exe = yosys.find()
needs_abc = pytest.mark.skipif(exe is None or yosys.find_abc(exe) is None, reason="Yosys with ABC is not installed")


@pytest.mark.sim
@needs_abc
def test_pdr_proves_a_reset_mutant_and_a_blocking_swap_does_not_hide_a_real_difference() -> None:
    design = load_design("debouncer")
    # lines 35..47: the reset of cnt (deleting it, or resetting to 7, changes no output: cnt is
    # cleared on the first cycle after reset), blocking swaps of the same block, and the
    # accept branch's `cnt <= 3'd0` (deleting it is observable: simulation tells it apart)
    config = engine.MutationConfig(
        n=None, seed=0, jobs=1, witness_cycles=0, lines=(35, 47), formal="all", formal_timeout=10, prefer_killable=False
    )
    result = engine.mutate(design, config)
    by_site = {(m.line, m.operator): m for m in result.valid}
    reset_to_seven = by_site[(35, "constant.ones")]
    assert reset_to_seven.klass == MutantClass.EQUIVALENT and reset_to_seven.proof
    assert reset_to_seven.proof["method"] in ("pdr", "k-induction")
    assert any(m.proof and m.proof.get("method") == "pdr" for m in result.valid)
    assert any(m.sites[0].operator == "assignment.nonblocking_to_blocking" for m in result.valid)
    accept = by_site[(47, "assignment.delete")]
    assert accept.klass == MutantClass.KILLABLE, accept.proof
