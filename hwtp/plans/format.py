"""Test plans, format v1 (docs/plan-format.md).

A plan is data: it is loaded with :mod:`hwtp.yamlio` (bounded, no aliases, no tags),
checked for structure (:func:`parse_plan`), then against a design's ports
(:func:`validate`). Every rejection names the test, step and field, and the line when known.
LLM text around a plan is tolerated: :func:`extract_plan` finds it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hwtp import yamlio
from hwtp.errors import PlanError
from hwtp.plans.values import Value, ValueError_, parse_value
from hwtp.sim.job import Limits, plan_cycles

if TYPE_CHECKING:
    from hwtp.rtl.design import Design

#: ``sample`` is internal (stimulus generation records outputs there); plans never contain it.
StepKind = Literal["drive", "expect", "wait", "reset", "sample"]
STEP_KINDS: tuple[StepKind, ...] = ("drive", "expect", "wait", "reset")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Bounds that keep an untrusted plan cheap to check and to simulate.
MAX_TESTS = 256
MAX_STEPS = 4096
#: The simulator's cycle limit per evaluation (``hwtp score --max-cycles``): a plan that
#: simulates more could never run, so it is refused here, not found out in the simulator.
CYCLE_LIMIT = Limits().max_cycles
MAX_WAIT = CYCLE_LIMIT


@dataclass(frozen=True)
class Step:
    """One step: ``drive``/``expect`` carry ``values``; ``wait``/``reset`` carry ``count``."""

    kind: StepKind
    values: tuple[tuple[str, Value], ...] = ()
    count: int = 0
    line: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TestCase:
    """A named sequence of steps, run from power-on."""

    __test__ = False  # not a pytest class

    name: str
    steps: tuple[Step, ...]
    description: str = ""
    line: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Plan:
    """A parsed plan. ``source`` names where it came from, for messages."""

    tests: tuple[TestCase, ...]
    reasoning: str = ""
    source: str = "plan"
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def cycles(self) -> int:
        """Clock cycles the plan advances in total (waits and resets)."""
        return sum(s.count for t in self.tests for s in t.steps)


def _error(source: str, located: yamlio.Located, path: tuple[Any, ...], message: str) -> PlanError:
    # plan messages name their place in words (test 't' step 2), not as a dotted field
    return yamlio.located_error(PlanError, source, located, path, message, field=False)


def load_plan_file(path: Path) -> Plan:
    """Read and parse a plan file (YAML or JSON)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise PlanError(f"{path}: cannot read: {exc.strerror}") from exc
    if size > yamlio.MAX_DOCUMENT_BYTES:
        raise PlanError(f"{path}: plan file is {size} bytes, larger than the {yamlio.MAX_DOCUMENT_BYTES}-byte limit")
    return parse_plan(yamlio.read_text(path, PlanError), source=str(path))


def parse_plan(text: str, source: str = "plan") -> Plan:
    """Parse plan text (YAML or JSON) and check its structure."""
    try:
        located = yamlio.load(text)
    except yamlio.YamlLoadError as exc:
        raise PlanError(f"{yamlio.where(source, exc.line)}: not valid YAML/JSON: {exc.message}") from exc
    return plan_from_data(located, source)


def plan_from_data(located: yamlio.Located, source: str = "plan") -> Plan:
    """Build a :class:`Plan` from loaded data, checking structure and literals."""
    data = located.data
    if not isinstance(data, dict):
        raise _error(source, located, (), "a plan is a mapping with a 'tests' list")
    unknown = sorted(set(data) - {"reasoning", "tests", "format"})
    if unknown:
        raise _error(source, located, (unknown[0],), f"unknown field {unknown[0]!r} (valid: reasoning, tests)")
    reasoning = data.get("reasoning") or ""
    if not isinstance(reasoning, str):
        raise _error(source, located, ("reasoning",), "reasoning must be text")
    tests = data.get("tests")
    if not isinstance(tests, list) or not tests:
        raise _error(source, located, ("tests",), "the plan has no tests ('tests' must be a non-empty list)")
    if len(tests) > MAX_TESTS:
        raise _error(source, located, ("tests",), f"too many tests ({len(tests)} > {MAX_TESTS})")
    parsed = tuple(_parse_test(source, located, i, t) for i, t in enumerate(tests))
    seen: set[str] = set()
    for i, test in enumerate(parsed):
        if test.name in seen:
            raise _error(source, located, ("tests", i, "name"), f"duplicate test name {test.name!r}")
        seen.add(test.name)
    return Plan(parsed, reasoning, source)


def _parse_test(source: str, located: yamlio.Located, i: int, raw: Any) -> TestCase:
    path: tuple[Any, ...] = ("tests", i)
    if not isinstance(raw, dict):
        raise _error(source, located, path, f"tests[{i}]: expected a mapping with name and steps")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise _error(
            source, located, (*path, "name"), f"tests[{i}]: name must be an identifier ([A-Za-z_][A-Za-z0-9_]*)"
        )
    label = f"test {name!r}"
    unknown = sorted(set(raw) - {"name", "description", "steps"})
    if unknown:
        raise _error(
            source,
            located,
            (*path, unknown[0]),
            f"{label}: unknown field {unknown[0]!r} (valid: name, description, steps)",
        )
    description = raw.get("description") or ""
    if not isinstance(description, str):
        raise _error(source, located, (*path, "description"), f"{label}: description must be text")
    steps = raw.get("steps")
    if not isinstance(steps, list) or not steps:
        raise _error(source, located, (*path, "steps"), f"{label}: steps must be a non-empty list")
    if len(steps) > MAX_STEPS:
        raise _error(source, located, (*path, "steps"), f"{label}: too many steps ({len(steps)} > {MAX_STEPS})")
    parsed = tuple(_parse_step(source, located, (*path, "steps", j), label, j, s) for j, s in enumerate(steps))
    return TestCase(name, parsed, description, located.line_of(path))


def _parse_step(source: str, located: yamlio.Located, path: tuple[Any, ...], label: str, j: int, raw: Any) -> Step:
    where = f"{label} step {j + 1}"
    if not isinstance(raw, dict) or len(raw) != 1:
        raise _error(source, located, path, f"{where}: a step is a mapping with exactly one of {', '.join(STEP_KINDS)}")
    kind, body = next(iter(raw.items()))
    line = located.line_of(path)
    if kind not in STEP_KINDS:
        raise _error(source, located, path, f"{where}: unknown step {kind!r} (valid: {', '.join(STEP_KINDS)})")
    if kind in ("wait", "reset"):
        if isinstance(body, bool) or not isinstance(body, int) or not 1 <= body <= MAX_WAIT:
            raise _error(
                source,
                located,
                (*path, kind),
                f"{where} ({kind}): expected a cycle count from 1 to {MAX_WAIT} "
                f"(the simulator's cycle limit per evaluation), got {body!r}",
            )
        return Step(kind, count=body, line=line)
    if not isinstance(body, dict) or not body:
        raise _error(source, located, (*path, kind), f"{where} ({kind}): expected a mapping of port: value")
    values = []
    for port, raw_value in body.items():
        try:
            value = parse_value(raw_value)
        except ValueError_ as exc:
            raise _error(source, located, (*path, kind, port), f"{where} ({kind}) port {port!r}: {exc}") from exc
        if kind == "drive" and value.has_dont_care:
            raise _error(
                source, located, (*path, kind, port), f"{where} (drive) port {port!r}: cannot drive x/z/? bits"
            )
        values.append((port, value))
    return Step(kind, tuple(values), line=line)  # type: ignore[arg-type]


def validate(plan: Plan, design: Design, max_cycles: int = CYCLE_LIMIT) -> None:
    """Check a plan against a design's ports and the simulator's cycle limit ``max_cycles``;
    raise :class:`PlanError` naming what is wrong."""
    for test in plan.tests:
        for j, step in enumerate(test.steps):
            where = f"{yamlio.where(plan.source, step.line)}: test {test.name!r} step {j + 1} ({step.kind})"
            if step.kind == "reset" and design.reset is None:
                raise PlanError(f"{where}: design {design.name} has no reset")
            if step.count > max_cycles:
                raise PlanError(
                    f"{where}: {step.kind} {step.count} is over the simulator's cycle limit of {max_cycles} "
                    "cycles per evaluation"
                )
            for name, value in step.values:
                _check_port(where, design, step.kind, name, value)
    total = plan_cycles(plan, design)
    if total > max_cycles:
        raise PlanError(
            f"{plan.source}: the plan simulates {total} cycles (waits, resets and each test's power-on "
            f"reset), over the simulator's cycle limit of {max_cycles} cycles per evaluation"
        )


def _check_port(where: str, design: Design, kind: str, name: str, value: Value) -> None:
    port = design.port(name)
    if port is None:
        wanted = design.inputs if kind == "drive" else design.outputs
        names = ", ".join(p.name for p in wanted if p.name not in design.control_ports)
        raise PlanError(f"{where}: unknown port {name!r} (valid: {names})")
    if kind == "drive":
        if port.direction != "input":
            raise PlanError(f"{where}: port {name!r} is an {port.direction}; only inputs can be driven")
        if name in design.control_ports:
            role = "clock" if design.clock and design.clock.port == name else "reset"
            hint = "the harness drives the clock" if role == "clock" else "use a 'reset: N' step"
            raise PlanError(f"{where}: port {name!r} is the {role}; {hint}")
    elif port.direction == "input":
        raise PlanError(f"{where}: port {name!r} is an input; only outputs can be expected")
    problem = value.fits(port.width, port.signed)
    if problem:
        raise PlanError(f"{where}: port {name!r}: value {problem}")


# --------------------------------------------------------------------------- LLM text

_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_PLAN_START_RE = re.compile(r"^(?:reasoning|tests)\s*:", re.MULTILINE)


def _without_thinking(text: str) -> str:
    """``text`` without its ``<think>…</think>`` blocks (tags in any case; an opening tag
    without a closing one after it is kept). Tags are found by literal searches: a lazy
    ``<think>.*?</think>`` costs ~18 ns per character of reasoning, this well under 1."""
    kept: list[str] = []
    at = 0
    while (opening := _THINK_OPEN.search(text, at)) and (closing := _THINK_CLOSE.search(text, opening.end())):
        kept.append(text[at : opening.start()])
        at = closing.end()
    return "".join(kept) + text[at:] if kept else text


def _fences(body: str) -> list[str]:
    """The bodies of the Markdown code fences in ``body``, in order: from the line after each
    opening ```` ``` ```` (whatever follows it on its line: a language, attributes) to the next
    ```` ``` ````, or to the end when the fence is cut off."""
    found: list[str] = []
    at = body.find("```") if "`" in body else -1  # one character's scan first: most text holds none
    while at >= 0:
        line_end = body.find("\n", at + 3)
        if line_end < 0:  # no line after the opening: no fence here or later
            break
        end = body.find("```", line_end + 1)
        if end < 0:
            found.append(body[line_end + 1 :])
            break
        found.append(body[line_end + 1 : end])
        at = body.find("```", end + 3)
    return found


def candidates(text: str) -> Iterator[str]:
    """Pieces of LLM text that may hold the plan, most likely first (:func:`extract_plan` reads
    them in this order; each is found only when the ones before it were not the plan)."""
    body = _without_thinking(text) if "<" in text else text
    if "</" in body and _THINK_CLOSE.search(body):  # an opening tag lost to truncation
        body = re.split(r"</think>", body, flags=re.IGNORECASE)[-1]
    fences = _fences(body)
    yield from reversed(fences)  # the final answer usually comes last
    yield body
    for m in _PLAN_START_RE.finditer(body):
        yield body[m.start() :]
    brace = body.find("{")
    if brace >= 0:
        yield body[brace : body.rfind("}") + 1]


def extract_plan(text: str, source: str = "completion") -> Plan:
    """Find and parse the plan inside LLM text (reasoning, ``<think>``, code fences, prose).

    Raises :class:`PlanError` with the reason when no plan can be found or the plan found is
    malformed.
    """
    best: PlanError | None = None
    unreadable: yamlio.YamlLoadError | None = None
    for candidate in candidates(text):
        try:
            located = yamlio.load(candidate)
        except yamlio.YamlLoadError as exc:
            if exc.message.startswith("not Unicode"):
                unreadable = unreadable or exc
            continue
        if not isinstance(located.data, dict) or "tests" not in located.data:
            continue
        try:
            return plan_from_data(located, source)
        except PlanError as exc:
            best = best or exc
    if best is not None:
        raise best
    if unreadable is not None:
        raise PlanError(f"{source}: no plan found: the text is {unreadable.message}")
    raise PlanError(no_plan(source))


def no_plan(source: str) -> str:
    """The message of text without a plan (:func:`extract_plan`)."""
    return f"{source}: no plan found (expected a YAML or JSON mapping with a 'tests' list)"


# --------------------------------------------------------------------------- schema

_VALUE_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {"type": "integer"},
        {
            "type": "string",
            "pattern": (
                r"^\s*(-?\s*(0[xXbBoO][0-9a-fA-F_]+|\d[\d_]*)"
                r"|\d*\s*'\s*[sS]?\s*[bBoOdDhH]\s*[0-9a-fA-FxXzZ?_]+|[xXzZ?])\s*$"
            ),
        },
    ]
}


def json_schema() -> dict[str, Any]:
    """The JSON Schema of plan format v1 (usable for constrained decoding)."""
    port_map = {"type": "object", "minProperties": 1, "additionalProperties": _VALUE_SCHEMA}
    count = {"type": "integer", "minimum": 1, "maximum": MAX_WAIT}

    def one(kind: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": {kind: schema}, "required": [kind], "additionalProperties": False}

    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "hwtp test plan (format v1)",
        "type": "object",
        "properties": {
            "reasoning": {"type": "string"},
            "tests": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_TESTS,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "pattern": _NAME_RE.pattern},
                        "description": {"type": "string"},
                        "steps": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": MAX_STEPS,
                            "items": {
                                "oneOf": [
                                    one("drive", port_map),
                                    one("expect", port_map),
                                    one("wait", count),
                                    one("reset", count),
                                ]
                            },
                        },
                    },
                    "required": ["name", "steps"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["tests"],
        "additionalProperties": False,
    }


def to_data(plan: Plan) -> dict[str, Any]:
    """The plan as plain data (for YAML/JSON output); values keep a canonical literal form."""

    tests = []
    for test in plan.tests:
        steps: list[dict[str, Any]] = []
        for step in test.steps:
            if step.kind in ("wait", "reset"):
                steps.append({step.kind: step.count})
            else:
                steps.append({step.kind: {name: v.literal() for name, v in step.values}})
        entry: dict[str, Any] = {"name": test.name}
        if test.description:
            entry["description"] = test.description
        entry["steps"] = steps
        tests.append(entry)
    data: dict[str, Any] = {}
    if plan.reasoning:
        data["reasoning"] = plan.reasoning
    data["tests"] = tests
    return data
