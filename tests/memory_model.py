"""A tiny combinational design, a hand-made mutant set of it, and a Python model of its
simulation for :class:`hwtp.sim.executors.memory.MemoryExecutor`: score, run and reward logic
tested without Verilator.

The design is ``y = a + b`` (4-bit inputs, 5-bit output). Each mutant rewrites the
expression; :data:`MODELS` computes ``y`` for golden (selector 0) and each mutant's
selector value, and :func:`evaluate` runs a compiled plan's harness ops against that model
as the harness would (drive, then expect with its mask; the first mismatch fails the test,
and the evaluation stops at the first failing test; a sample records the outputs in the test's
``trace``). Mutant m0003 hangs on a wait of
:data:`HANG_CYCLES` cycles or more (a timeout, as a non-terminating mutant gives).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from hwtp.mutators.mutantset import Mutant, MutantClass, MutantSet
from hwtp.mutators.site import Site
from hwtp.rtl.design import load_design
from hwtp.sim.job import Evaluation, Limits
from hwtp.sim.runner import EvalResult, EvalStatus, Fault

SOURCE = "module add4(input [3:0] a, input [3:0] b, output [4:0] y);\n  assign y = a + b;\nendmodule\n"
EXPR = "a + b"
#: (id, replacement of ``a + b``, class)
MUTANTS = (
    ("m0001", "a - b", MutantClass.KILLABLE),
    ("m0002", "a | b", MutantClass.KILLABLE),
    ("m0003", "a ^ b", MutantClass.KILLABLE),
    ("m0004", "b + a", MutantClass.EQUIVALENT),
)
#: y of each selector value (0: golden)
MODELS: dict[int, Callable[[int, int], int]] = {
    0: lambda a, b: (a + b) & 31,
    1: lambda a, b: (a - b) & 31,
    2: lambda a, b: a | b,
    3: lambda a, b: a ^ b,
    4: lambda a, b: (b + a) & 31,
}
HANG_CYCLES = 50
HANGS = 3  # the selector value that hangs on long waits


def mutant_set(tmp_path: Path, name: str = "add4") -> MutantSet:
    """The design (module ``name``) in ``tmp_path`` and its four mutants, each one edit of ``a + b``."""
    text = SOURCE.replace("add4", name)
    path = tmp_path / f"{name}.v"
    path.write_text(text)
    design = load_design(path)
    start = text.index(EXPR)
    end = start + len(EXPR)
    line = text[:start].count("\n") + 1
    col = start - text.rfind("\n", 0, start)
    mutants = []
    for i, (mid, replacement, klass) in enumerate(MUTANTS, start=1):
        site = Site(path.name, start, end, "expr", EXPR, replacement, start, end, "expr", line, col)
        mutants.append(
            Mutant(mid, "expr", path.name, line, col, EXPR, replacement, index=i, klass=klass, sites=(site,))
        )
    return MutantSet(design, 0, tuple(mutants))


def _run_test(
    test: dict[str, Any], y: Callable[[int, int], int], hangs: bool, trace: list[Any]
) -> dict[str, Any] | str | None:
    inputs = {"a": 0, "b": 0}
    for step, (op, arg) in enumerate(test["ops"], 1):
        if op == "d":
            inputs.update(dict(arg))
        elif op == "s":  # a sample: [step, cycle, [outputs]], as the harness records it
            trace.append([step, 0, [y(inputs["a"], inputs["b"])]])
        elif op == "w" and hangs and arg >= HANG_CYCLES:
            return "hang"
        elif op == "e":
            for name, value, mask, shown in arg:
                got = y(inputs["a"], inputs["b"])
                if (got & mask) != value:
                    return {"test": test["name"], "step": step, "port": name, "expected": shown, "got": got, "cycle": 0}
    return None


def evaluate(ev: Evaluation, limits: Limits) -> EvalResult:
    """``ev`` on the model of its selector value, as the harness reports it."""
    y = MODELS[ev.mutant]
    tests: list[dict[str, Any]] = []
    first = None
    for test in ev.test_list():
        trace: list[Any] = []
        mismatch = _run_test(test, y, ev.mutant == HANGS, trace)
        if mismatch == "hang":
            return EvalResult(
                ev.id, EvalStatus.TIMEOUT, None, tuple(tests), 0, f"no result within {limits.wall_s} s", 0.0, Fault.HANG
            )
        assert not isinstance(mismatch, str)
        entry = {"name": test["name"], "passed": mismatch is None, "mismatch": mismatch}
        tests.append(entry | {"trace": trace} if trace else entry)
        if mismatch is not None:
            first = first or mismatch
            if ev.stop_on_fail:
                break
    return EvalResult(ev.id, EvalStatus.FAIL if first else EvalStatus.PASS, first, tuple(tests), ev.cycles)


def plan(*checks: tuple[int, int, int], name: str = "t") -> str:
    """A plan of one test: for each (a, b, y) drive a and b, then expect y."""
    steps = "".join(f"      - drive: {{a: {a}, b: {b}}}\n      - expect: {{y: {y}}}\n" for a, b, y in checks)
    return f"tests:\n  - name: {name}\n    steps:\n{steps}"


def waiting_plan(cycles: int) -> str:
    """A plan that waits ``cycles`` cycles before one right check (m0003 hangs on a long wait)."""
    steps = f"      - wait: {cycles}\n      - drive: {{a: 1, b: 1}}\n      - expect: {{y: 2}}\n"
    return f"tests:\n  - name: w\n    steps:\n{steps}"
