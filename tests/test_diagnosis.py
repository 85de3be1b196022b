"""Why survivors survive: activation probes, the output comparison with golden, the diagnosis.

The simulator tests reuse test_ci's project (counter_en_load, 12 mutants, seed 4: one probed
schemata build for every testbench here) with two testbenches: test_ci's weak one, which only
counts up and checks q (the count-down mutants are never activated: weak stimulus; tc is never
checked: weak checking), and one that exercises every input and checks nothing (weak checking).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hwtp.ci.mutation import MutantResult, Status
from hwtp.ci.reports import junit, markdown
from hwtp.errors import ConfigError
from hwtp.mutators.probes import plan
from hwtp.mutators.schemata import SELECTOR, render
from hwtp.mutators.sites import find_sites
from hwtp.rtl.design import SourceFile
from hwtp.rtl.frontend import module_body_offsets
from hwtp.scoring.reach import Diagnosis, Observation, Reached, explain, summarize
from hwtp.sim.backends import NO_OPTIONS, get_backend
from hwtp.sim.outputs import Compare

from .test_ci import MUTANTS, Run_, _fake_report, _project, check_junit

MODULE = """module t(input clk, input [3:0] a, input [3:0] b, output [3:0] y, output reg [3:0] q, output reg r);
  function [3:0] inc(input [3:0] x); inc = x + 4'd1; endfunction
  assign y = a + b;
  always @(posedge clk) begin
    if (a < b) q <= a - b;
    else q <= inc(a);
    r <= a[0] ^ $random;
  end
endmodule
"""


def _probed(text: str) -> tuple[list[tuple[int, Any]], Any, str]:
    pairs = list(enumerate(find_sites(text, "t.v"), start=1))
    bodies = module_body_offsets(text, "t.v")
    found = plan(text, "t.v", pairs, bodies, SELECTOR)
    return pairs, found, render(text, pairs, bodies, found)


def test_probes_cover_expressions_and_statements_and_say_what_they_leave_out() -> None:
    pairs, found, probed = _probed(MODULE)
    kinds = {}
    for index, site in pairs:
        kinds.setdefault(
            (site.operator, MODULE.encode()[site.guard_start : site.guard_end].decode()), found.coverage[index]
        )
    assert kinds[("arithmetic.add_to_sub", "a + b")].kind == "value"  # a continuous assignment: a wire
    assert kinds[("relational.lt_to_le", "a < b")].kind == "value"  # an if condition: before the if
    assert kinds[("arithmetic.sub_to_add", "a - b")].kind == "value"
    assert kinds[("assignment.delete", "q <= a - b;")].kind == "reached"
    inside = kinds[("arithmetic.add_to_sub", "x + 4'd1")]
    assert inside.kind == "none" and "function" in (inside.why or "")
    random = kinds[("bitwise.xor_to_and", "a[0] ^ $random")]
    assert random.kind == "none" and "$random" in (random.why or "")
    edge = kinds[("edge.pos_to_neg", "posedge clk")]
    assert edge.kind == "none" and "edge" in (edge.why or "")
    plain = render(MODULE, pairs, module_body_offsets(MODULE, "t.v"))
    assert "hwtp_act_" not in plain and plain == render(MODULE, pairs, module_body_offsets(MODULE, "t.v"), None)
    add = next(i for i, s in pairs if s.operator == "arithmetic.add_to_sub" and s.line == 3)
    assert re.search(
        rf"wire hwtp_act_{add}_c\d+ /\*verilator public_flat_rw\*/ = \({SELECTOR} == 32'd{add}\) && "
        rf"\(\(\(a - b\) \+ \$signed\(\(y\) & 1'b0\)\) !== \(\(a \+ b\) \+ ",
        probed,
    )
    lt = next(i for i, s in pairs if s.operator == "relational.lt_to_le")
    assert (
        f"if (({SELECTOR} == 32'd{lt}) && (((|(a <= b)) === 1'b1) !== ((|(a < b)) === 1'b1))) "
        f"hwtp_act_{lt} = $time;" in probed
    )
    assert f"reg [63:0] hwtp_act_{lt} /*verilator public_flat_rw*/;" in probed
    # the probed schemata is legal Verilog for the simulator (lint only: no build)
    assert get_backend("verilator").lint([SourceFile("t.v", probed)], "t", NO_OPTIONS) is None


def _compare(
    golden: list[tuple[int, str, str]],
    start: dict[str, str],
    end: int,
    changes: list[tuple[int, str, str]],
    mutant_end: int,
    cut: bool = False,
) -> Compare:
    record = Compare(None, {"q": "0", "tc": "1"})
    for t, name, value in golden:
        record.change(t, name, value)
    record.end(end)
    compare = Compare({"changes": record.changes, "end": end, "cut": cut}, start)
    for t, name, value in changes:
        compare.change(t, name, value)
    compare.end(mutant_end)
    return compare


def test_outputs_compare_per_time_step_with_golden() -> None:
    golden = [(0, "tc", "0"), (0, "tc", "1"), (10, "q", "1"), (20, "q", "2"), (20, "tc", "0")]
    same = _compare(golden, {"q": "0", "tc": "1"}, 30, [(10, "q", "1"), (20, "tc", "0"), (20, "q", "2")], 30)
    assert same.propagated is False  # start values settle with step 0; order within a step does not matter
    glitch = _compare(
        golden,
        {"q": "0", "tc": "1"},
        30,
        [(10, "q", "1"), (15, "tc", "0"), (15, "tc", "1"), (20, "q", "2"), (20, "tc", "0")],
        30,
    )
    assert glitch.propagated is False  # back to the old value within the step: no change
    late = _compare(golden, {"q": "0", "tc": "1"}, 30, [(10, "q", "1"), (25, "q", "2")], 30)
    assert late.propagated and late.first == (20, "q")
    extra = _compare(golden, {"q": "0", "tc": "1"}, 30, [(5, "tc", "0"), (10, "q", "1")], 30)
    assert extra.first == (5, "tc")
    start = _compare(golden, {"q": "1", "tc": "1"}, 30, [(10, "q", "2")], 30)
    assert start.first == (0, "q")
    missing = _compare(golden, {"q": "0", "tc": "1"}, 30, [(10, "q", "1")], 30)
    assert missing.first == (20, "q")  # golden changed q and tc at 20; this run did not
    shorter = _compare(golden, {"q": "0", "tc": "1"}, 30, [(10, "q", "1")], 15)
    assert shorter.propagated is False  # compared over the time both ran
    cut = _compare(golden, {"q": "0", "tc": "1"}, 30, [(10, "q", "1"), (20, "q", "2"), (20, "tc", "0")], 40, cut=True)
    assert cut.propagated is None  # golden's record was cut: nothing known after it


def test_diagnosis_of_a_survivor_from_its_tests() -> None:
    def obs(test: str, activated: bool | None, propagated: bool | None, ns: float | None = None) -> Observation:
        return Observation(test, activated, 5.0 if activated else None, propagated, ns, "q" if propagated else None)

    never = summarize([obs("t.a", False, False), obs("t.b", False, False)], False)
    assert never.diagnosis == Diagnosis.WEAK_STIMULUS and never.reached == Reached.NONE
    hidden = summarize([obs("t.a", False, False), obs("t.b", True, False)], False)
    assert hidden.diagnosis == Diagnosis.NOT_PROPAGATED and hidden.first_activation.test == "t.b"
    unchecked = summarize([obs("t.a", True, False), obs("t.b", None, True, 35.0)], False)
    assert unchecked.diagnosis == Diagnosis.WEAK_CHECKING and unchecked.activated  # an output differed
    assert "output q first differed from golden at 35 ns of t.b" in explain(unchecked, "value")
    unknown = summarize([obs("t.a", None, False)], False)
    assert unknown.diagnosis == Diagnosis.UNKNOWN
    assert explain(unknown, "none", "edge mutants are not probed") == "unknown: edge mutants are not probed"
    assert (
        explain(summarize([obs("t.a", False, False)], False), "reached") == "weak stimulus: no test ran its statement"
    )
    assert summarize([obs("t.a", True, True, 1.0)], True).reached == Reached.DETECTED


def test_reports_carry_the_diagnosis_and_round_trip(tmp_path: Path) -> None:
    report = _fake_report(tmp_path)
    seen = (Observation("test_top.t", True, 5.0, True, 12.5, "y"),)
    survivor = next(m for m in report.mutants if m.status == Status.SURVIVED)
    from dataclasses import replace

    report = replace(
        report,
        mutants=tuple(replace(m, observations=seen, probe="value") if m is survivor else m for m in report.mutants),
    )
    data = next(m for m in report.as_dict()["mutants"] if m["id"] == survivor.id)
    assert data["diagnosis"] == "weak_checking" and data["reached"] == "propagated"
    assert data["first_propagation"] == {"test": "test_top.t", "time_ns": 12.5, "signal": "y"}
    assert data["first_activation"] == {"test": "test_top.t", "time_ns": 5.0}
    assert MutantResult.from_dict(data) == next(m for m in report.mutants if m.id == survivor.id)
    old = {k: v for k, v in data.items() if k not in ("tests", "probe", "unprobed")}  # a report of an older hwtp
    assert MutantResult.from_dict(old).diagnosis == Diagnosis.UNKNOWN
    failure = next(c for c in check_junit(junit(report)).iter("testcase") if c.find("failure") is not None)
    assert "survived (weak checking)" in failure.find("failure").get("message", "")  # type: ignore[union-attr]
    assert "output y first differed from golden at 12.5 ns of test_top.t" in markdown(report)


def test_diagnose_must_be_a_boolean(tmp_path: Path) -> None:
    from hwtp.config import load_ci

    (tmp_path / "top.v").write_text("module top(input a, output y); assign y = a; endmodule\n")
    cfg = tmp_path / "hwtp.yaml"
    cfg.write_text("design:\n  sources: [top.v]\n  top: top\ntests:\n  modules: [t]\ndiagnose: maybe\n")
    with pytest.raises(ConfigError, match=r"hwtp.yaml:6: diagnose: expected true or false"):
        load_ci(cfg)


# --------------------------------------------------------------------------- simulator tests

NO_CHECK_TB = """
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer


@cocotb.test()
async def exercises_everything(dut):
    Clock(dut.clk, 10, unit="ns").start(start_high=False)
    for name in ("en", "load", "up", "d"):
        getattr(dut, name).value = 0
    dut.rst_n.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    dut.rst_n.value = 1
    for en, up, cycles in ((1, 1, 3), (1, 0, 5), (0, 0, 2)):
        dut.en.value, dut.up.value = en, up
        for _ in range(cycles):
            await RisingEdge(dut.clk)
    dut.load.value, dut.d.value = 1, 0x5A
    await RisingEdge(dut.clk)
    dut.load.value = 0
    await RisingEdge(dut.clk)
    await Timer(1, "ns")
    assert dut.q.value.is_resolvable  # the only check: nothing a mutant changes
"""


def _run(run_cli: Run_, root: Path, out: Path, *extra: str) -> dict[str, dict[str, Any]]:
    code, text, err = run_cli(
        "ci",
        "--config",
        root / "hwtp.yaml",
        *MUTANTS,
        "--json",
        out / "r.json",
        "--junit",
        out / "r.xml",
        "--markdown",
        out / "r.md",
        *extra,
    )
    assert code == 0, text + err
    return {m["id"]: m for m in json.loads((out / "r.json").read_text())["mutants"]}


def _survivor(mutants: dict[str, dict[str, Any]], operator: str) -> dict[str, Any]:
    return next(m for m in mutants.values() if m["operator"] == operator and m["status"] == "survived")


@pytest.mark.sim
def test_survivors_of_a_weak_testbench_say_whether_it_lacked_stimulus_or_checking(
    tmp_path: Path, run_cli: Run_
) -> None:
    root = _project(tmp_path, folder=True)
    out = tmp_path / "shared"
    mutants = _run(run_cli, root, out)
    survivors = [m for m in mutants.values() if m["status"] == "survived"]
    assert survivors and all(
        m["diagnosis"] in ("weak_stimulus", "not_propagated", "weak_checking")
        for m in survivors
        if m["probe"] != "none"
    )
    # counting down is never exercised: its mutant's code never computes another value
    down = _survivor(mutants, "arithmetic.sub_to_add")
    assert (down["diagnosis"], down["reached"], down["activated"], down["propagated"]) == (
        "weak_stimulus",
        "none",
        False,
        False,
    )
    assert down["first_activation"] is None and all(t["activated"] is False for t in down["tests"])
    # tc is never checked: its mutants change tc, and the test passes
    tc = [m for m in survivors if m["operator"] == "relational.eq_to_ne"]
    assert tc and all(m["diagnosis"] == "weak_checking" and m["first_propagation"]["signal"] == "tc" for m in tc)
    first = tc[0]["first_propagation"]
    assert first["test"] == "test_weak.counts_up" and first["time_ns"] is not None
    assert tc[0]["first_activation"]["time_ns"] <= first["time_ns"]
    assert all(
        m["reached"] == "detected" and m["diagnosis"] is None for m in mutants.values() if m["status"] == "killed"
    )
    # the same sentences in JUnit and Markdown, with time and signal
    failures = {
        c.get("name", "").split()[0]: c.find("failure")
        for c in check_junit((out / "r.xml").read_text()).iter("testcase")
    }
    assert "survived (weak stimulus)" in failures[down["id"]].get("message", "")  # type: ignore[union-attr]
    weak_checking = failures[tc[0]["id"]]
    assert weak_checking is not None and "survived (weak checking)" in weak_checking.get("message", "")
    assert f"output tc first differed from golden at {first['time_ns']:g} ns of test_weak.counts_up" in (
        weak_checking.text or ""
    )
    md = (out / "r.md").read_text()
    assert "weak stimulus: no test made its code compute a different value" in md
    assert f"output tc first differed from golden at {first['time_ns']:g} ns" in md

    # a process per mutant says the same
    alone = _run(run_cli, root, tmp_path / "alone", "--no-shared")
    keys = ("status", "diagnosis", "activated", "propagated", "first_activation", "first_propagation")
    assert {i: [m[k] for k in keys] for i, m in alone.items()} == {i: [m[k] for k in keys] for i, m in mutants.items()}

    # a testbench that drives everything and checks nothing: the count-down mutant now reaches q
    (root / "tb" / "test_weak.py").write_text(NO_CHECK_TB, encoding="utf-8")
    unchecked = _run(run_cli, root, tmp_path / "unchecked")
    down = unchecked[down["id"]]
    assert down["status"] == "survived" and down["diagnosis"] == "weak_checking"
    assert down["first_propagation"]["signal"] == "q" and down["first_propagation"]["time_ns"] > 0
    assert down["first_activation"]["time_ns"] <= down["first_propagation"]["time_ns"]
    assert all(m["status"] == "survived" for m in unchecked.values())


@pytest.mark.sim
def test_diagnosis_leaves_scores_unchanged(tmp_path: Path, run_cli: Run_) -> None:
    """The probes only read: killed and survived are those of the plain schemata build."""
    root = _project(tmp_path, folder=True)
    probed = _run(run_cli, root, tmp_path / "probed")
    plain = _run(run_cli, root, tmp_path / "plain", "--no-diagnose")
    assert {i: m["status"] for i, m in probed.items()} == {i: m["status"] for i, m in plain.items()}
    assert all(m["diagnosis"] in (None, "unknown") and m["tests"] == [] for m in plain.values())


CHECKS_SUM_ONLY = """tests:
  - name: overflow_checks_sum_only
    steps:
      - drive: {a: 0x7f, b: 0x01}
      - expect: {sum: 0x80}
      - drive: {a: 0xff, b: 0x01, cin: 1}
      - expect: {sum: 0x01}
"""
DRIVES_NOTHING = """tests:
  - name: power_on_only
    steps:
      - expect: {sum: 0}
"""


@pytest.mark.sim
def test_score_says_per_plan_and_mutant_how_far_it_got(tmp_path: Path, run_cli: Run_, mutated: Any) -> None:
    mutated("adder_carry")
    mutdir = mutated.root / "adder_carry"
    for name, text in (("sum_only", CHECKS_SUM_ONLY), ("nothing", DRIVES_NOTHING)):
        (tmp_path / f"{name}.yaml").write_text(text, encoding="utf-8")
    args = ("score", mutdir, "--plans", tmp_path / "sum_only.yaml", "--plans", tmp_path / "nothing.yaml", "-j", "2")
    code, out, err = run_cli(*args, "--json", tmp_path / "plain.json")
    assert code == 0, out + err
    code, out, err = run_cli(*args, "--json", tmp_path / "diag.json", "--diagnose")
    assert code == 0, out + err
    plain = json.loads((tmp_path / "plain.json").read_text())["results"]
    diag = json.loads((tmp_path / "diag.json").read_text())["results"]
    keys = ("plan", "state", "outcome", "reward", "ceiling", "detail")
    assert [{k: r[k] for k in keys} for r in diag] == plain  # the probes change no reward
    mutants = [r for r in diag if r["state"] != "golden"]
    assert all(r["detected"] == (r["outcome"] == "detected") for r in mutants)
    assert all(r["reached"] == "detected" for r in mutants if r["outcome"] == "detected")
    assert all(r["tests"] and r["tests"][0]["test"] in ("overflow_checks_sum_only", "power_on_only") for r in mutants)
    by_plan = {p: [r for r in mutants if r["plan"] == p and r["outcome"] == "passed"] for p in ("sum_only", "nothing")}
    assert any(r["diagnosis"] == "weak_stimulus" and r["activated"] is False for r in by_plan["nothing"])
    unchecked = [r for r in by_plan["sum_only"] if r["diagnosis"] == "weak_checking"]
    assert unchecked and all(r["first_propagation"]["signal"] in ("cout", "overflow") for r in unchecked)
    assert all(r["first_propagation"]["time_ns"] is not None for r in unchecked)
