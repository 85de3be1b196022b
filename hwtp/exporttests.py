"""``hwtp export-tests``: test plans → a standalone, readable cocotb test module.

Plans that catch bugs become regression tests: one ``@cocotb.test()`` per plan test, with no
dependency on hwtp at run time. The module implements the timing rules of
``docs/plan-format.md`` exactly as ``hwtp.sim.harness`` does (clock low at t=0 and rising at
P/2, standing at P/4 after a falling edge, drive → settle → expect, ``reset N``, the
design's reset before each test, don't-care bits masked).

Nothing from a plan is pasted into code: test and port names are checked identifiers, every
value is emitted as a Python ``int`` literal, and descriptions only appear in comments after
being reduced to printable ASCII (so they can never end the comment line).
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from pathlib import Path

from hwtp.design import MANIFEST, Design
from hwtp.errors import PlanError
from hwtp.plan import Plan, Step, load_plan_file, validate
from hwtp.values import Value

_SAFE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_COMMENT_WIDTH = 96

_HEADER = '''\
"""cocotb regression tests exported from hwtp test plans (`hwtp export-tests`).

Design: {design} (top module {top}){kind}.
{plans}

Standalone: needs cocotb >= 2.0 only, not hwtp. Each test follows hwtp's plan timing rules:
  * the clock starts low and rises at P/2; between steps a test stands P/4 after a falling
    edge, in the low phase of the clock;
  * drive() sets inputs at once; expect() first lets them settle (1 ps), then compares
    outputs, ignoring don't-care bits; wait(N) advances N rising edges; reset(N) holds the
    reset at its active level for N cycles, then releases it;
  * each test starts with every input at 0 (reset inactive), then applies the design's reset.
Times are in picoseconds: build with a time precision of 1 ps or finer (e.g. `timescale 1ns/1ps).
Run it like any cocotb module, e.g. COCOTB_TEST_MODULES={module}.
"""

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import Timer

CLOCK = {clock}  # clock input (None: combinational design)
PERIOD_PS = {period}  # clock period; wait(N) on a combinational design advances N ns
RESET = {reset}  # (port, active level, cycles), or None
INPUTS = {inputs}  # driven to 0 at the start of every test


class PlanRunner:
    """Runs the steps of one test against ``dut`` (the timing rules above live here)."""

    def __init__(self, dut):
        self.dut = dut
        self.stand = 0  # simulation time (ps) where the test stands between steps
        self.dirty = False  # inputs driven since the last clock edge

    async def start(self):
        if CLOCK is not None:
            Clock(getattr(self.dut, CLOCK), PERIOD_PS, unit="ps").start(start_high=False)
            await Timer(PERIOD_PS // 4, unit="ps")
        self.stand = round(get_sim_time("ps"))
        for name in INPUTS:
            getattr(self.dut, name).value = 0
        if RESET is not None:
            getattr(self.dut, RESET[0]).value = 1 - RESET[1]
        self.dirty = True
        if RESET is not None:
            await self.reset(RESET[2])
        elif CLOCK is None:
            await self.settle()

    def drive(self, **values):
        for name, value in values.items():
            getattr(self.dut, name).value = value
        self.dirty = True

    async def wait(self, cycles):
        self.stand += cycles * (PERIOD_PS if CLOCK is not None else 1000)
        await Timer(self.stand - round(get_sim_time("ps")), unit="ps")
        self.dirty = False

    async def reset(self, cycles):
        port = getattr(self.dut, RESET[0])
        port.value = RESET[1]
        self.dirty = True
        await self.wait(cycles)
        port.value = 1 - RESET[1]
        self.dirty = True

    async def settle(self):
        if self.dirty:
            await Timer(1, unit="ps")
            self.dirty = False

    async def expect(self, step, /, **expected):
        """Compare outputs; a value is an int, or (value, mask) when some bits are don't-care."""
        await self.settle()
        for name, want in expected.items():
            value, mask = want if isinstance(want, tuple) else (want, None)
            bits = str(getattr(self.dut, name).value)  # most significant bit first
            width = len(bits)
            mask = (1 << width) - 1 if mask is None else mask
            ok = all(bits[width - 1 - i] == str((value >> i) & 1) for i in range(width) if (mask >> i) & 1)
            assert ok, f"step {{step}}: {{name}} = {{_show(bits)}}, expected {{_pattern(value, mask, width)}}"


def _show(bits):
    return str(int(bits, 2)) if set(bits) <= {{"0", "1"}} else bits


def _pattern(value, mask, width):
    if mask == (1 << width) - 1:
        return str(value)
    return "".join(str((value >> i) & 1) if (mask >> i) & 1 else "x" for i in reversed(range(width)))
'''


def _comment(text: str) -> str:
    """Free text reduced to one line of printable ASCII without quotes or backslashes: safe in
    a ``#`` comment and in the module docstring."""
    kept = "".join(ch if " " <= ch <= "~" and ch not in "\\\"" else " " for ch in text)
    flat = " ".join(kept.split())
    return flat if len(flat) <= _COMMENT_WIDTH else flat[: _COMMENT_WIDTH - 3] + "..."


def _name(name: str, what: str) -> str:
    """A name that is safe to emit in code (checked, never trusted)."""
    if not _SAFE_NAME.match(name) or keyword.iskeyword(name):
        raise PlanError(f"{what} {name!r} cannot be used as a Python name in the exported tests")
    return name


def _int(value: int, sized: bool) -> str:
    if value < 10 or not sized:
        return str(int(value))
    return hex(int(value))


def _expected(value: Value, width: int) -> str:
    bits, mask = value.masked(width)
    if mask == (1 << width) - 1:
        return _int(bits, value.size is not None)
    return f"({_int(bits, True)}, {bin(int(mask))})"


def _kwargs(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{_name(name, 'port')}={code}" for name, code in pairs)


def _step(design: Design, index: int, step: Step) -> str:
    widths = {p.name: p.width for p in design.ports}
    if step.kind == "wait":
        return f"await t.wait({int(step.count)})"
    if step.kind == "reset":
        return f"await t.reset({int(step.count)})"
    if step.kind == "drive":
        pairs = [(n, _int(v.masked(widths[n])[0], v.size is not None)) for n, v in step.values]
        return f"t.drive({_kwargs(pairs)})"
    if step.kind == "expect":
        pairs = [(n, _expected(v, widths[n])) for n, v in step.values]
        return f"await t.expect({int(index)}, {_kwargs(pairs)})"
    raise PlanError(f"step kind {step.kind!r} cannot be exported")


def _label(path_label: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_]", "_", Path(path_label).stem).strip("_")
    return stem or "plan"


def render(design: Design, plans: Sequence[tuple[str, Plan]], module: str = "test_hwtp_plans") -> str:
    """The text of the cocotb module for validated ``plans`` (pairs of a label and a plan)."""
    for _, plan in plans:
        validate(plan, design)
    controls = design.control_ports
    inputs = tuple(_name(p.name, "port") for p in design.inputs if p.name not in controls)
    clock = repr(_name(design.clock.port, "clock port")) if design.clock else "None"
    period = max(4, round(design.clock.period_ns * 1000)) if design.clock else 4000
    period -= period % 4
    reset = "None"
    if design.reset:
        port = _name(design.reset.port, "reset port")
        reset = f"({port!r}, {int(design.reset.active_value)}, {int(design.reset.cycles)})"
    listed = "\n".join(f"Plan {i}: {_comment(label)} ({len(plan.tests)} tests)"
                       for i, (label, plan) in enumerate(plans, start=1))
    kind = ", combinational" if design.clock is None else ""
    if design.clock is not None and design.reset is None:
        kind += ".\nIt has no reset: the tests run one after the other in one simulator process and each\n" \
                "starts from the state the previous one left (hwtp restores power-on state; cocotb cannot)"
    text = _HEADER.format(design=_comment(design.name), top=_comment(design.top), kind=kind, plans=listed,
                          module=_name(module, "module"), clock=clock, period=int(period), reset=reset,
                          inputs=repr(inputs))
    used: set[str] = set()
    prefix_plans = len(plans) > 1
    for label, plan in plans:
        for test in plan.tests:
            base = f"test_{_label(label)}_{test.name}" if prefix_plans else f"test_{test.name}"
            name, k = _name(base, "test"), 2
            while name in used:
                name, k = f"{base}_{k}", k + 1
            used.add(name)
            line = f", line {int(test.line)}" if test.line else ""
            text += f"\n\n@cocotb.test()\nasync def {name}(dut):\n"
            text += f"    # {_comment(Path(label).name)}{line}: test {test.name}\n"
            if test.description:
                text += f"    # {_comment(test.description)}\n"
            text += "    t = PlanRunner(dut)\n    await t.start()\n"
            for index, step in enumerate(test.steps, start=1):
                text += f"    {_step(design, index, step)}\n"
    return text


def design_near(plan_path: Path) -> Path | None:
    """The design folder a plan file belongs to (``<design>/plans/x.yaml``, ``<mutdir>/witnesses/``)."""
    folder = plan_path.resolve().parent
    for candidate in (folder, *list(folder.parents)[:2]):
        if (candidate / MANIFEST).is_file():
            return candidate
        if (candidate / "golden" / MANIFEST).is_file():
            return candidate / "golden"
    return None


def export_tests(design: Design, plan_paths: Sequence[Path], out: Path) -> tuple[int, int]:
    """Validate every plan against ``design`` and write the module; returns (plans, tests)."""
    plans = [(str(p), load_plan_file(p)) for p in plan_paths]
    module = out.stem
    if not _SAFE_NAME.match(module):
        raise PlanError(f"-o {out}: {module!r} is not a valid Python module name")
    text = render(design, plans, module)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return len(plans), sum(len(p.tests) for _, p in plans)
