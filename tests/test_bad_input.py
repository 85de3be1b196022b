"""Bad input is refused before any work: exit 2, a message naming file, line and field, and no
traceback (tracebacks only with --verbose)."""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hwtp.errors import DesignError, PlanError
from hwtp.plans.format import CYCLE_LIMIT, parse_plan, validate
from hwtp.rtl.design import SourceFile, load_design

Run = Callable[..., tuple[int, str, str]]
PLAN = "tests:\n  - name: t\n    steps:\n      - wait: 1\n"


def refused(result: tuple[int, str, str], *needles: str) -> str:
    code, _out, err = result
    assert code == 2, err
    assert "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


def stdin_bytes(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))


# --------------------------------------------------------------------------- designs


def test_a_file_without_a_module_is_refused(tmp_path: Path, run_cli: Run) -> None:
    rtl = tmp_path / "w.v"
    rtl.write_text("wire x;\n")
    plan = tmp_path / "p.yaml"
    plan.write_text(PLAN)
    refused(run_cli("sim", rtl, plan), f"{rtl}: no module found")
    refused(run_cli("mutate", rtl, "-o", tmp_path / "m"), "no module found")
    assert not (tmp_path / "m").exists()
    refused(run_cli("sim", rtl, plan, "--top", "w"), "no module named 'w'", "modules: none")
    code, _, err = run_cli("--verbose", "sim", rtl, plan)
    assert code == 2 and "Traceback" in err  # tracebacks only on request


def test_rtl_that_is_not_utf8_is_refused_with_its_line(tmp_path: Path, run_cli: Run) -> None:
    rtl = tmp_path / "c.v"
    rtl.write_bytes(b"module c(input [3:0] a, output [3:0] y);\n// caf\xe9\nassign y = a;\nendmodule\n")
    refused(run_cli("sim", rtl, tmp_path / "none.yaml"), f"{rtl}:2: not UTF-8 text (byte 0xe9 at line 2")
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "design.yaml").write_text("name: c\ntop: c\nsources: [c.v]\n")
    (folder / "c.v").write_bytes(rtl.read_bytes())
    with pytest.raises(DesignError, match=r"c\.v:2: not UTF-8 text .*sources\[0\] of .*design\.yaml"):
        load_design(folder)


COUNTER_V = "module c(input clk, input reset, output reg q); always @(posedge clk) q <= reset ? 1'b0 : ~q; endmodule\n"


@pytest.mark.parametrize(
    ("controls", "message"),
    [
        ("clock: {port: clk, period_ns: -1}\n", "design.yaml:4: clock.period_ns: expected a positive number"),
        ("clock: {port: clk, period_ns: .inf}\n", "design.yaml:4: clock.period_ns: expected a positive number"),
        ("clock: {port: clk}\nreset: {port: reset, cycles: 0}\n",
         "design.yaml:5: reset.cycles: expected an integer from 1 to 1000"),
        ("clock: {port: clk}\nreset: {port: reset, active: hi}\n",
         "design.yaml:5: reset.active: expected 'low' or 'high'"),
        ("clock: {port: clk}\nreset: {port: reset, level: 1}\n",
         "design.yaml:5: reset.level: unknown field (valid: port, active, cycles)"),
        ("clock: clk\n", "design.yaml:4: clock: expected {port: NAME, period_ns: N}"),
    ],
)
def test_manifest_clock_and_reset_limits(tmp_path: Path, controls: str, message: str) -> None:
    (tmp_path / "c.v").write_text(COUNTER_V)
    (tmp_path / "design.yaml").write_text(f"name: c\ntop: c\nsources: [c.v]\n{controls}")
    with pytest.raises(DesignError) as err:
        load_design(tmp_path)
    assert str(err.value).endswith(message) and str(err.value).startswith(str(tmp_path))


def test_manifest_reset_without_a_level_takes_it_from_its_name(tmp_path: Path) -> None:
    (tmp_path / "c.v").write_text(COUNTER_V)
    (tmp_path / "design.yaml").write_text("name: c\ntop: c\nsources: [c.v]\nclock: {port: clk}\nreset: {port: reset}\n")
    design = load_design(tmp_path)
    assert design.reset is not None and (design.reset.active, design.reset.cycles) == ("high", 2)
    bare = load_design(tmp_path / "c.v")  # guessed from the names: the same reset
    assert bare.clock == design.clock and bare.reset == design.reset


# --------------------------------------------------------------------------- plans


def test_plan_stdin_and_files_that_are_not_utf8(tmp_path: Path, run_cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = b"tests:\n  - name: t\xff\n"
    stdin_bytes(monkeypatch, bad)
    refused(run_cli("sim", "counter_en_load", "-"), "<stdin>:2: not UTF-8 text (byte 0xff at line 2, column 12)")
    stdin_bytes(monkeypatch, bad)  # checked before the mutant folder is even read
    refused(run_cli("score", tmp_path / "no-mutants", "--plans", "-"), "<stdin>:2: not UTF-8 text")
    path = tmp_path / "bad.yaml"
    path.write_bytes(bad)
    refused(run_cli("sim", "counter_en_load", path), f"{path}:2: not UTF-8 text")


def test_waits_over_the_cycle_limit_are_refused_at_validation(shipped: dict[str, Any]) -> None:
    with pytest.raises(PlanError, match=rf"plan:4: .*wait.*from 1 to {CYCLE_LIMIT} \(the simulator's cycle limit"):
        parse_plan(f"tests:\n  - name: t\n    steps:\n      - wait: {CYCLE_LIMIT + 1}\n")
    two = parse_plan(f"tests:\n  - name: t\n    steps:\n      - wait: {CYCLE_LIMIT - 10}\n      - wait: 20\n")
    with pytest.raises(PlanError, match=rf"simulates {CYCLE_LIMIT + 12} cycles.*limit of {CYCLE_LIMIT} cycles"):
        validate(two, shipped["counter_en_load"])  # its reset adds 2 cycles
    with pytest.raises(PlanError, match=r"plan:4: test 't' step 1 \(wait\): wait 500 is over .* limit of 100 cycles"):
        validate(parse_plan("tests:\n  - name: t\n    steps:\n      - wait: 500\n"), shipped["counter_en_load"], 100)


# --------------------------------------------------------------------------- trust model

ESCAPES = """\
// $system("rm -rf ~") in a comment is only text
`define RUN $system
module t(input clk, output reg [3:0] q);
  initial begin
    $display("$system in a string is only text");
    `RUN("touch pwned");
  end
  always @(posedge clk) q <= q + 1;
endmodule
"""


@pytest.mark.parametrize(
    ("body", "line", "name"),
    [
        ('  initial $system("touch pwned");\n', 3, "$system runs a shell command"),
        ('  integer fd;\n  initial fd = $fopen("/tmp/x", "w");\n', 4, "$fopen opens a file"),
        ('  reg [3:0] m [0:1];\n  initial $writememh("/tmp/x", m);\n', 4, "$writememh writes a file"),
        ('  initial $dumpfile("/tmp/x.vcd");\n', 3, "$dumpfile writes a waveform file"),
        ('  initial $c("system(0);");\n', 3, "$c runs C++ code"),
        ('  import "DPI-C" function int system(input string cmd);\n', 3, 'import "DPI-C" calls host C code'),
    ],
)
def test_rtl_escaping_the_simulation_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, line: int, name: str
) -> None:
    monkeypatch.delenv("HWTP_ALLOW_SYSTEM_TASKS", raising=False)
    rtl = tmp_path / "t.v"
    rtl.write_text(f"module t(input clk, output reg [3:0] q);\n  always @(posedge clk) q <= q + 1;\n{body}endmodule\n")
    with pytest.raises(DesignError, match=rf"{rtl}:{line}: {re.escape(name)}.*--allow-system-tasks"):
        load_design(rtl)
    monkeypatch.setenv("HWTP_ALLOW_SYSTEM_TASKS", "1")
    assert load_design(rtl).top == "t"


def test_comments_strings_and_macros_are_read_as_the_compiler_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hwtp.rtl.design import check_trusted

    monkeypatch.delenv("HWTP_ALLOW_SYSTEM_TASKS", raising=False)
    with pytest.raises(DesignError, match=rf"{tmp_path}/t\.v:6: \$system runs a shell command"):
        check_trusted([SourceFile("t.v", ESCAPES)], tmp_path, "t")  # the macro's use, not its text
    clean = ESCAPES.replace('    `RUN("touch pwned");\n', "")
    check_trusted([SourceFile("t.v", clean)], tmp_path, "t")
    for name in ("counter_en_load", "fifo_sync"):  # shipped designs
        design = load_design(name)
        check_trusted(design.sources, design.root, design.top)


def test_allow_system_tasks_flag_is_per_command(tmp_path: Path, run_cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HWTP_ALLOW_SYSTEM_TASKS", raising=False)
    rtl = tmp_path / "t.v"
    rtl.write_text(ESCAPES)
    plan = tmp_path / "p.yaml"
    plan.write_text("tests:\n  - name: t\n    steps:\n      - expect: {nosuch: 1}\n")
    refused(run_cli("sim", rtl, plan), f"{rtl}:6: $system runs a shell command", "HWTP_ALLOW_SYSTEM_TASKS=1")
    # with the flag the design loads: what stops the command now is the plan, before any build
    refused(run_cli("sim", rtl, plan, "--allow-system-tasks"), "unknown port 'nosuch'")
    refused(run_cli("sim", rtl, plan), "$system runs a shell command")  # not left on for the next command
    refused(run_cli("mutate", rtl, "-o", tmp_path / "m"), "$system")
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / "design.yaml").write_text("name: t\ntop: t\nsources: [rtl/t.v]\n")
    (folder / "rtl").mkdir()
    (folder / "rtl" / "t.v").write_text(ESCAPES)
    refused(run_cli("run", folder, "-o", tmp_path / "r"), f"{folder.resolve()}/rtl/t.v:6: $system")
    assert not (tmp_path / "r").exists()


# --------------------------------------------------------------------------- hwtp run / export


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--preset", "grpo-smoo"], "--preset: unknown advantage preset 'grpo-smoo' (valid: grpo-smu"),
        (["--endpoint", "localhost:8000/v1", "--model", "m"], "--endpoint: 'localhost:8000/v1' is not an http(s) URL"),
        (["--endpoint", "http://127.0.0.1:port/v1", "--model", "m"], "is not a valid URL"),
        (["--policy", "openai"], "needs an endpoint and a model"),
        (["-G", "0"], "-G: must be at least 1"),
    ],
)
def test_run_options_are_checked_before_any_work(tmp_path: Path, run_cli: Run, args: list[str], message: str) -> None:
    refused(run_cli("run", "counter_en_load", "-o", tmp_path / "r", *args), message)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("  formats: [jsonl, parket]\n", "hwtp.yaml:3: run.formats: unknown export format 'parket'"),
        ("  preset: foo\n", "hwtp.yaml:3: run.preset: unknown advantage preset 'foo'"),
        ("  states: 0\n", "hwtp.yaml:3: run.states: must be at least 1"),
        ("  policy: openai\n  endpoint: ftp://x\n  model: m\n", "hwtp.yaml:4: run.endpoint: 'ftp://x' is not an"),
        ("  policy: replay\n", "hwtp.yaml:3: run.policy: policy replay needs --from DIR"),
        ("  group_by: states\n", "hwtp.yaml:3: run.group_by: unknown grouping 'states'"),
        ("  designs: [counter_en_lod]\n", "hwtp.yaml:2: run.designs: counter_en_lod: no such file, folder or shipped"),
        ("  temperature: .nan\n", "hwtp.yaml:3: run.temperature: must be a finite number, got nan"),
        ("  top_p: .nan\n", "hwtp.yaml:3: run.top_p: must be a finite number, got nan"),
        ("  G: 1000000000\n", "hwtp.yaml:3: run.G: must be at most 1024 plans per state, got 1000000000"),
    ],
)
def test_hwtp_yaml_errors_name_file_line_and_field(
    tmp_path: Path, run_cli: Run, monkeypatch: pytest.MonkeyPatch, section: str, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    designs = "" if "designs" in section else "  designs: [counter_en_load]\n"
    Path("hwtp.yaml").write_text(f"run:\n{designs}{section}")
    refused(run_cli("run", "-o", "r"), message)
    assert not Path("r").exists()


def test_hwtp_yaml_that_is_not_utf8(tmp_path: Path, run_cli: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("hwtp.yaml").write_bytes(b"run:\n  model: caf\xe9\n")
    refused(run_cli("run", "-o", "r"), "hwtp.yaml:2: not UTF-8 text (byte 0xe9 at line 2, column 13)")
    refused(run_cli("ci", "--config", "hwtp.yaml"), "hwtp.yaml:2: not UTF-8 text")


def test_a_misspelt_design_leaves_no_configuration_behind(tmp_path: Path, run_cli: Run) -> None:
    from hwtp.run.config import RunConfig
    from hwtp.run.loop import check_config
    from hwtp.run.store import open_store

    rundir = tmp_path / "r"
    refused(run_cli("run", "counter_en_lod", "-o", rundir, "--states", "1", "-G", "1"), "counter_en_lod: no such")
    assert not rundir.exists()
    # a folder left by an older hwtp with the misspelt configuration stored and nothing done
    with open_store(rundir) as store:
        store.set_meta("config", RunConfig(designs=("counter_en_lod",)).fingerprint())
    with open_store(rundir) as store:
        check_config(store, RunConfig(designs=("counter_en_load",)), None)  # nothing done yet: accepted
        assert store.get_meta("config")["designs"] == ["counter_en_load"]


@pytest.mark.parametrize("fmt", ["parquet", "verl"])  # verl's rows are parquet too
def test_parquet_without_pyarrow_fails_before_any_simulation(
    tmp_path: Path, run_cli: Run, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    import hwtp.run.loop

    def no_work(*_a: Any, **_k: Any) -> None:
        raise AssertionError("mutate started although parquet cannot be written")

    monkeypatch.setattr(hwtp.run.loop, "mutate_stage", no_work)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # what Python does for a package that is not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    rundir = tmp_path / "r"
    refused(run_cli("run", "counter_en_load", "-o", rundir, "--format", fmt), "pip install 'hwtp[parquet]'")
    assert not rundir.exists()
    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps({"design": "x", "results": []}))
    refused(run_cli("export", scores, "--format", fmt, "-o", tmp_path / "out"), "pip install 'hwtp[parquet]'")
    assert not (tmp_path / "out").exists()


def test_ci_config_names_the_line_of_a_wrong_top_and_the_rtl_checks_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hwtp.config import load_ci
    from hwtp.errors import ConfigError

    monkeypatch.delenv("HWTP_ALLOW_SYSTEM_TASKS", raising=False)
    (tmp_path / "top.v").write_text("module top(input a, output y); assign y = a; endmodule\n")
    cfg = tmp_path / "hwtp.yaml"
    cfg.write_text("design:\n  sources: [top.v]\n  top: tpo\ntests: {modules: [t]}\n")
    with pytest.raises(ConfigError, match=rf"{cfg}:3: design.top: no module named 'tpo' .*modules: top"):
        load_ci(cfg)
    (tmp_path / "top.v").write_text('module top(input a, output y); initial $system("x"); assign y = a; endmodule\n')
    cfg.write_text("design:\n  sources: [top.v]\n  top: top\ntests: {modules: [t]}\n")
    with pytest.raises(DesignError, match=r"top\.v:1: \$system runs a shell command"):
        load_ci(cfg).load_design()


def test_plan_checks_the_endpoint_before_reading_anything(tmp_path: Path, run_cli: Run) -> None:
    refused(
        run_cli("plan", tmp_path / "no-mutants", "-o", tmp_path / "p", "--endpoint", "127.0.0.1:8000", "--model", "m"),
        "--endpoint: '127.0.0.1:8000' is not an http(s) URL",
    )
    assert not (tmp_path / "p").exists()


def test_a_plan_index_that_is_not_utf8(tmp_path: Path) -> None:
    from hwtp.errors import ScoreError
    from hwtp.plans.files import PLAN_INDEX, read_plans

    (tmp_path / PLAN_INDEX).write_bytes(b'{"plan": "p0", "state": "golden"}\n{"plan": "p1\xff"}\n')
    with pytest.raises(ScoreError, match=rf"{PLAN_INDEX}:2: not UTF-8 text"):
        read_plans([str(tmp_path)])
