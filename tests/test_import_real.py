"""hwtp designs import on the layouts of public benchmark suites: testbench.v beside the design,
CLK/RST names, clocks found from use, two clocks (each a small folder written here)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from hwtp.corpus.importer import ImportConfig, Rejected, constant_outputs, examine
from hwtp.corpus.sources import Candidate, Patterns, discover
from hwtp.errors import DesignError
from hwtp.plans.format import parse_plan
from hwtp.rtl.design import Clock, guess_controls, load_design
from hwtp.rtl.frontend import Port
from hwtp.sim.simulate import describe_mismatch

Run_ = Callable[..., tuple[int, str, str]]

UPPER = """module acc(input CLK, input RST, input [3:0] D, output reg [3:0] Q);
  always @(posedge CLK) if (RST) Q <= 4'd0; else Q <= Q + D;
endmodule
"""
TICK = """module acc(input tick, input rst_n, input [3:0] d, output reg [3:0] q);
  always @(posedge tick or negedge rst_n) if (!rst_n) q <= 4'd0; else q <= q + d;
endmodule
"""
TWO_CLOCKS = """module cdc(input wclk, input rclk, input [3:0] d, output reg [3:0] q);
  reg [3:0] w;
  always @(posedge wclk) w <= d;
  always @(posedge rclk) q <= w;
endmodule
"""
TESTBENCH = """module testbench;
  reg CLK = 0, RST = 1; reg [3:0] D = 0; wire [3:0] Q;
  acc dut(.CLK(CLK), .RST(RST), .D(D), .Q(Q));
  always #5 CLK = ~CLK;
endmodule
"""


def _examine(tmp_path: Path, name: str, text: str, **row: object) -> Candidate:
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"{name}.v").write_text(text, encoding="utf-8")
    return Candidate(name, str(folder), (folder / f"{name}.v",), **row)  # type: ignore[arg-type]


def test_clock_and_reset_names_in_any_case_and_clocks_from_use(tmp_path: Path) -> None:
    upper = examine(_examine(tmp_path, "upper", UPPER), ImportConfig()).design
    assert upper.kind == "sequential" and upper.clock and upper.clock.port == "CLK"
    assert upper.reset and (upper.reset.port, upper.reset.active) == ("RST", "high")
    tick = examine(_examine(tmp_path, "tick", TICK), ImportConfig()).design
    assert tick.clock and tick.clock.port == "tick" and tick.reset and tick.reset.port == "rst_n"
    ports = (Port("CLK", "input", 1), Port("RST_N", "input", 1))
    clock, reset = guess_controls(ports)
    assert clock and clock.port == "CLK" and reset and (reset.port, reset.active) == ("RST_N", "low")


def test_two_clocks_and_a_clocked_design_without_clock_are_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(Rejected) as two:
        examine(_examine(tmp_path, "cdc", TWO_CLOCKS), ImportConfig())
    assert two.value.reason.value == "controls" and "several clocks (wclk, rclk" in str(two.value)
    chosen = examine(_examine(tmp_path, "cdc2", TWO_CLOCKS, clock={"port": "wclk"}), ImportConfig()).design
    assert chosen.clock and chosen.clock.port == "wclk"  # the row names one: rclk stays an input
    with pytest.raises(Rejected) as none:
        examine(_examine(tmp_path, "tick2", TICK, clock="none"), ImportConfig())
    assert "input tick is used as a clock" in str(none.value) and "combinational" in str(none.value)


NAMED_AND_SECOND = TWO_CLOCKS.replace("wclk", "clk")  # a clock by its name, and another by its use


def test_a_second_clock_beside_a_named_one_is_refused_everywhere_a_design_is_read(
    tmp_path: Path, run_cli: Run_
) -> None:
    with pytest.raises(Rejected) as named:
        examine(_examine(tmp_path, "cdc", NAMED_AND_SECOND), ImportConfig())
    assert "several clocks (clk, rclk" in str(named.value) and "rclk as random data" in str(named.value)
    # a design folder whose manifest sets no clock, though an input is one: the manifest's field is named
    folder = tmp_path / "tickdesign"
    (folder / "rtl").mkdir(parents=True)
    (folder / "rtl" / "acc.v").write_text(TICK, encoding="utf-8")
    (folder / "design.yaml").write_text("name: acc\ntop: acc\nsources: [rtl/acc.v]\n", encoding="utf-8")
    with pytest.raises(DesignError) as unset:
        load_design(folder)
    assert "design.yaml:1: clock:" in str(unset.value) and "input tick is used as a clock" in str(unset.value)
    # a bare Verilog file: guessed clk, a second clock refused; --clock names the one driven
    bare = tmp_path / "cdc.v"
    bare.write_text(NAMED_AND_SECOND, encoding="utf-8")
    code, _out, err = run_cli("mutate", bare, "-n", "1", "-o", tmp_path / "m")
    assert code == 2 and "several clocks (clk, rclk" in err and "Traceback" not in err
    chosen = load_design(bare, clock=Clock("clk"))
    assert chosen.clock and chosen.clock.port == "clk"


def test_a_testbench_beside_the_design_is_left_out_and_named(tmp_path: Path, run_cli: Run_) -> None:
    suite = tmp_path / "suite" / "acc"
    suite.mkdir(parents=True)
    (suite / "acc.v").write_text(UPPER, encoding="utf-8")
    (suite / "testbench.v").write_text(TESTBENCH, encoding="utf-8")
    (suite / "Testbench_acc.sv").write_text(TESTBENCH.replace("testbench", "tb2"), encoding="utf-8")
    [candidate] = discover([tmp_path / "suite"], Patterns())
    assert [p.name for p in candidate.rtl] == ["acc.v"]
    assert sorted(p.name for p in candidate.excluded) == ["Testbench_acc.sv", "testbench.v"]
    design = examine(candidate, ImportConfig()).design
    assert design.top == "acc" and design.clock and design.clock.port == "CLK"


def test_constant_outputs_are_shown_as_verilog_values() -> None:
    plan = parse_plan(
        "format: 1\ntests:\n  - name: t\n    steps:\n"
        '      - expect: {rdata: "8\'h00", ok: 0}\n      - expect: {rdata: "8\'h00", ok: 0}\n'
    )
    shown = constant_outputs(plan)
    assert shown is not None and "Value(" not in json.dumps(shown)
    assert shown == {"rdata": "8'h0", "ok": "0"}


@pytest.mark.sim
def test_a_changed_manifest_row_is_decided_again_without_force(tmp_path: Path, run_cli: Run_) -> None:
    rtl = tmp_path / "src" / "acc.v"
    rtl.parent.mkdir()
    rtl.write_text(UPPER, encoding="utf-8")
    manifest = tmp_path / "src" / "designs.jsonl"  # rtl paths are relative to the manifest
    out = tmp_path / "corpus"
    manifest.write_text(json.dumps({"name": "acc", "rtl": "acc.v", "top": "nope"}) + "\n", encoding="utf-8")
    code, text, err = run_cli("designs", "import", manifest, "-o", out)
    assert code == 0, text + err
    assert "rejected" in text and "nope" in text
    manifest.write_text(json.dumps({"name": "acc", "rtl": "acc.v", "top": "acc"}) + "\n", encoding="utf-8")
    code, text, err = run_cli("designs", "import", manifest, "-o", out)
    assert code == 0, text + err
    assert "1 imported (0 already there), 0 rejected" in text
    assert (out / "acc" / "plans" / "reference.yaml").is_file()


@pytest.mark.sim
def test_a_fixed_file_or_a_moved_and_fixed_row_is_decided_again_without_force(tmp_path: Path, run_cli: Run_) -> None:
    src = tmp_path / "src"
    src.mkdir()
    manifest = src / "designs.jsonl"
    out = tmp_path / "corpus"
    manifest.write_text(json.dumps({"name": "acc", "rtl": "acc.v"}) + "\n", encoding="utf-8")
    code, text, err = run_cli("designs", "import", manifest, "-o", out)  # acc.v is not written yet
    assert code == 0 and "cannot read" in text, text + err
    (src / "acc.v").write_text(UPPER.replace("endmodule", ""), encoding="utf-8")  # now there, but broken
    code, text, err = run_cli("designs", "import", manifest, "-o", out)
    assert code == 0 and "cannot read" not in text and "rejected" in text, text + err
    rerun = run_cli("designs", "import", manifest, "-o", out)[1]  # nothing changed: the same verdict, kept
    assert "0 imported (0 already there), 1 rejected" in rerun
    # the row moves down a line and names a fixed copy: what it asks for changed, so it is decided again
    (src / "acc2.v").write_text(UPPER, encoding="utf-8")
    row = json.dumps({"name": "acc", "rtl": "acc2.v"})
    manifest.write_text(json.dumps({"name": "tick", "rtl": "acc.v", "clock": "none"}) + "\n" + row + "\n")
    code, text, err = run_cli("designs", "import", manifest, "-o", out)
    assert code == 0, text + err
    assert "1 imported (0 already there), 1 rejected" in text
    summary = json.loads((out / "import.json").read_text())
    assert [d["status"] for d in summary["designs"]] == ["rejected", "imported"]


def test_a_golden_mismatch_is_told_with_verilog_values_not_a_dict() -> None:
    first = {"test": "t0", "step": 3, "port": "q", "expected": "4'h3", "got": "4'h2", "cycle": 7}
    told = describe_mismatch(first)
    assert told == "step 3, cycle 7: q expected 4'h3, got 4'h2" and "{" not in told
