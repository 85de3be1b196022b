"""hwtp ci on projects laid out as real cocotb projects: `hwtp ci init` reads their runner script
or Makefile, and `hwtp ci` runs on what it wrote, sharded, with a baseline and annotations.

Two layouts are written here: a runner-script project (two RTL files, an ``include`` folder whose
``.svh`` the RTL includes, a define and a parameter from the script, tests in a ``tests``
package, ``test_dir``) and a Makefile project (``+incdir+``, ``-D``, ``-G`` in ``COMPILE_ARGS``,
conditionals, ``PYTHONPATH``). Each is built once (one schemata build per layout, shared through
the build cache); the fast tests check what the readers understand and what they report.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from hwtp.ci.makefile import read_makefile
from hwtp.ci.runnerscript import read_runner_script
from hwtp.config import load_ci
from hwtp.errors import ConfigError, DesignError
from hwtp.mutators.sites import find_sites
from hwtp.rtl.frontend import BuildOptions, SourceFile, elaborate, included_files

from .test_ci import Run_

DEFS_SVH = """\
`ifndef ACC_DEFS_SVH
`define ACC_DEFS_SVH
`define ACC_ZERO(w) {(w){1'b0}}
`define ACC_ONES(w) {(w){1'b1}}
`endif
"""

ACC_CORE = """\
`include "acc_defs.svh"
module acc_core #(parameter int WIDTH = 4) (
  input  logic             clk,
  input  logic             rst_n,
  input  logic             en,
  input  logic [WIDTH-1:0] d,
  output logic [WIDTH-1:0] sum,
  output logic             overflow
);
  logic [WIDTH:0] next;
  assign next = {1'b0, sum} + {1'b0, d};
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      sum <= WIDTH'(`ACC_INIT);
      overflow <= 1'b0;
    end else if (en) begin
      if (next[WIDTH]) begin
        sum <= `ACC_ONES(WIDTH);
        overflow <= 1'b1;
      end else begin
        sum <= next[WIDTH-1:0];
      end
    end
  end
endmodule
"""

ACC_TOP = """\
`include "acc_defs.svh"
module acc_top #(parameter int WIDTH = 4) (
  input  logic             clk,
  input  logic             rst_n,
  input  logic             en,
  input  logic [WIDTH-1:0] d,
  output logic [WIDTH-1:0] q,
  output logic             full,
  output logic             empty
);
  logic overflow;
  acc_core #(.WIDTH(WIDTH)) core (.clk(clk), .rst_n(rst_n), .en(en), .d(d), .sum(q), .overflow(overflow));
  assign full = overflow || (q == `ACC_ONES(WIDTH));
  assign empty = (q == `ACC_ZERO(WIDTH)) && !overflow;
endmodule
"""

ACC_TESTS = '''\
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge


async def start(dut):
    Clock(dut.clk, 10, unit="ns").start(start_high=False)
    dut.en.value = 0
    dut.d.value = 0
    dut.rst_n.value = 0
    await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst_n.value = 1


@cocotb.test()
async def test_accumulates(dut):
    await start(dut)
    dut.en.value = 1
    dut.d.value = 5
    await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)
    assert int(dut.q.value) == 10


@cocotb.test()
async def test_saturates_at_the_parameter_width(dut):
    await start(dut)
    dut.en.value = 1
    dut.d.value = 40
    await FallingEdge(dut.clk)
    await FallingEdge(dut.clk)
    assert int(dut.q.value) == 63  # WIDTH = 6, set by the runner script
'''

RUNNER = '''\
import os
from pathlib import Path

from cocotb_tools.runner import get_runner

proj_path = Path(__file__).resolve().parent.parent


def test_acc_runner():
    sim = os.getenv("SIM", "verilator")
    sources = [proj_path / "rtl" / "acc_core.sv", proj_path / "rtl" / "acc_top.sv"]
    runner = get_runner(sim)
    runner.build(
        sources=sources,
        includes=[proj_path / "include"],
        defines={"ACC_INIT": 0},
        parameters={"WIDTH": 6},
        hdl_toplevel="acc_top",
        build_args=["-Wno-fatal"],
        always=True,
    )
    runner.test(hdl_toplevel="acc_top", test_module="tests.test_acc", test_dir=proj_path / "sim_run")


if __name__ == "__main__":
    test_acc_runner()
'''


def runner_project(base: Path) -> Path:
    """A cocotb project run by tests/test_runner.py (cocotb_tools.runner)."""
    root = base / "acc"
    for rel, text in {"include/acc_defs.svh": DEFS_SVH, "rtl/acc_core.sv": ACC_CORE, "rtl/acc_top.sv": ACC_TOP,
                      "tests/__init__.py": "", "tests/test_acc.py": ACC_TESTS, "tests/test_runner.py": RUNNER}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


CNT_DEFS = """\
`define CNT_RESET_VALUE 0
"""

CNT_CORE = """\
`include "cnt_defs.vh"
module cnt_core #(parameter WIDTH = 4) (
  input              clk,
  input              rst,
  input              up,
  output reg [WIDTH-1:0] value
);
  always @(posedge clk) begin
    if (rst)
      value <= `CNT_RESET_VALUE;
    else if (up)
      value <= value + `CNT_STEP;
    else
      value <= value - 1'b1;
  end
endmodule
"""

CNT_TOP = """\
module cnt_top #(parameter WIDTH = 4) (
  input              clk,
  input              rst,
  input              up,
  output [WIDTH-1:0] count,
  output             wrapped
);
  cnt_core #(.WIDTH(WIDTH)) u_core (.clk(clk), .rst(rst), .up(up), .value(count));
  assign wrapped = (count == 0) & ~rst;
endmodule
"""

CNT_TESTS = '''\
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge


@cocotb.test()
async def test_counts_up(dut):
    Clock(dut.clk, 10, unit="ns").start(start_high=False)
    dut.up.value = 1
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    await ClockCycles(dut.clk, 3)
    await FallingEdge(dut.clk)
    assert int(dut.count.value) == 3
    assert len(dut.count) == 5  # WIDTH from the Makefile (-GWIDTH=5, -Pcnt_top.WIDTH=5)
'''


MAKEFILE = """\
# cocotb Makefile of a small counter
SIM ?= verilator
TOPLEVEL_LANG ?= verilog
PWD = $(shell pwd)

VERILOG_SOURCES += $(PWD)/hdl/cnt_core.v \\
                   $(PWD)/hdl/cnt_top.v
COMPILE_ARGS += -I$(PWD)/inc -DCNT_STEP=1
ifeq ($(SIM),icarus)
  COMPILE_ARGS += -Pcnt_top.WIDTH=5
else ifeq ($(SIM),verilator)
  COMPILE_ARGS += -GWIDTH=5
  EXTRA_ARGS += -Wno-WIDTHEXPAND
endif

TOPLEVEL = cnt_top
MODULE = test_cnt
export PYTHONPATH := $(PWD)/tb:$(PYTHONPATH)

include $(shell cocotb-config --makefiles)/Makefile.sim
"""


def makefile_project(base: Path) -> Path:
    """A cocotb project run by make (cocotb's Makefile.sim)."""
    root = base / "cnt"
    for rel, text in {"inc/cnt_defs.vh": CNT_DEFS, "hdl/cnt_core.v": CNT_CORE, "hdl/cnt_top.v": CNT_TOP,
                      "tb/test_cnt.py": CNT_TESTS, "Makefile": MAKEFILE}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text), encoding="utf-8")
    return root


# --------------------------------------------------------------------------- fast: the readers


def test_runner_script_is_read_without_running_it(tmp_path: Path) -> None:
    root = runner_project(tmp_path)
    (root / "tests" / "test_runner.py").write_text(RUNNER + "\nraise SystemExit('this script was run')\n")
    found = read_runner_script(root / "tests" / "test_runner.py", root)
    assert found is not None and found.origin == "tests/test_runner.py"
    assert found.sources == (root / "rtl" / "acc_core.sv", root / "rtl" / "acc_top.sv")
    assert found.top == "acc_top" and found.modules == ("tests.test_acc",)
    assert found.includes == (root / "include",)
    assert found.defines == (("ACC_INIT", "0"),) and found.parameters == (("WIDTH", "6"),)
    assert found.args == ("-Wno-fatal",) and found.simulator == "verilator"
    assert found.test_dir == root / "sim_run"
    assert root in found.module_paths  # pytest puts the folder above the tests package on sys.path
    assert not found.unknown


def test_runner_script_path_arithmetic_and_what_it_cannot_evaluate(tmp_path: Path) -> None:
    root = _write(tmp_path / "p", {
        "src/a.v": "module a(input x, output y); assign y = ~x; endmodule\n",
        "src/b.v": "module b(input x, output y); a u(.x(x), .y(y)); endmodule\n",
        "sim/test_b.py": "import cocotb\n",
        "sim/run.py": """\
            import glob
            import os
            from pathlib import Path
            from cocotb_tools.runner import get_runner as make_runner

            HERE = os.path.dirname(os.path.abspath(__file__))
            ROOT = Path(__file__).resolve().parents[1]
            NAMES = ["a", "b"]

            def run(width):
                runner = make_runner(os.environ.get("SIM", "icarus"))
                runner.build(
                    sources=[ROOT / "src" / f"{n}.v" for n in NAMES],
                    includes=[os.path.join(HERE, "..", "src")],
                    defines=make_defines(),
                    parameters={"W": width},
                    build_args=glob.glob("*.f"),
                    hdl_toplevel="b",
                )
                runner.test(Path(__file__).with_name("test_b").stem, "b", testcase=["t_one", "t_two"], seed="7",
                            extra_env={"MODE": "fast"}, **extra)
            """,
    })
    found = read_runner_script(root / "sim" / "run.py", root)
    assert found is not None
    assert found.sources == (root / "src" / "a.v", root / "src" / "b.v")
    assert found.includes == (root / "src",) and found.simulator == "icarus" and found.top == "b"
    assert found.random_seed == 7 and found.env == (("MODE", "fast"),)
    assert found.test_filter is not None and "t_one" in found.test_filter
    by_key = {u.key: u for u in found.unknown}
    assert by_key["build.defines"].line == 15 and "make_defines()" in by_key["build.defines"].what
    assert "argument of run()" in by_key["build.parameters"].what
    assert "glob.glob" in by_key["build.args"].what
    assert "with_name" in by_key["tests.modules"].what  # a method hwtp does not evaluate
    assert any("**extra" in u.what for u in found.unknown)
    assert all(str(u).startswith("sim/run.py:") and "fill in" in str(u) for u in found.unknown)


def test_makefile_assignments_conditionals_and_what_it_cannot_evaluate(tmp_path: Path) -> None:
    root = _write(tmp_path / "m", {
        "rtl/x.sv": "module x; endmodule\n", "rtl/y.sv": "module top; x u(); endmodule\n",
        "Makefile": """\
            SIM ?= verilator
            SIM ?= icarus
            TOPLEVEL_LANG = verilog
            SRC := $(shell pwd)/rtl
            VERILOG_SOURCES = $(wildcard $(SRC)/*.sv)
            COMPILE_ARGS = +incdir+$(SRC)+$(CURDIR)/inc -I $(PWD)/more +define+A=1+B -DC
            ifeq ($(SIM),icarus)
              COMPILE_ARGS += -Ptop.N=3
            else ifneq ($(SIM),verilator)
              COMPILE_ARGS += -DWRONG
            else
              COMPILE_ARGS += -GN=4 \\
                              --x-assign unique
            endif
            ifdef UNSET_VAR
              COMPILE_ARGS += -DWRONG2
            endif
            COCOTB_TOPLEVEL = top  # a comment
            COCOTB_TEST_MODULES = test_a,test_b
            COCOTB_TEST_FILTER := $(shell git rev-parse HEAD)
            include ../common.mk
            include $(shell cocotb-config --makefiles)/Makefile.sim
            """,
    })
    found = read_makefile(root / "Makefile", root)
    assert found is not None and found.origin == "Makefile"
    assert found.sources == (root / "rtl" / "x.sv", root / "rtl" / "y.sv")
    assert found.top == "top" and found.modules == ("test_a", "test_b") and found.simulator == "verilator"
    assert found.includes == (root / "rtl", root / "inc", root / "more")
    assert found.defines == (("A", "1"), ("B", ""), ("C", ""))
    assert found.parameters == (("N", "4"),) and found.args == ("--x-assign", "unique")
    assert found.test_dir == root and found.test_filter is None
    lines = {u.line: u for u in found.unknown}
    assert "$(shell git" in lines[20].what and lines[20].key == "tests.filter"
    assert "../common.mk" in lines[21].what
    assert read_makefile(_write(tmp_path / "n", {"Makefile": "all:\n\techo hi\n"}) / "Makefile", tmp_path) is None


def test_init_reports_what_it_did_not_understand_and_still_writes_a_file(tmp_path: Path, run_cli: Run_) -> None:
    root = runner_project(tmp_path)
    text = RUNNER.replace('includes=[proj_path / "include"]', "includes=find_includes()")
    (root / "tests" / "test_runner.py").write_text(text)
    code, out, _ = run_cli("ci", "init", root)
    assert code == 0
    assert "not understood: tests/test_runner.py:15: includes=`find_includes()`" in out
    assert "fill in build.includes by hand" in out
    written = (root / "hwtp.yaml").read_text()
    assert "# TODO not understood: tests/test_runner.py:15:" in written
    data = yaml.safe_load(written)
    assert data["build"]["includes"] == [] and data["design"]["top"] == "acc_top"
    with pytest.raises(ConfigError, match=r"rtl/acc_core.sv:1: .*acc_defs.svh.*add the folder that holds it to "
                                          r"build.includes"):
        load_ci(root / "hwtp.yaml")


# --------------------------------------------------------------------------- fast: one parse for all


def test_headers_defines_and_parameters_reach_the_pyslang_parse(tmp_path: Path) -> None:
    root = runner_project(tmp_path)
    sources = [SourceFile(rel, (root / rel).read_text()) for rel in ("rtl/acc_core.sv", "rtl/acc_top.sv")]
    headers = included_files(root, sources, ["include"], [("ACC_INIT", "0")])
    assert [h.path for h in headers] == ["include/acc_defs.svh"]
    options = BuildOptions(defines=(("ACC_INIT", "0"),), parameters=(("WIDTH", "6"),), includes=("include",),
                           headers=headers)
    ports = {p.name: p.width for p in elaborate(sources, "acc_top", options)}
    assert ports["q"] == 6 and ports["d"] == 6  # the parameter as the build sets it
    with pytest.raises(DesignError, match=r"acc_defs\.svh"):
        included_files(root, sources, [], [])


def test_text_from_macros_and_headers_is_never_a_mutation_site(tmp_path: Path) -> None:
    root = runner_project(tmp_path)
    text = (root / "rtl" / "acc_top.sv").read_text()
    headers = included_files(root, [SourceFile("rtl/acc_top.sv", text)], ["include"], [])
    options = BuildOptions(includes=("include",), headers=headers)
    sites = find_sites(text, "rtl/acc_top.sv", options=options)
    data = text.encode()
    assert sites
    for site in sites:
        guarded = data[site.guard_start:site.guard_end].decode()
        assert data[site.start:site.end].decode() == site.original
        assert "`" not in guarded, f"{site.operator} at line {site.line} covers a macro use: {guarded!r}"
    full = [s for s in sites if s.line == 13]  # assign full = overflow || (q == `ACC_ONES(WIDTH));
    assert {s.original for s in full} >= {"overflow"}  # the operand without a macro is still mutated


def test_config_include_errors_name_the_field(tmp_path: Path) -> None:
    root = runner_project(tmp_path)
    design = "design: {sources: [rtl/acc_core.sv, rtl/acc_top.sv], top: acc_top}\n"
    tests = "tests: {modules: [tests.test_acc], dir: sim_run}\n"
    cases = {
        "build: {includes: [nowhere]}\n": r"hwtp.yaml:3: build.includes.0: folder 'nowhere' does not exist",
        "build: {includes: [..]}\n": r"hwtp.yaml:3: build.includes.0: '..' is outside",
        "build: {defines: {ACC_INIT: 0}}\n": r"hwtp.yaml:1: design.sources: .*acc_defs.svh.*build.includes",
    }
    for build, message in cases.items():
        (root / "hwtp.yaml").write_text(design + tests + build)
        with pytest.raises(ConfigError, match=message):
            load_ci(root / "hwtp.yaml")
    (root / "hwtp.yaml").write_text(design + "tests: {modules: [tests.test_acc], dir: [x]}\n")
    with pytest.raises(ConfigError, match=r"hwtp.yaml:2: tests.dir: expected a folder"):
        load_ci(root / "hwtp.yaml")
    (root / "hwtp.yaml").write_text(design + tests + "build: {includes: [include], defines: {ACC_INIT: 0}}\n")
    config = load_ci(root / "hwtp.yaml")
    assert [h.path for h in config.build.headers] == ["include/acc_defs.svh"]
    assert config.test_dir == root / "sim_run" and not config.test_dir.exists()  # made by the first run


# --------------------------------------------------------------------------- simulator: adopt, shard, gate


@pytest.mark.sim
def test_runner_project_adopted_sharded_baselined_and_annotated(tmp_path: Path, run_cli: Run_) -> None:
    root = runner_project(tmp_path)
    code, out, _ = run_cli("ci", "init", root)
    assert code == 0 and "from tests/test_runner.py" in out and "not understood" not in out, out
    config = load_ci(root / "hwtp.yaml")
    assert config.test_modules == ("tests.test_acc",) and config.test_dir == root / "sim_run"
    assert config.build.includes == ("include",) and config.build.parameters == (("WIDTH", "6"),)
    cfg = ("--config", root / "hwtp.yaml", "-n", "8", "--seed", "0", "-j", "2", "--min-score", "0")
    shards = [tmp_path / "s1.json", tmp_path / "s2.json"]
    assert run_cli("ci", *cfg, "--shard", "1/2", "--json", shards[0])[0] == 0
    assert run_cli("ci", *cfg, "--shard", "2/2", "--json", shards[1], "--no-shared")[0] == 0
    baseline = tmp_path / "baseline.json"
    code, out, _ = run_cli("ci", "merge", *shards, "--config", root / "hwtp.yaml", "--min-score", "0",
                           "--write-baseline", baseline, "--json", tmp_path / "all.json")
    assert code == 0, out
    report = json.loads((tmp_path / "all.json").read_text())
    mutants = report["mutants"]
    assert len(mutants) == 8 and report["counts"]["error"] == 0 and report["counts"]["killed"] > 0
    assert {m["file"] for m in mutants} <= {"rtl/acc_core.sv", "rtl/acc_top.sv"}
    for m in mutants:  # every mutant's text is the file's own: none inside a macro or a header
        line = (root / m["file"]).read_text().splitlines()[m["line"] - 1]
        assert line.strip() == m["golden_line"] and m["original"] in line
    survivors = [m for m in mutants if m["status"] == "survived"]
    assert survivors, "the weak testbench leaves survivors"
    # today's survivors accepted: the gate passes; one of them taken out of the baseline is new: it fails
    merge = ("ci", "merge", *shards, "--config", root / "hwtp.yaml", "--min-score", "0", "--annotations")
    code, out, _ = run_cli(*merge, "--baseline", baseline)
    assert code == 0 and "::warning" not in out
    accepted = json.loads(baseline.read_text())
    accepted["survivors"] = accepted["survivors"][1:]
    baseline.write_text(json.dumps(accepted))
    code, out, _ = run_cli(*merge, "--baseline", baseline)
    assert code == 1
    assert out.count("::warning file=") == 1
    assert re.search(r"::warning file=\S*rtl/acc_(core|top)\.sv,line=\d+,col=\d+", out)


@pytest.mark.sim
def test_makefile_project_adopted(tmp_path: Path, run_cli: Run_) -> None:
    root = makefile_project(tmp_path)
    code, out, _ = run_cli("ci", "init", root)
    assert code == 0 and "from Makefile" in out and "not understood" not in out, out
    config = load_ci(root / "hwtp.yaml")
    assert config.sources == ("hdl/cnt_core.v", "hdl/cnt_top.v") and config.top == "cnt_top"
    assert config.build.includes == ("inc",) and config.build.defines == (("CNT_STEP", "1"),)
    assert config.build.parameters == (("WIDTH", "5"),) and config.test_paths == (root / "tb",)
    code, out, _ = run_cli("ci", "--config", root / "hwtp.yaml", "-n", "6", "--seed", "1", "-j", "2",
                           "--min-score", "0", "--json", tmp_path / "r.json")
    assert code == 0, out
    report = json.loads((tmp_path / "r.json").read_text())
    assert len(report["mutants"]) == 6 and report["counts"]["error"] == 0
    assert report["golden"]["tests"] == ["test_cnt.test_counts_up"]
