"""hwtp ci: config, reports, export-tests, and the gate on a real cocotb testbench.

The simulator tests copy the shipped counter_en_load into a temporary project with a weak
cocotb testbench written here. They all use the same 12 mutants (seed 4), so the schemata is
built once per machine (shared build cache); the --since test, which mutates other lines
anyway, uses the other layout (sources listed in hwtp.yaml).
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from hwtp.ci.exporttests import render
from hwtp.ci.mutation import CiReport, MutantResult, Status
from hwtp.ci.reports import junit, lcov, markdown, survivors_table
from hwtp.ci.runs import Run, TestOutcome, TestStatus
from hwtp.config import load_ci
from hwtp.errors import ConfigError
from hwtp.plans.format import parse_plan
from hwtp.rtl.design import load_design, shipped_root
from hwtp.sim import plan_steps
from hwtp.sim.backends import NO_OPTIONS, BuildOptions, backend_names
from hwtp.sim.runner import EvalStatus

Run_ = Callable[..., tuple[int, str, str]]
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ci"
MUTANTS = ("-n", "12", "--seed", "4", "-j", "2")

WEAK_TB = '''
import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge, Timer


async def reset(dut):
    Clock(dut.clk, 10, unit="ns").start(start_high=False)
    for name in ("en", "load", "up", "d"):
        getattr(dut, name).value = 0
    dut.rst_n.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    dut.rst_n.value = 1


@cocotb.test()
async def counts_up(dut):
    await reset(dut)
    dut.en.value = 1
    dut.up.value = 1
    for _ in range(3):
        await RisingEdge(dut.clk)
    await Timer(1, "ns")
    q = int(dut.q.value)
    if q == HANG_ON:
        while True:  # waits forever: only the mutant that counts 0, 255, 254, 253 gets here
            await Timer(1, "ns")
    assert q == EXPECTED, f"q = {q} after three enabled cycles"
'''


def _project(tmp_path: Path, expected: int = 3, hang_on: int = -1, folder: bool = False) -> Path:
    """A user project: counter_en_load's RTL, a weak cocotb testbench and hwtp.yaml."""
    root = tmp_path / "proj"
    source = shipped_root() / "counter_en_load"
    shutil.copytree(source, root / "counter_en_load")
    (root / "tb").mkdir()
    (root / "tb" / "test_weak.py").write_text(
        WEAK_TB.replace("EXPECTED", str(expected)).replace("HANG_ON", str(hang_on)), encoding="utf-8")
    design = ("design: {folder: counter_en_load}\n" if folder else
              "design:\n  sources: [counter_en_load/rtl/counter_en_load.v]\n  top: counter_en_load\n")
    tests = "tests:\n  modules: [test_weak]\n  paths: [tb]\n"
    (root / "hwtp.yaml").write_text(design + tests, encoding="utf-8")
    return root


# --------------------------------------------------------------------------- strict checkers

_SUREFIRE_TIME = re.compile(r"^(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]{0,3})?$")
_JUNIT = {  # element: (required attributes, allowed attributes, allowed children) per junit-10.xsd
    "testsuites": (set(), {"name", "time", "tests", "failures", "errors"}, {"testsuite"}),
    "testsuite": ({"name", "tests", "failures", "errors"},
                  {"name", "tests", "failures", "errors", "group", "time", "skipped", "timestamp", "hostname",
                   "id", "package", "file", "log", "url", "version"},
                  {"testsuite", "properties", "testcase", "system-out", "system-err"}),
    "properties": (set(), set(), {"property"}),
    "property": ({"name", "value"}, {"name", "value"}, set()),
    "testcase": ({"name"}, {"name", "time", "classname", "group"},
                 {"skipped", "error", "failure", "system-out", "system-err"}),
    "failure": (set(), {"type", "message"}, set()),
    "error": (set(), {"type", "message"}, set()),
    "skipped": (set(), {"type", "message"}, set()),
    "system-out": (set(), set(), set()),
    "system-err": (set(), set(), set()),
}


def check_junit(text: str) -> ElementTree.Element:
    """Validate against the common JUnit schema (junit-10.xsd), strictly; return the root."""
    root = ElementTree.fromstring(text)
    assert root.tag == "testsuites"

    def walk(el: ElementTree.Element) -> None:
        assert el.tag in _JUNIT, f"element {el.tag} is not in the schema"
        required, allowed, children = _JUNIT[el.tag]
        assert required <= set(el.attrib), f"{el.tag} lacks {required - set(el.attrib)}"
        assert set(el.attrib) <= allowed, f"{el.tag} has attributes {set(el.attrib) - allowed}"
        if "time" in el.attrib and el.tag in ("testsuites", "testsuite"):
            assert _SUREFIRE_TIME.match(el.attrib["time"]), el.attrib["time"]
        if el.tag in ("testsuites", "testsuite", "testcase", "properties"):
            assert not (el.text or "").strip(), f"{el.tag} holds text"
        for child in el:
            assert child.tag in children, f"{child.tag} inside {el.tag}"
            assert not (child.tail or "").strip()
            walk(child)

    walk(root)
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        assert int(suite.get("tests", "-1")) == len(cases)
        assert int(suite.get("failures", "-1")) == sum(1 for c in cases if c.find("failure") is not None)
        assert int(suite.get("errors", "-1")) == sum(1 for c in cases if c.find("error") is not None)
        assert int(suite.get("skipped", "0")) == sum(1 for c in cases if c.find("skipped") is not None)
    return root


def parse_lcov(text: str, base: Path) -> dict[str, dict[str, dict[int, Any]]]:
    """A strict lcov tracefile reader: {file: {"DA": {line: hits}, "BRDA": {line: [taken]}}}."""
    out: dict[str, dict[str, dict[int, Any]]] = {}
    current: dict[str, dict[int, Any]] | None = None
    totals: dict[str, int] = {}
    lines_of: list[str] = []
    assert text.endswith("\n")
    for n, line in enumerate(text.splitlines(), start=1):
        key, _, value = line.partition(":")
        if line == "end_of_record":
            assert current is not None, f"line {n}: end_of_record outside a record"
            da, brda = current["DA"], current["BRDA"]
            assert totals == {"LF": len(da), "LH": sum(1 for h in da.values() if h),
                              "BRF": sum(len(v) for v in brda.values()),
                              "BRH": sum(1 for v in brda.values() for t in v if t not in ("-", 0))}, totals
            current, totals = None, {}
        elif key == "TN":
            assert current is None
        elif key == "SF":
            assert current is None, f"line {n}: SF inside a record"
            path = base / value
            assert path.is_file(), value
            lines_of = path.read_text().splitlines()
            current = out.setdefault(value, {"DA": {}, "BRDA": {}})
        elif key == "DA":
            assert current is not None and "LF" not in totals
            ln, hits = (int(x) for x in value.split(","))
            assert 1 <= ln <= len(lines_of) and hits >= 0 and ln not in current["DA"]
            current["DA"][ln] = hits
        elif key == "BRDA":
            assert current is not None and not current["DA"] and "BRF" not in totals
            ln_s, block, branch, taken = value.split(",")
            assert 1 <= int(ln_s) <= len(lines_of) and int(block) >= 0 and int(branch) >= 0
            assert taken == "-" or int(taken) >= 0
            current["BRDA"].setdefault(int(ln_s), []).append(taken if taken == "-" else int(taken))
        elif key in ("LF", "LH", "BRF", "BRH"):
            assert current is not None and key not in totals
            totals[key] = int(value)
        else:
            raise AssertionError(f"line {n}: unexpected lcov line {line!r}")
    assert current is None, "record not closed"
    return out


# --------------------------------------------------------------------------- fast tests


def _fake_report(tmp_path: Path) -> CiReport:
    rtl = tmp_path / "rtl"
    rtl.mkdir()
    (rtl / "top.v").write_text("module top(input a, output y);\n  assign y = a & 1'b1;\nendmodule\n")
    golden = Run(EvalStatus.PASS, (TestOutcome("t", "test_top", TestStatus.PASSED),), 0.5)

    def mutant(i: int, status: Status, line: int = 2) -> MutantResult:
        return MutantResult(f"m{i:04d}", "logical.and_to_or", "rtl/top.v", line, 14, "&", "|", status, 1.25,
                            ("test_top.t",) if status == Status.KILLED else (), "stopped after 5 s <&>",
                            "assign y = a & 1'b1;", "assign y = a | 1'b1;", "--- a\n+++ b\n-x & y\n+x | y\n")

    mutants = (mutant(1, Status.KILLED), mutant(2, Status.SURVIVED), mutant(3, Status.TIMEOUT),
               mutant(4, Status.ERROR, 1), mutant(5, Status.EQUIVALENT), mutant(6, Status.KILLED, 3))
    return CiReport("top", "top", tmp_path, mutants, golden, (("m0007", "does not compile"),), min_score=0.5)


def test_score_leaves_out_equivalent_and_indeterminate(tmp_path: Path) -> None:
    report = _fake_report(tmp_path)
    c = report.counts
    assert (c["valid"], c["killed"], c["survived"], c["indeterminate"], c["equivalent"]) == (6, 2, 1, 2, 1)
    assert report.score == pytest.approx(2 / 3)
    assert report.formula == "killed 2 / (valid 6 - equivalent 1 - not_elaborated 0 - indeterminate 2)"
    assert report.gate_passed
    assert "m0002" in survivors_table(report) and "m0001" not in survivors_table(report)


def test_junit_lcov_markdown_of_a_report(tmp_path: Path) -> None:
    report = _fake_report(tmp_path)
    root = check_junit(junit(report))
    cases = {c.get("name", "").split()[0]: c for c in root.iter("testcase")}
    assert len(cases) == 6
    failure = cases["m0002"].find("failure")
    assert failure is not None and "assign y = a | 1'b1;" in failure.get("message", "")
    assert failure.text and "+x | y" in failure.text
    assert cases["m0003"].find("skipped") is not None and cases["m0001"].find("failure") is None
    parsed = parse_lcov(lcov(report, tmp_path), tmp_path)
    assert parsed["rtl/top.v"]["DA"] == {2: 0, 3: 1}  # line 2 has a survivor; line 1 only an error
    assert parsed["rtl/top.v"]["BRDA"][2] == [1, 0, "-"]
    text = markdown(report)
    assert "| m0002 |" in text and "&#124;" in text and "66.7%" in text


def test_config_errors_name_file_line_and_field(tmp_path: Path) -> None:
    (tmp_path / "top.v").write_text("module top(input a, output y); assign y = a; endmodule\n")
    cfg = tmp_path / "hwtp.yaml"
    cases = {
        "design:\n  sources: [top.v]\n  top: top\ntests:\n  modules: [t]\n  bogus: 1\n":
            ":6: tests.bogus: unknown field",
        "design:\n  sources: [nope.v]\n  top: top\ntests: {modules: [t]}\n":
            ":2: design.sources.0: file 'nope.v'",
        "design:\n  sources: [top.v]\n  top: top\ntests: {modules: []}\n": ":4: tests.modules: required",
        "design:\n  sources: [top.v]\n  top: top\ntests: {modules: [t]}\nmin_score: 2\n": ":5: min_score:",
        "design:\n  sources: [top.v]\ntests: {modules: [t]}\n": ":1: design.top: required",
        "design:\n  sources: [../x.v]\n  top: top\ntests: {modules: [t]}\n": ":2: design.sources.0:",
        # clock and reset: the limits and messages of design.yaml (hwtp.rtl.design.clock_from/reset_from)
        "design:\n  sources: [top.v]\n  top: top\n  reset: {port: a, cycles: 1001}\ntests: {modules: [t]}\n":
            ":4: design.reset.cycles: expected an integer from 1 to 1000",
        "design:\n  sources: [top.v]\n  top: top\n  clock: {port: a, period_ns: 0}\ntests: {modules: [t]}\n":
            ":4: design.clock.period_ns: expected a positive number",
        "design:\n  sources: [top.v]\n  top: top\n  clock: {port: a, hz: 5}\ntests: {modules: [t]}\n":
            ":4: design.clock.hz: unknown field (valid: port, period_ns)",
        "design:\n  sources: [top.v]\n  top: top\n  reset: a\ntests: {modules: [t]}\n":
            ":4: design.reset: expected {port: NAME, active: low|high, cycles: N}",
        "- design\n": ":1: (document): expected a mapping",
        "design: [\n": ":2: not valid YAML:",
    }
    for text, wanted in cases.items():
        cfg.write_text(text)
        with pytest.raises(ConfigError) as err:
            load_ci(cfg)
        assert f"{cfg}{wanted}" in str(err.value), (text, str(err.value))
    cfg.write_text("design:\n  sources: [top.v]\n  top: top\n  reset: {port: a}\ntests: {modules: [t]}\n")
    reset = load_ci(cfg).reset
    assert reset is not None and (reset.active, reset.cycles) == ("high", 2)  # `a` names no active-low reset


def test_build_section_gives_build_options_in_no_simulator_syntax(tmp_path: Path) -> None:
    (tmp_path / "top.v").write_text("module top(input a, output y); assign y = a; endmodule\n")
    cfg = tmp_path / "hwtp.yaml"
    head = "design:\n  sources: [top.v]\n  top: top\ntests: {modules: [t]}\n"
    cfg.write_text(head + "build:\n  simulator: icarus\n  args: [-Wall]\n  defines: {WIDTH: 8}\n"
                   "  parameters: {DEPTH: 4}\n")
    config = load_ci(cfg)
    assert config.simulator == "icarus"
    assert config.build == BuildOptions(defines=(("WIDTH", "8"),), parameters=(("DEPTH", "4"),), args=("-Wall",))
    assert load_ci(EXAMPLE / "hwtp.yaml").build == NO_OPTIONS
    cfg.write_text(head + "build:\n  simulator: modelsim\n")
    with pytest.raises(ConfigError, match=rf"{cfg}:6: build.simulator: expected one of {', '.join(backend_names())}"):
        load_ci(cfg)


def test_example_config_loads_and_ci_init_finds_the_project(tmp_path: Path, run_cli: Run_) -> None:
    config = load_ci(EXAMPLE / "hwtp.yaml")
    assert config.top == "sat_counter" and config.test_modules == ("test_sat_counter",)
    assert config.load_design().clock is not None
    shutil.copytree(EXAMPLE / "rtl", tmp_path / "rtl")
    shutil.copytree(EXAMPLE / "tests", tmp_path / "tests")
    code, _, err = run_cli("ci", "init", tmp_path)
    assert code == 0, err
    found = load_ci(tmp_path / "hwtp.yaml")
    assert (found.top, found.test_modules) == ("sat_counter", ("test_sat_counter",))
    assert found.sources == ("rtl/sat_counter.v",)
    assert found.clock is not None and found.reset is not None and found.reset.active == "low"
    assert run_cli("ci", "init", tmp_path)[0] == 2  # refuses to overwrite


def test_exported_tests_carry_no_plan_text_as_code() -> None:
    design = load_design("counter_en_load")
    plan = parse_plan(
        'tests:\n  - name: evil\n    description: "x\\nimport os\\nos.system(\\"true\\")  \\"\\"\\""\n'
        "    steps:\n      - drive: {d: \"8'hA5\", load: 1}\n      - wait: 1\n"
        "      - expect: {q: \"8'b1010_01xx\", tc: 0}\n", "evil.yaml")
    text = render(design, [("evil.yaml", plan)])
    tree = ast.parse(text)
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert {getattr(n, "module", None) or n.names[0].name for n in imports} == {
        "cocotb", "cocotb.clock", "cocotb.triggers", "collections.abc", "typing"}
    runner = Path(plan_steps.__file__).read_text().split('"""\n', 1)[1].lstrip()
    assert runner.startswith("from ") and runner in text  # the harness's step code, copied unchanged
    assert "t.drive(d=0xa5, load=1)" in text
    assert "await t.expect(3, q=(0xa4, 0b11111100), tc=0)" in text
    assert all("os.system" not in ln for ln in text.splitlines() if not ln.strip().startswith("#"))
    assert "    # x import os os.system( true )" in text


# --------------------------------------------------------------------------- simulator tests


@pytest.mark.sim
def test_weak_testbench_fails_the_gate_until_exported_plans_are_added(tmp_path: Path, run_cli: Run_) -> None:
    root = _project(tmp_path, folder=True)
    out = tmp_path / "out"
    args = ("ci", "--config", root / "hwtp.yaml", *MUTANTS, "--min-score", "0.9", "--junit", out / "weak.xml",
            "--lcov", out / "weak.info", "--json", out / "weak.json", "--markdown", out / "weak.md")
    code, text, err = run_cli(*args)
    assert code == 1, text + err
    weak = json.loads((out / "weak.json").read_text())
    survivors = [m["id"] for m in weak["mutants"] if m["status"] == "survived"]
    assert weak["counts"]["valid"] == 12 and weak["score"] < 0.9 and survivors
    assert all(s in text for s in survivors) and "FAILED" in text
    cases = check_junit((out / "weak.xml").read_text()).iter("testcase")
    failed = sorted(c.get("name", "").split()[0] for c in cases if c.find("failure") is not None)
    assert failed == sorted(survivors)
    parsed = parse_lcov((out / "weak.info").read_text(), Path.cwd())  # paths: cwd-relative or absolute
    taken = [t for f in parsed.values() for v in f["BRDA"].values() for t in v]
    assert len(taken) == 12 and taken.count(0) == len(survivors)
    assert "### Survivors" in (out / "weak.md").read_text()

    plans = root / "tb" / "test_hwtp_plans.py"
    code, text, err = run_cli("export-tests", shipped_root() / "counter_en_load" / "plans" / "reference.yaml",
                              "-o", plans)
    assert code == 0, err
    code, text, err = run_cli(*args[:-8], "--json", out / "strong.json", "--junit", out / "strong.xml",
                              "--include-plans", plans)
    assert code == 0, text + err
    strong = json.loads((out / "strong.json").read_text())
    assert strong["score"] >= 0.9 > weak["score"]
    assert strong["counts"]["valid"] == weak["counts"]["valid"]
    assert len(strong["golden"]["tests"]) == 1 + 7
    check_junit((out / "strong.xml").read_text())


@pytest.mark.sim
def test_testbench_failing_on_golden_exits_2_with_its_failure(tmp_path: Path, run_cli: Run_) -> None:
    root = _project(tmp_path, expected=4, folder=True)  # the weak test's layout: the same build
    code, out, err = run_cli("ci", "--config", root / "hwtp.yaml", *MUTANTS)
    assert code == 2, out + err
    assert "fail on the golden design" in err and "test_weak.counts_up" in err
    assert "q = 3 after three enabled cycles" in err and "hwtp/ci/mutation.py" not in err


@pytest.mark.sim
def test_testbench_hanging_on_one_mutant_makes_it_indeterminate(tmp_path: Path, run_cli: Run_) -> None:
    root = _project(tmp_path, hang_on=253, folder=True)
    out = tmp_path / "r.json"
    code, text, err = run_cli("ci", "--config", root / "hwtp.yaml", *MUTANTS, "--timeout", "12",
                              "--json", out)
    assert code == 0, text + err
    report = json.loads(out.read_text())
    timeouts = [m for m in report["mutants"] if m["status"] == "timeout"]
    assert [m["operator"] for m in timeouts] == ["arithmetic.add_to_sub"]
    c = report["counts"]
    assert c["indeterminate"] == 1 and c["killed"] + c["survived"] == c["valid"] - 1
    assert report["score"] == pytest.approx(c["killed"] / (c["valid"] - 1))
    assert "indeterminate (1, not counted)" in text


@pytest.mark.sim
@pytest.mark.parametrize("name", ["adder_carry", "fifo_sync"])
def test_exported_reference_tests_pass_on_golden(name: str, tmp_path: Path) -> None:
    """The exported module keeps the plan timing on a combinational and an async-reset design."""
    from hwtp.ci.config import CiConfig
    from hwtp.ci.exporttests import export_tests
    from hwtp.ci.runs import run_tests
    from hwtp.sim.backends import get_backend
    from hwtp.sim.buildcache import ensure_build

    design = load_design(name)
    plan = parse_plan((shipped_root() / name / "plans" / "reference.yaml").read_text(), "reference.yaml")
    export_tests(design, [shipped_root() / name / "plans" / "reference.yaml"], tmp_path / "test_ref.py")
    config = CiConfig(root=design.root, top=design.top, design_folder=design.root, test_modules=("test_ref",),
                      test_paths=(tmp_path,))
    build = ensure_build(get_backend("verilator"), design.sources, design.top)
    run = run_tests(build, config, 0, tmp_path / "run", 120.0)
    assert run.status == "pass", [(t.name, t.message) for t in run.failed] or run.reason
    assert len(run.tests) == len(plan.tests)


@pytest.mark.sim
def test_since_mutates_only_changed_lines(tmp_path: Path, run_cli: Run_) -> None:
    root = _project(tmp_path)
    rtl = root / "counter_en_load" / "rtl" / "counter_en_load.v"
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run([*git, *argv], check=True, capture_output=True)
    lines = rtl.read_text().splitlines(keepends=True)
    changed = next(i for i, ln in enumerate(lines, start=1) if "q <= q + ONE" in ln)
    lines[changed - 1] = lines[changed - 1].replace("// count up", "// count up (edited)")
    rtl.write_text("".join(lines))
    out = tmp_path / "since.json"
    code, text, err = run_cli("ci", "--config", root / "hwtp.yaml", "--since", "HEAD", "-n", "3", "-j", "2",
                              "--json", out)
    assert code == 0, text + err
    report = json.loads(out.read_text())
    assert report["since"] == "HEAD" and report["counts"]["valid"] >= 1
    assert {m["line"] for m in report["mutants"]} == {changed}
