"""Reading Yosys' verdicts, and a counterexample as a stimulus the simulator can replay.

``sat`` prints its model as a table (``-show-inputs -show-outputs``): one row per time step
and signal, ``in_<port>`` for the miter's inputs. A counterexample becomes a plan-shaped
stimulus with the timing of docs/plan-format.md: the harness's power-on reset stands for
the first ``reset.cycles`` steps; after it every step drives the inputs the model changed,
samples the outputs (before the edge, where the miter compared them) and waits one cycle,
or, when the model holds the reset port active in that step, resets for one cycle. The
simulator's golden run then fills in the expectations (:mod:`hwtp.mutators.witness`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from hwtp.plans.format import Plan, Step, TestCase
from hwtp.plans.values import Value
from hwtp.rtl.design import Design

_ROW = re.compile(r"^\s+(\d+)\s+\\(\S+)\s+\S+\s+\S+\s+([01xz-]+)\s*$")
_LENGTH = re.compile(r"\*\* Trying induction with length (\d+) \*\*")


class Outcome(str, Enum):
    """What one ``sat`` call concluded."""

    PROVED = "proved"  # no model: the property holds (for the steps looked at)
    FAILED = "failed"  # a model (bounded check) or a failing base case (induction)
    OPEN = "open"  # induction did not close within its steps
    TIMEOUT = "timeout"  # the SAT solver's time limit
    NONE = "none"  # no verdict in the log (the invocation stopped before it)


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    steps: int = 0  # induction length when proved; for a bounded model, the first failing step


def read_bmc(
    text: str, skip: int = 0, reset: tuple[str, int] | None = None
) -> tuple[Verdict, dict[int, dict[str, int]]]:
    """The bounded check's verdict and, for a model, its values by step and signal; the
    first ``skip`` steps (the power-on reset) were not compared. A model's failing step is the
    first whose outputs differ while the reset port (``reset``: name and active level) is
    inactive: no plan samples the outputs while reset is held (a ``reset`` step holds it and
    samples after releasing it), so a difference only then is not where a witness shows."""
    if "Interrupted SAT solver: TIMEOUT" in text:
        return Verdict(Outcome.TIMEOUT), {}
    if "no model found: SUCCESS" in text:
        return Verdict(Outcome.PROVED), {}
    if "model found: FAIL" not in text:
        return Verdict(Outcome.NONE), {}
    table: dict[int, dict[str, int]] = {}
    for line in text.splitlines():
        row = _ROW.match(line)
        if row:
            bits = row.group(3).replace("x", "0").replace("z", "0").replace("-", "0")
            table.setdefault(int(row.group(1)), {})[row.group(2)] = int(bits, 2)
    def held(values: dict[str, int]) -> bool:
        return reset is not None and values.get(f"in_{reset[0]}") == reset[1]

    differ = [t for t, values in table.items() if t > skip and values.get("trigger")]
    first = min((t for t in differ if not held(table[t])), default=min(differ, default=max(table, default=1)))
    return Verdict(Outcome.FAILED, first), table


def read_induction(text: str) -> Verdict:
    """The k-induction's verdict (``steps``: the length that closed it)."""
    lengths = [int(n) for n in _LENGTH.findall(text)]
    if "Interrupted SAT solver: TIMEOUT" in text:
        return Verdict(Outcome.TIMEOUT)
    if "Induction step proven: SUCCESS" in text:
        return Verdict(Outcome.PROVED, max(lengths, default=1))
    if "model found for base case: FAIL" in text:
        return Verdict(Outcome.FAILED)
    if "Reached maximum number of time steps" in text:
        return Verdict(Outcome.OPEN, max(lengths, default=0))
    return Verdict(Outcome.NONE)


def stimulus(design: Design, table: dict[int, dict[str, int]], last: int, mutant_id: str) -> Plan:
    """The counterexample's steps up to ``last`` as a stimulus (``sample`` steps, no checks)."""
    inputs = [p for p in design.inputs if p.name not in design.control_ports]
    reset = design.reset if design.clock is not None else None
    start = reset.cycles + 1 if reset is not None else 1
    active = (1 if reset.active == "high" else 0) if reset is not None else None
    current: dict[str, int] = {p.name: 0 for p in inputs}  # the harness's power-on values
    steps: list[Step] = []
    for t in range(start, last + 1):
        values = table.get(t, {})
        drive = {p.name: values[f"in_{p.name}"] for p in inputs
                 if f"in_{p.name}" in values and (values[f"in_{p.name}"] != current[p.name] or t == start)}
        current.update(drive)
        if drive:
            steps.append(Step("drive", tuple((n, Value(v)) for n, v in drive.items())))
        in_reset = reset is not None and values.get(f"in_{reset.port}") == active
        if in_reset and t < last:
            steps.append(Step("reset", count=1))
            continue
        steps.append(Step("sample"))
        if design.clock is not None and t < last:
            steps.append(Step("wait", count=1))
    description = f"formal counterexample for {mutant_id}"
    return Plan((TestCase(f"cex_{mutant_id}", tuple(steps), description),), source=f"formal {mutant_id}")
