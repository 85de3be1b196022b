"""hwtp ci on the idioms of real cocotb projects: parameterized generate branches, equivalent
mutants, hanging testbenches (each a small project written here, in a tmp folder)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

import hwtp.cli.commands.ci as ci_command
from hwtp import progress
from hwtp.ci.elaborated import elaboration
from hwtp.config import load_ci
from hwtp.mutators.formal import yosys
from hwtp.rtl.design import edge_signals
from hwtp.rtl.frontend import BuildOptions, SourceFile

Run_ = Callable[..., tuple[int, str, str]]
needs_yosys = pytest.mark.skipif(yosys.find() is None, reason="Yosys is not installed")

ADAPT = """module adapt #(parameter A = 8, parameter B = 4) (
    input clk,
    input rst,
    input [A-1:0] d,
    output reg [B-1:0] q,
    output [3:0] cnt
);
  generate
    if (A > B) begin : g_down
      always @(posedge clk) q <= d[B-1:0] + 1'b1;
    end else if (A < B) begin : g_up
      always @(posedge clk) q <= {{(B-A){1'b0}}, d} - 1'b1;
    end else begin : g_same
      always @(posedge clk) q <= ~d;
    end
  endgenerate
  reg [3:0] bit_cnt;
  always @(posedge clk)
    if (rst) bit_cnt <= 4'd0;
    else if (bit_cnt > 4'd0) bit_cnt <= bit_cnt - 4'd1;
    else bit_cnt <= 4'd9;
  assign cnt = bit_cnt;
endmodule
"""
DEAD_LINES = {10, 12}  # g_down and g_up: A == B elaborates g_same only

TB = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer


@cocotb.test()
async def follows(dut):
    Clock(dut.clk, 10, unit="ns").start(start_high=False)
    dut.rst.value = 1
    dut.d.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    dut.rst.value = 0
    expected = 0
    for i in range(24):
        dut.d.value = i % 16
        await RisingEdge(dut.clk)
        await Timer(1, "ns")
        q = int(dut.q.value)
        if HANG and q == i % 16:
            while True:  # a mutant that drops the inversion hangs this testbench
                await Timer(1, "ns")
        assert q == (~i) & 15, f"q = {q} for d = {i % 16}"
        expected = expected - 1 if expected > 0 else 9
        assert int(dut.cnt.value) == expected, f"cnt = {int(dut.cnt.value)}, expected {expected}"
"""


def _project(tmp_path: Path, hang: bool = False) -> Path:
    root = tmp_path / "adapt"
    (root / "rtl").mkdir(parents=True)
    (root / "tb").mkdir()
    (root / "rtl" / "adapt.v").write_text(ADAPT, encoding="utf-8")
    (root / "tb" / "test_adapt.py").write_text(TB.replace("HANG", str(hang)), encoding="utf-8")
    (root / "hwtp.yaml").write_text(
        "design:\n  sources: [rtl/adapt.v]\n  top: adapt\n"
        "tests:\n  modules: [test_adapt]\n  paths: [tb]\n"
        "build:\n  parameters: {A: 4, B: 4}\n",
        encoding="utf-8",
    )
    return root


def test_elaboration_tells_the_generate_branch_the_parameters_take() -> None:
    source = SourceFile("adapt.v", ADAPT + "module unused(input a, output b);\n  assign b = ~a;\nendmodule\n")
    lines = source.text.splitlines(keepends=True)

    def offset(line: int) -> int:
        return sum(len(x) for x in lines[: line - 1]) + len(lines[line - 1]) - len(lines[line - 1].lstrip())

    same = elaboration((source,), "adapt", BuildOptions(parameters=(("A", "4"), ("B", "4"))))
    assert [same.elaborated("adapt.v", offset(n)) for n in (10, 12, 14, 19, 25)] == [False, False, True, True, False]
    down = elaboration((source,), "adapt", BuildOptions())  # defaults: A 8 > B 4
    assert [down.elaborated("adapt.v", offset(n)) for n in (10, 12, 14)] == [True, False, False]
    assert edge_signals((source,)) == {"clk"}


@pytest.mark.sim
@needs_yosys
def test_unelaborated_and_equivalent_mutants_are_out_of_the_score_in_every_report(
    tmp_path: Path, run_cli: Run_
) -> None:
    root = _project(tmp_path)
    out = {k: tmp_path / f"r.{k}" for k in ("json", "xml", "md", "sarif")}
    reports = [
        a
        for k, flag in (("json", "--json"), ("xml", "--junit"), ("md", "--markdown"), ("sarif", "--sarif"))
        for a in (flag, out[k])
    ]
    code, text, err = run_cli("ci", "--config", root / "hwtp.yaml", *["-n", "0", "-j", "2"], *reports)
    assert code == 0, text + err
    report = json.loads(out["json"].read_text())
    by_status: dict[str, list[dict[str, object]]] = {}
    for m in report["mutants"]:
        by_status.setdefault(str(m["status"]), []).append(m)
    dead = by_status["not_elaborated"]
    assert dead and {m["line"] for m in dead} == DEAD_LINES
    assert all(m["diagnosis"] is None and "A=4, B=4" in str(m["reason"]) for m in dead)
    assert not [m for m in report["mutants"] if m["line"] in DEAD_LINES and m["status"] != "not_elaborated"]
    equivalent = by_status["equivalent"]
    assert any("-bit_cnt > 4'd0" in str(m["mutant_line"]) for m in equivalent)  # the UART idiom
    assert all(m["diagnosis"] is None and "proved equivalent by Yosys" in str(m["reason"]) for m in equivalent)
    c = report["counts"]
    assert c["not_elaborated"] == len(dead) and c["equivalent"] == len(equivalent)
    assert c["scored"] == c["valid"] - len(dead) - len(equivalent)
    assert report["score"] == pytest.approx(c["killed"] / c["scored"])
    formula = f"not_elaborated {len(dead)}"
    assert formula in report["formula"] and formula in text and f"not elaborated {len(dead)}" in text
    assert formula in out["md"].read_text() and "| not elaborated |" in out["md"].read_text()
    assert f'value="{len(dead)}"' in out["xml"].read_text() and 'type="not_elaborated"' in out["xml"].read_text()
    sarif = json.loads(out["sarif"].read_text())["runs"][0]["properties"]
    assert sarif["counts"]["not_elaborated"] == len(dead) and formula in sarif["formula"]
    assert "survivors proved equivalent by Yosys" in err


@pytest.mark.sim
def test_a_hanging_mutant_is_bounded_by_goldens_time_visible_and_apart_from_survivors(
    tmp_path: Path, run_cli: Run_, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ci_command, "PLAIN_SECONDS", 2.0)  # a progress line while nothing finishes
    monkeypatch.setattr(progress, "PLAIN_SECONDS", 2.0)
    root = _project(tmp_path, hang=True)
    out = tmp_path / "r.json"
    options = ["-n", "0", "--operators", "bitwise", "-j", "1", "--formal", "off"]
    code, text, err = run_cli("ci", "--config", root / "hwtp.yaml", *options, "--json", out)
    assert code == 0, text + err
    report = json.loads(out.read_text())
    golden = report["golden"]["seconds"]
    assert report["timeout_s"] == pytest.approx(max(15.0, 3 * golden), abs=0.01)
    assert f"each stopped after {report['timeout_s']:.0f} s" in err and "--timeouts-as" in err
    assert "testing mutants: 0/1" in err  # said while the only mutant hung
    [hung] = [m for m in report["mutants"] if m["status"] == "timeout"]
    assert hung["operator"] == "bitwise.remove_not" and report["counts"]["survived"] == 0
    assert "indeterminate (1, not counted)" in text and "no survivor" in text


# --------------------------------------------------------------------------- ci init on real layouts

FIFO = (
    "module fifo #(parameter DEPTH = 4, parameter WIDTH = 2) (input clk, output [WIDTH-1:0] q);\n"
    "  assign q = {WIDTH{1'b0}};\nendmodule\n"
)
COCOTB_TEST = "import cocotb\n\n\n@cocotb.test()\nasync def smoke(dut):\n    pass\n"
FOREACH_MAKEFILE = """TOPLEVEL_LANG = verilog
SIM ?= icarus
DUT      = fifo
TOPLEVEL = $(DUT)
MODULE   = test_$(DUT)
VERILOG_SOURCES += ../../rtl/$(DUT).v

export PARAM_DEPTH ?= 16
export PARAM_WIDTH ?= 8

ifeq ($(SIM), icarus)
	COMPILE_ARGS += $(foreach v,$(filter PARAM_%,$(.VARIABLES)),-P $(TOPLEVEL).$(subst PARAM_,,$(v))=$($(v)))
	COMPILE_ARGS += -P other.X=1
else ifeq ($(SIM), verilator)
	COMPILE_ARGS += $(foreach v,$(filter PARAM_%,$(.VARIABLES)),-G$(subst PARAM_,,$(v))=$($(v)))
endif
COMPILE_ARGS += $(shell echo -DFAST)

include $(shell cocotb-config --makefiles)/Makefile.sim

clean::
	rm -rf sim_build
"""


def _testbenches(tmp_path: Path, names: tuple[str, ...]) -> Path:
    """A repository with rtl/NAME.v and tb/NAME/{Makefile,test_NAME.py} per name."""
    repo = tmp_path / "repo"
    (repo / "rtl").mkdir(parents=True)
    for name in names:
        (repo / "rtl" / f"{name}.v").write_text(FIFO.replace("fifo", name), encoding="utf-8")
        tb = repo / "tb" / name
        tb.mkdir(parents=True)
        (tb / "Makefile").write_text(FOREACH_MAKEFILE.replace("= fifo", f"= {name}"), encoding="utf-8")
        (tb / f"test_{name}.py").write_text(COCOTB_TEST, encoding="utf-8")
    return repo


def test_ci_init_reads_foreach_parameters_and_leaves_each_unknown_as_a_todo_with_its_line(
    tmp_path: Path, run_cli: Run_, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _testbenches(tmp_path, ("fifo",))
    monkeypatch.chdir(repo / "tb" / "fifo")  # inside tb/x: the Makefile names ../../rtl/fifo.v
    code, out, err = run_cli("ci", "init")
    assert code == 0, out + err
    config = repo / "hwtp.yaml"
    text = config.read_text()
    assert "parameters: {DEPTH: 16, WIDTH: 8}" in text
    assert '- "rtl/fifo.v"' in text and 'dir: "tb/fifo"' in text
    assert "not understood: tb/fifo/Makefile:13: COMPILE_ARGS: `-P other.X=1`" in out
    assert "not understood: tb/fifo/Makefile:17: COMPILE_ARGS: `$(shell echo -DFAST)`" in out
    assert "# TODO not understood: tb/fifo/Makefile:13" in text
    assert "hwtp ci --config ../../hwtp.yaml" in out
    loaded = load_ci(config)
    assert dict(loaded.build.parameters) == {"DEPTH": "16", "WIDTH": "8"} and loaded.sources == ("rtl/fifo.v",)


def test_ci_init_with_several_testbenches_lists_them_and_writes_the_one_chosen(
    tmp_path: Path, run_cli: Run_, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _testbenches(tmp_path, ("rx", "tx"))
    monkeypatch.chdir(repo)
    code, out, err = run_cli("ci", "init")
    assert code == 2 and not (repo / "hwtp.yaml").exists()
    assert "several cocotb testbenches" in err and "tb/rx/Makefile: top rx" in err and "tb/tx/Makefile: top tx" in err
    for name in ("rx", "tx"):
        code, out, err = run_cli("ci", "init", "--flow", f"tb/{name}/Makefile", "-o", f"hwtp-{name}.yaml")
        assert code == 0, out + err
        loaded = load_ci(repo / f"hwtp-{name}.yaml")
        assert loaded.top == name and loaded.sources == (f"rtl/{name}.v",) and loaded.test_modules == (f"test_{name}",)


CDC = """module cdc(input wclk, input rclk, input [3:0] d, output reg [3:0] q);
  reg [3:0] w;
  always @(posedge wclk) w <= d;
  always @(posedge rclk) q <= w;
endmodule
"""


def test_ci_init_on_two_clocks_writes_none_and_says_why_and_export_tests_refuses(
    tmp_path: Path, run_cli: Run_, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "cdc"
    root.mkdir()
    (root / "cdc.v").write_text(CDC, encoding="utf-8")
    (root / "test_cdc.py").write_text(COCOTB_TEST, encoding="utf-8")
    monkeypatch.chdir(root)
    code, out, err = run_cli("ci", "init")
    assert code == 0, out + err
    assert "note: several clocks (wclk, rclk)" in out and "export-tests` refuses" in out
    text = (root / "hwtp.yaml").read_text()
    assert "\n  clock:" not in text and "# several clocks (wclk, rclk)" in text
    design = load_ci(root / "hwtp.yaml").load_design()
    assert design.clock is None  # never one of the two, guessed
    plan = root / "p.yaml"
    plan.write_text("format: 1\ntests:\n  - name: t\n    steps:\n      - set: {d: 1}\n", encoding="utf-8")
    code, out, err = run_cli("export-tests", plan, "-o", root / "test_hwtp_plans.py")
    assert code == 2 and "several clocks (wclk, rclk" in err and not (root / "test_hwtp_plans.py").exists()


@pytest.mark.sim
@pytest.mark.skipif(shutil.which("iverilog") is None, reason="the testbenches' Makefiles name SIM ?= icarus")
def test_ci_init_all_writes_one_config_per_testbench_and_ci_runs_each(
    tmp_path: Path, run_cli: Run_, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _testbenches(tmp_path, ("rx", "tx"))
    monkeypatch.chdir(repo)
    assert "hwtp ci init --all" in run_cli("ci", "init")[2]  # the listing offers it
    code, out, err = run_cli("ci", "init", "--all")
    assert code == 0, out + err
    assert "run `hwtp ci --config hwtp-rx.yaml --config hwtp-tx.yaml`" in out
    assert [load_ci(repo / f"hwtp-{n}.yaml").top for n in ("rx", "tx")] == ["rx", "tx"]
    assert run_cli("ci", "init", "--all")[0] == 2  # never overwritten without --force
    code, out, err = run_cli(
        "ci",
        "--config",
        "hwtp-rx.yaml",
        "--config",
        "hwtp-tx.yaml",
        "-n",
        "2",
        "--formal",
        "off",
        "--no-diagnose",
        "--json",
        tmp_path / "r.json",
    )
    assert code == 1, out + err  # the smoke tests catch nothing: both miss the gate
    assert "== " in out and "0 of 2 configs reached their gate; missed:" in out
    for name in ("rx", "tx"):
        report = json.loads((tmp_path / f"r-hwtp-{name}.json").read_text())
        assert report["design"] == name and report["mutants"] and report["score"] == 0


# --------------------------------------------------------------------------- initial blocks, timing

INIT = """module offset(input clk, input [3:0] d, output reg [3:0] q);
  reg [3:0] base;
  initial base = 4'd3;
  always @(posedge clk) q <= d + base;
endmodule
"""
INIT_TB = """import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer


@cocotb.test()
async def adds_three(dut):
    Clock(dut.clk, 10, unit="ns").start(start_high=False)
    for d in (1, 5, 9):
        dut.d.value = d
        await RisingEdge(dut.clk)
        await Timer(1, "ns")
        assert int(dut.q.value) == d + 3, f"q = {int(dut.q.value)} for d = {d}"
"""


def _single(tmp_path: Path, rtl: str, tb: str, extra: str = "") -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "top.v").write_text(rtl, encoding="utf-8")
    (root / "test_top.py").write_text(tb, encoding="utf-8")
    top = rtl.split("(")[0].split()[1]
    (root / "hwtp.yaml").write_text(
        f"design:\n  sources: [top.v]\n  top: {top}\ntests:\n  modules: [test_top]\n{extra}", encoding="utf-8"
    )
    return root


@pytest.mark.sim
def test_a_mutant_in_an_initial_block_runs_alone_and_the_rest_stay_shared(tmp_path: Path, run_cli: Run_) -> None:
    root = _single(tmp_path, INIT, INIT_TB)
    out = tmp_path / "r.json"
    args = ("ci", "--config", root / "hwtp.yaml", "-n", "0", "--operators", "constant,arithmetic", "-j", "2")
    code, text, err = run_cli(*args, "--verify", "--formal", "off", "--json", out)
    assert code == 0, text + err
    assert "in an initial block ran in a process of their own" in err
    assert "shared simulator process" in err and "did not give what a process of its own gives" not in err
    report = json.loads(out.read_text())
    initial = [m for m in report["mutants"] if m["line"] == 3]
    assert initial and all(m["status"] == "killed" for m in initial)  # alone, the changed constant is seen
    code, text, err = run_cli(*args, "--formal", "off", "--no-shared", "--json", tmp_path / "alone.json")
    alone = json.loads((tmp_path / "alone.json").read_text())
    assert [(m["id"], m["status"]) for m in report["mutants"]] == [(m["id"], m["status"]) for m in alone["mutants"]]


@pytest.mark.sim
def test_delays_in_the_rtl_say_what_to_do_and_the_log_is_kept(tmp_path: Path, run_cli: Run_) -> None:
    rtl = "module delayed(input clk, input a, output reg y);\n  always @(posedge clk) y <= #1 a;\nendmodule\n"
    root = _single(tmp_path, rtl, COCOTB_TEST)
    code, text, err = run_cli("ci", "--config", root / "hwtp.yaml", "-n", "2", "--no-diagnose")
    assert code == 2, text + err
    assert "NEEDTIMINGOPT" in err and "build.args: [--timing]" in err and "-fcoroutines" in err and "hwtp doctor" in err
    log = Path(err.split("(full log: ")[-1].split(")")[0])
    assert log.is_file() and "NEEDTIMINGOPT" in log.read_text()
    # what the message says works as written: --timing alone (hwtp adds -fcoroutines, no -CFLAGS to trust)
    (tmp_path / "timed").mkdir()
    timed = _single(tmp_path / "timed", rtl, COCOTB_TEST, extra="build:\n  args: [--timing]\n")
    code, text, err = run_cli("ci", "--config", timed / "hwtp.yaml", "-n", "2", "--no-diagnose", "--formal", "off")
    assert code in (0, 1), text + err
    assert "NEEDTIMINGOPT" not in err and "refused" not in err.lower()


ADD = """module add(input [3:0] a, input [3:0] b, output [3:0] y, output [3:0] z, output [3:0] w);
  assign y = a + b;
  assign z = a ^ b;
  assign w = a & b;
endmodule
"""
LATE_TB = """import cocotb
from cocotb.triggers import Timer
from cocotb.utils import get_sim_time


@cocotb.test()
async def adds(dut):
    dut.a.value = 3
    dut.b.value = 2
    await Timer(1, "ns")
    y = int(dut.y.value)
    if y == 1:  # only the `a - b` mutant gets here, and then reads absolute time
        assert get_sim_time("ns") < 2, "late"
        return
    assert y == 5, f"y = {y}"
    assert int(dut.z.value) == 1 and int(dut.w.value) == 2
"""


@pytest.mark.sim
def test_one_mutant_that_differs_when_shared_runs_alone_named_and_the_rest_stay_shared(
    tmp_path: Path, run_cli: Run_, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HWTP_CACHE_DIR", str(tmp_path / "cache"))  # a first use: the soundness check runs
    root = _single(tmp_path, ADD, LATE_TB)
    args = (
        "ci",
        "--config",
        root / "hwtp.yaml",
        "-n",
        "0",
        "--operators",
        "arithmetic,bitwise",
        "-j",
        "2",
        "--formal",
        "off",
        "--no-diagnose",
        "--min-score",
        "0",
    )  # 5 mutants: the sample holds a - b
    code, text, err = run_cli(*args, "--json", tmp_path / "first.json")
    assert code == 0, text + err
    assert "shared simulator process" in err and "runs in a process of its own" in err, err
    assert "mutant m0001 (top.v:2): passes in a process of its own but fails test_top.adds in the shared" in err
    assert "absolute simulation time" in err and "one process per mutant" not in err
    records = list((tmp_path / "cache" / "ci-shared").glob("*.json"))
    [record] = [json.loads(r.read_text()) for r in records]
    assert record["sound"] is True and len(record["alone"]) == 1  # remembered: that mutant alone, not the testbench
    code, text, err = run_cli(*args, "--json", tmp_path / "again.json")  # the record: no check, the same routing
    assert code == 0 and "ran in a process of their own" in err and "one process per mutant" not in err, err
    code, text, err = run_cli(*args, "--no-shared", "--json", tmp_path / "alone.json")
    results = [
        [(m["id"], m["status"]) for m in json.loads((tmp_path / f"{n}.json").read_text())["mutants"]]
        for n in ("first", "again", "alone")
    ]
    assert results[0] == results[1] == results[2] and ("survived" in {s for _, s in results[2]})
