"""``hwtp export-tests``: test plans → a standalone, readable cocotb test module.

Plans that catch bugs become regression tests: one ``@cocotb.test()`` per plan test, with no
dependency on hwtp at run time. The steps run through :class:`hwtp.sim.plan_steps.PlanRunner`,
whose code (the module after its docstring) is copied unchanged into the exported module:
the timing rules of ``docs/plan-format.md`` are the same code the harness runs, and the
exported file needs only cocotb. The design's clock, reset and inputs come from the same job
header the harness reads (``hwtp.sim.job``).

Nothing from a plan is pasted into code: test and port names are checked identifiers, every
value is emitted as a Python ``int`` literal, and descriptions only appear in comments after
being reduced to printable ASCII (so they can never end the comment line).
"""

from __future__ import annotations

import ast
import keyword
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from hwtp.errors import DesignError, PlanError
from hwtp.plans.format import Plan, Step, load_plan_file, validate
from hwtp.plans.values import Value
from hwtp.rtl.design import MANIFEST, Design, clocking_problem, edge_signals
from hwtp.sim.job import Job

_SAFE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_COMMENT_WIDTH = 96
_RUNNER = ("hwtp.sim", "plan_steps.py")  # the runner module, read as text (importing it needs cocotb)

_HEADER = '''\
"""cocotb regression tests exported from hwtp test plans (`hwtp export-tests`).

Design: {design} (top module {top}){kind}.
{plans}

Standalone: needs cocotb >= 2.0 only, not hwtp. The plan runner below is the code of
hwtp.sim.plan_steps, copied unchanged: the same timing rules as hwtp's own simulations.

{rules}
Times are in picoseconds: build with a time precision of 1 ps or finer (e.g. `timescale 1ns/1ps).
Run it like any cocotb module, e.g. COCOTB_TEST_MODULES={module}.
"""

import cocotb
{runner}

# ---------------------------------------------------------------------------- this design

CLOCK = {clock}  # (clock input, period in ps), or None: combinational design
RESET = {reset}  # (port, active level, cycles), or None
INPUTS = {inputs}  # 0 at the start of every test (the reset inactive)
'''


def runner_source() -> tuple[str, str]:
    """The runner module's rules paragraph (from its docstring) and its code after the docstring."""
    text = resources.files(_RUNNER[0]).joinpath(_RUNNER[1]).read_text(encoding="utf-8")
    tree = ast.parse(text)
    doc = ast.get_docstring(tree) or ""
    rules = next(p for p in doc.split("\n\n") if p.startswith("The rules:"))
    code = "".join(text.splitlines(keepends=True)[tree.body[1].lineno - 1:])
    return rules + "\n", code


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
    header = Job(design, ()).as_data()  # the design's timing, as the harness gets it
    inputs = tuple(_name(name, "port") for name, _width in header["inputs"])
    clock, reset = "None", "None"
    if header["clock"]:
        clock = f"({_name(header['clock']['port'], 'clock port')!r}, {int(header['clock']['period_ps'])})"
    if header["reset"]:
        r = header["reset"]
        reset = f"({_name(r['port'], 'reset port')!r}, {int(r['active'])}, {int(r['cycles'])})"
    listed = "\n".join(f"Plan {i}: {_comment(label)} ({len(plan.tests)} tests)"
                       for i, (label, plan) in enumerate(plans, start=1))
    kind = ", combinational" if design.clock is None else ""
    if design.clock is not None and design.reset is None:
        kind += ".\nIt has no reset: the tests run one after the other in one simulator process and each\n" \
                "starts from the state the previous one left (hwtp restores power-on state; cocotb cannot)"
    rules, runner = runner_source()
    text = _HEADER.format(design=_comment(design.name), top=_comment(design.top), kind=kind, plans=listed,
                          rules=rules, module=_name(module, "module"), runner=runner, clock=clock, reset=reset,
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
            text += "    t = PlanRunner(dut, CLOCK, RESET, INPUTS)\n    await t.start()\n"
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
    """Validate every plan against ``design`` and write the module; returns (plans, tests).
    A design with an edge input it does not drive as its clock is refused (the module would
    drive that clock as random data)."""
    problem = clocking_problem(design.ports, edge_signals(design.sources), design.clock, design.reset,
                               "set design.clock (hwtp.yaml) or pass --clock PORT", chosen=design.clock is not None)
    if problem:
        raise DesignError(f"{design.name}: {problem}")
    plans = [(str(p), load_plan_file(p)) for p in plan_paths]
    module = out.stem
    if not _SAFE_NAME.match(module):
        raise PlanError(f"-o {out}: {module!r} is not a valid Python module name")
    text = render(design, plans, module)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return len(plans), sum(len(p.tests) for _, p in plans)
