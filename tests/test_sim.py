"""The harness in the simulator: reference plans, mismatch reports and the timing rules."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from hwtp.plans.format import Plan, Step, TestCase, load_plan_file, parse_plan, validate
from hwtp.plans.values import Value
from hwtp.rtl.design import Design, SourceFile, load_design, shipped_names
from hwtp.sim.backends import NO_OPTIONS, BuildOptions, backend_names, get_backend
from hwtp.sim.buildcache import build_key, ensure_build
from hwtp.sim.job import Evaluation, Job, compile_plan, plan_cycles
from hwtp.sim.runner import EvalResult, run_job
from hwtp.sim.simulate import simulate
from hwtp.sim.wrapper import WRAPPER_TOP, build_sources

pytestmark = pytest.mark.sim


def run_plans(design: Design, *plans: Plan) -> list[EvalResult]:
    """Run several plans on golden in ONE simulator process (the batched engine)."""
    for plan in plans:
        validate(plan, design)
    build = ensure_build(get_backend("verilator"), build_sources(design), WRAPPER_TOP)
    evaluations = tuple(
        Evaluation(f"e{i}", compile_plan(p, design), stop_on_fail=False, cycles=plan_cycles(p, design))
        for i, p in enumerate(plans)
    )
    return run_job(build, Job(design, evaluations))


def break_one_expect(plan: Plan) -> tuple[Plan, str, int, str]:
    """Copy ``plan`` with the last fully-specified expected value of its first test flipped."""
    test = plan.tests[0]
    for index in reversed(range(len(test.steps))):
        step = test.steps[index]
        if step.kind != "expect":
            continue
        for j, (port, value) in enumerate(step.values):
            if value.care is None and not value.negative:
                values = list(step.values)
                values[j] = (port, Value(value.bits ^ 1))
                steps = list(test.steps)
                steps[index] = Step("expect", tuple(values), line=step.line)
                broken = TestCase(test.name, tuple(steps), test.description)
                return Plan((broken, *plan.tests[1:]), plan.reasoning), test.name, index + 1, port
    raise AssertionError("the first test of a reference plan must expect a fully specified value")


@pytest.mark.parametrize("name", shipped_names())
def test_reference_plan_passes_and_a_changed_value_fails(name: str) -> None:
    design = load_design(name)
    reference = load_plan_file(design.root / "plans" / "reference.yaml")
    broken, test_name, step, port = break_one_expect(reference)
    good, bad = run_plans(design, reference, broken)
    assert good.status == "pass", good.first
    assert all(t["passed"] for t in good.tests) and len(good.tests) == len(reference.tests)
    assert bad.status == "fail"
    assert bad.first is not None
    assert (bad.first["test"], bad.first["step"], bad.first["port"]) == (test_name, step, port)


def test_corpus_has_variety(shipped: dict[str, Design]) -> None:
    kinds = [d.kind for d in shipped.values()]
    assert len(shipped) >= 14
    assert kinds.count("combinational") >= 5
    assert kinds.count("sequential") >= 7
    for design in shipped.values():
        assert design.spec.strip(), design.name
        assert (design.root / "plans" / "reference.yaml").is_file()


COUNTER_TIMING = """\
tests:
  - name: registered_output_updates_after_the_edge
    steps:
      - drive: {en: 1}
      - expect: {q: 0}          # the edge has not come yet
      - wait: 1
      - expect: {q: 1}
  - name: registered_output_one_cycle_too_early
    steps:
      - drive: {en: 1}
      - wait: 3
      - expect: {q: 4}          # wrong: 3 edges give 3
  - name: combinational_output_sees_inputs_at_once
    steps:
      - drive: {en: 1}
      - wait: 255
      - expect: {q: 255, tc: 1}
      - drive: {en: 0}
      - expect: {tc: 0}         # tc = en && q==255: settles without a clock edge
      - drive: {en: 1}
      - expect: {tc: 1}
  - name: reset_mid_test
    steps:
      - drive: {en: 1}
      - wait: 4
      - reset: 1
      - expect: {q: 0}
      - wait: 2
      - expect: {q: 2}
  - name: dont_care_bits
    steps:
      - drive: {en: 1}
      - wait: 5
      - expect: {q: "8'b0000_01x1"}
"""


def test_timing_rules_on_a_clocked_design(data_dir: Path) -> None:
    design = load_design(data_dir / "counter.v")
    report = simulate(design, parse_plan(COUNTER_TIMING))
    by_name = {t["name"]: t for t in report.tests}
    assert by_name["registered_output_updates_after_the_edge"]["passed"]
    early = by_name["registered_output_one_cycle_too_early"]
    assert not early["passed"]
    assert early["mismatch"] == {
        "test": "registered_output_one_cycle_too_early",
        "step": 3,
        "port": "q",
        "expected": 4,
        "got": 3,
        "cycle": 3,
    }
    assert by_name["combinational_output_sees_inputs_at_once"]["passed"]
    assert by_name["reset_mid_test"]["passed"]
    assert by_name["dont_care_bits"]["passed"]


def test_systemverilog_lite_file_with_top(data_dir: Path) -> None:
    design = load_design(data_dir / "mux.sv", top="mux_reg")
    assert design.reset is not None and design.reset.port == "rst" and design.reset.active == "high"
    plan = parse_plan("""\
tests:
  - name: comb_and_registered
    steps:
      - drive: {sel: 1, a: 3, b: 9}
      - expect: {y: 9, y_q: 0}
      - wait: 1
      - expect: {y_q: 9}
      - drive: {sel: 0}
      - expect: {y: 3, y_q: 9}
""")
    report = simulate(design, plan)
    assert report.passed, report.tests


def test_each_test_starts_from_power_on(data_dir: Path) -> None:
    design = load_design(data_dir / "counter.v")
    one = "  - name: t{i}\n    steps:\n      - expect: {{q: 0}}\n      - drive: {{en: 1}}\n      - wait: 7\n"
    plan = parse_plan("tests:\n" + "".join(one.format(i=i) for i in range(3)))
    assert simulate(design, plan).passed


def test_combinational_design_settles_without_wait(shipped: dict[str, Design]) -> None:
    comb = next(d for d in shipped.values() if d.kind == "combinational")
    reference = load_plan_file(comb.root / "plans" / "reference.yaml")
    without_waits = Plan(
        tuple(TestCase(t.name, tuple(s for s in t.steps if s.kind != "wait"), t.description) for t in reference.tests)
    )
    assert simulate(comb, without_waits).passed


def test_a_combinational_wait_after_a_thousand_settles_still_advances(shipped: dict[str, Design]) -> None:
    # each drive + expect settles 1 ps; a wait used to compute 1 ns minus the settled time, which
    # went negative after 1,000 settles (in one test, or in a warm process over tests that never
    # wait) and failed every evaluation after it with "Timer argument time must be positive"
    design = shipped["gray_converter"]
    pairs = "".join(
        f"      - drive: {{bin_in: {i % 64}}}\n      - expect: {{gray_out: {(i % 64) ^ (i % 64 >> 1)}}}\n"
        for i in range(1001)
    )
    plan = parse_plan(
        f"tests:\n  - name: t0\n    steps:\n{pairs}      - wait: 1\n      - expect: {{gray_out: 60}}\n"
    )  # bin_in 40 still driven
    report = simulate(design, plan)
    assert report.passed, report.tests


def test_icarus_backend_agrees(data_dir: Path) -> None:
    if get_backend("icarus") and not __import__("shutil").which("iverilog"):
        pytest.skip("Icarus Verilog is not installed")
    design = load_design(data_dir / "counter.v")
    plan = parse_plan(COUNTER_TIMING)
    ver = simulate(design, plan)
    ica = simulate(design, plan, simulator="icarus")
    assert copy.deepcopy(ver.tests) == copy.deepcopy(ica.tests)


def test_power_on_state_is_restored_between_tests_and_evaluations(data_dir: Path) -> None:
    design = load_design(data_dir / "accum.v")
    # acc and mem are never reset: only the power-on snapshot brings them back to 0.
    # The 2 power-on reset cycles add din=0, so acc starts each test at 0.
    test = (
        "  - name: t{i}\n    steps:\n      - expect: {{acc: 0}}\n      - drive: {{din: 5}}\n"
        "      - wait: 3\n      - expect: {{acc: 15, last: 5}}\n"
    )
    plan = parse_plan("tests:\n" + "".join(test.format(i=i) for i in range(3)))
    results = run_plans(design, plan, plan, plan)
    assert [r.status for r in results] == ["pass"] * 3, [r.first for r in results]


ACTIVE_HIGH_RESET = """\
module helper(input a, output y); assign y = a; endmodule
module counter_hr(input clk, input reset, input en, output reg [3:0] q);
  always @(posedge clk) if (reset) q <= 4'd0; else if (en) q <= q + 4'd1;
endmodule
"""
COUNT_THEN_RESET = """\
tests:
  - name: counts_then_resets
    steps:
      - drive: {en: 1}
      - wait: 3
      - expect: {q: 3}
      - reset: 1
      - expect: {q: 0}
"""


def test_explicit_reset_port_takes_its_level_from_its_name(tmp_path: Path) -> None:
    """As a new user types it: `--reset reset` (no level) on a design whose `reset` is active
    high. Held at the wrong inactive level, the counter would stay in reset and never count."""
    import shutil
    import subprocess
    import sys

    (tmp_path / "file.sv").write_text(ACTIVE_HIGH_RESET)
    (tmp_path / "plan.yaml").write_text(COUNT_THEN_RESET)
    hwtp = shutil.which("hwtp") or str(Path(sys.executable).with_name("hwtp"))
    argv = [hwtp, "sim", "file.sv", "plan.yaml", "--top", "counter_hr", "--clock", "clk", "--reset", "reset"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  counts_then_resets" in done.stdout


# -- backends: each renders build options into its own flags and lints with them ------------

_NEEDS_DEFINE = """module needs_define #(parameter W = 4) (input [W-1:0] a, output [W-1:0] y);
`ifndef HWTP_GOOD
  this_is_not_verilog here;
`endif
  assign y = a + 1;
endmodule
"""


@pytest.mark.parametrize("name", backend_names())
def test_each_backend_lints_with_its_rendering_of_the_build_options(name: str) -> None:
    backend = get_backend(name)
    if not backend.probe().ok:
        pytest.skip(f"{name} is not installed")
    source = SourceFile("rtl/needs_define.v", _NEEDS_DEFINE)
    problem = backend.lint([source], "needs_define", NO_OPTIONS)
    assert problem is not None and "needs_define.v:3" in problem and "/tmp" not in problem, problem
    options = BuildOptions(defines=(("HWTP_GOOD", "1"),), parameters=(("W", "8"),))
    assert backend.lint([source], "needs_define", options) is None
    assert backend.lint([source], "no_such_top", options) is not None


def test_build_options_are_rendered_by_each_backend_and_key_the_build_cache() -> None:
    options = BuildOptions(defines=(("WIDTH", "8"),), parameters=(("DEPTH", "4"),), args=("-Wno-WIDTH",))
    assert get_backend("verilator").arguments("top", options) == ["-Wno-WIDTH", "-DWIDTH=8", "-GDEPTH=4"]
    assert get_backend("icarus").arguments("top", options) == ["-Wno-WIDTH", "-DWIDTH=8", "-Ptop.DEPTH=4"]
    assert get_backend("verilator").arguments("top", NO_OPTIONS) == []
    verilator = get_backend("verilator")
    sources = [SourceFile("a.v", "module top; endmodule\n")]
    assert build_key(verilator, sources, "top", options) != build_key(verilator, sources, "top", NO_OPTIONS)


def test_verilators_runtime_is_compiled_once_and_keyed_by_its_flags(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second build of another design copies the published runtime objects instead of
    compiling them (make never runs the compiler on verilated_vpi.cpp) and still runs; a build
    whose C++ flags differ compiles its own runtime."""
    monkeypatch.setenv("HWTP_CACHE_DIR", str(tmp_path / "cache"))
    verilator = get_backend("verilator")

    def compiled_runtime(name: str, options: BuildOptions = NO_OPTIONS) -> bool:
        design = load_design(data_dir / name)
        # C++ flags are the user's to trust (-CFLAGS could add code the RTL check never reads)
        build = ensure_build(verilator, build_sources(design), WRAPPER_TOP, options, allow_escapes=bool(options.args))
        assert not build.cached
        return "verilated_vpi.cpp" in (build.path / "build.log").read_text()

    assert compiled_runtime("counter.v")
    assert len(list((tmp_path / "cache" / "verilator-runtime").iterdir())) == 1
    assert not compiled_runtime("accum.v")
    test = "  - name: t\n    steps:\n      - drive: {din: 5}\n      - wait: 3\n      - expect: {acc: 15, last: 5}\n"
    assert [r.status for r in run_plans(load_design(data_dir / "accum.v"), parse_plan("tests:\n" + test))] == ["pass"]
    assert compiled_runtime("accum.v", BuildOptions(args=("-CFLAGS", "-DHWTP_OTHER_FLAGS=1")))
    assert len(list((tmp_path / "cache" / "verilator-runtime").iterdir())) == 2
