"""The job file the host hands to the harness: compiled plans and the design's timing.

A plan is compiled once per design into flat ops (``d``rive, ``e``xpect, ``w``ait,
``s``ample, ``r``eset) with every value already masked to its port width, so the harness
does no parsing and no validation: it only moves signals and compares integers.

The format (version :data:`JOB_FORMAT_VERSION`; ARCHITECTURE.md, "The host->harness
contract") is one JSON object, :meth:`Job.as_data`:

- ``version``: the format version; the harness refuses any other (:func:`check_job_format`);
- ``clock``: ``{"port", "period_ps"}`` (a multiple of 4) or null for a combinational design;
- ``reset``: ``{"port", "active", "inactive", "cycles"}`` or null;
- ``inputs``: ``[[name, width], ...]`` (the clock left out); ``outputs``: ``[[name, width, signed], ...]``;
- ``limits``: ``{"max_cycles", "wall_s"}``;
- ``evaluations``: entries :meth:`Evaluation.as_job_entry`: ``{"id", "mutant", "stop_on_fail",
  "tests"}``, each test ``{"name", "ops"}`` and each op ``[code, argument]`` (its step number is its
  position in the test, from 1); empty in warm mode, where the same entries arrive one JSON line
  each over the host's socket.

Bump the version on any change a harness of another version would misread.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

try:  # the fast extra: the same JSON, written and read in C
    import orjson
except ImportError:  # pragma: no cover - the plain json module does the same work
    orjson = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from hwtp.plans.format import Plan
    from hwtp.rtl.design import Design

#: A plan's compiled tests (:func:`compile_plan`), or their JSON array as :func:`encode_lines`
#: writes it (the reward path's plan reader writes them so: hwtp.plans.fastread).
CompiledTests = tuple[dict[str, Any], ...] | bytes

#: Version of the job format written in every job's header and checked by the harness.
JOB_FORMAT_VERSION = 2


class JobFormatError(ValueError):
    """A job file the harness cannot run (another format version, or not a job)."""


def check_job_format(job: object) -> None:
    """Refuse a job of another format version than this hwtp's (a host and a harness of
    different hwtp installations), with a message that says so."""
    if not isinstance(job, dict):
        raise JobFormatError(f"the job file holds {type(job).__name__}, not a job object")
    version = job.get("version")
    if version != JOB_FORMAT_VERSION:
        raise JobFormatError(
            f"job format version {version!r} is not this harness's version {JOB_FORMAT_VERSION}: "
            "the host and the simulator's hwtp differ; run both from one hwtp installation"
        )


@dataclass(frozen=True)
class Evaluation:
    """One run of a plan on one state (``mutant`` 0 is golden)."""

    id: str
    tests: CompiledTests
    mutant: int = 0
    stop_on_fail: bool = True
    cycles: int = 0
    observe: bool = False  # record each test's outputs and activation probes (hwtp score --diagnose)

    def test_list(self) -> list[dict[str, Any]]:
        """The compiled tests as data (read from their JSON when they were given written)."""
        return decode_line(self.tests) if isinstance(self.tests, bytes) else list(self.tests)  # type: ignore[no-any-return]

    def as_job_entry(self) -> dict[str, Any]:
        entry = {"id": self.id, "mutant": self.mutant, "stop_on_fail": self.stop_on_fail, "tests": self.test_list()}
        if self.observe:
            entry["observe"] = True
        return entry


def encode_json(data: Any) -> bytes:
    """``data`` as compact JSON, as the socket carries it (written by orjson when it can)."""
    if orjson is not None:
        try:
            return orjson.dumps(data)  # type: ignore[no-any-return]
        except TypeError:  # an integer wider than 64 bits
            pass
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def encode_line(data: Any) -> bytes:
    """One compact JSON line (``\\n``-terminated) of warm mode's socket: an evaluation's entry."""
    return encode_json(data) + b"\n"


def encode_lines(evaluations: Sequence[Evaluation]) -> list[bytes]:
    """The socket lines of ``evaluations``, each the bytes :func:`encode_line` writes of its
    entry; the tests that several evaluations share (a plan's golden run and its state's, the
    same ops object) are written once and spliced into each line, and tests given written are
    spliced as they are."""
    if orjson is None:
        return [encode_line(ev.as_job_entry()) for ev in evaluations]
    written: dict[int, bytes] = {}
    lines = []
    for ev in evaluations:
        tests = ev.tests if isinstance(ev.tests, bytes) else written.get(id(ev.tests))
        if tests is None:
            try:
                tests = written[id(ev.tests)] = orjson.dumps(list(ev.tests))
            except TypeError:  # an integer wider than 64 bits: encode_line's fallback
                lines.append(encode_line(ev.as_job_entry()))
                continue
        head = b'{"id":%b,"mutant":%d,"stop_on_fail":%b,"tests":' % (
            orjson.dumps(ev.id),
            ev.mutant,
            b"true" if ev.stop_on_fail else b"false",
        )
        lines.append(head + tests + (b',"observe":true}\n' if ev.observe else b"}\n"))
    return lines


def decode_line(line: bytes) -> Any:
    """The data of one JSON line (a result line of the harness)."""
    return orjson.loads(line) if orjson is not None else json.loads(line)


@dataclass(frozen=True)
class Limits:
    """Per-evaluation limits: simulated cycles (checked before running) and wall-clock
    seconds per evaluation; ``startup_s`` bounds a simulator process from its start until
    the harness reports it is ready (elaboration, Python start-up), counted apart, in CPU
    seconds of the process (a wall-clock backstop, :func:`hwtp.sim.procs.backstop`, catches one
    that is stuck or starved)."""

    max_cycles: int = 100_000
    wall_s: float = 30.0
    startup_s: float = 60.0
    #: Seconds for every evaluation of one executor call together (None: no such budget): the
    #: evaluations not run by then are ``timeout`` with fault ``budget``. It is a duration, not a
    #: time: whoever runs evaluations counts it on its own clock (a Ray executor hands each chunk
    #: what is left of it when the chunk leaves), so no clock is compared across machines.
    total_s: float | None = None
    #: Once an evaluation of a state exceeds ``wall_s``, the state's later evaluations in the same
    #: batch are not run (``timeout``, fault ``hang``); once golden stops the simulator, the
    #: mutants' evaluations up to the next golden one are not run (fault ``design``). The witness
    #: search's rule (:func:`hwtp.sim.runner.run_job`'s ``drop_hung``).
    drop_hung: bool = False

    @property
    def pooled(self) -> bool:
        """Whether a warm pool honours these limits: it bounds each evaluation, not a call, and
        simulates every evaluation it is given (a total budget or hang dropping runs in batched
        processes of its own, :func:`hwtp.sim.executors.local.run_batched`)."""
        return self.total_s is None and not self.drop_hung

    @property
    def key(self) -> str:
        """What a warm pool made for these limits is known by (a pool holds its limits for its life)."""
        return f"{self.max_cycles}:{self.wall_s:g}:{self.startup_s:g}"

    def deadline(self) -> float | None:
        """``time.monotonic()`` at which ``total_s``, counted from now, is spent (None: no budget)."""
        return None if self.total_s is None else time.monotonic() + self.total_s


def compile_plan(plan: Plan, design: Design) -> tuple[dict[str, Any], ...]:
    """Compile a validated plan into harness ops (one dict per test; each op a ``(code, argument)``
    pair, a JSON array on the socket, whose step number is its position in the test from 1)."""
    widths = {p.name: p.width for p in design.ports}
    compiled = []
    for test in plan.tests:
        ops: list[tuple[str, Any]] = []
        for step in test.steps:
            if step.kind in ("wait", "reset"):
                ops.append((step.kind[0], step.count))
            elif step.kind == "sample":
                ops.append(("s", 0))
            elif step.kind == "drive":
                ops.append(("d", [[n, v.masked(widths[n])[0]] for n, v in step.values]))
            else:
                ops.append(("e", [[n, *v.masked(widths[n]), v.literal()] for n, v in step.values]))
        compiled.append({"name": test.name, "ops": ops})
    return tuple(compiled)


def plan_cycles(plan: Plan, design: Design) -> int:
    """Clock cycles an evaluation of ``plan`` simulates, power-on resets included."""
    per_test = design.reset.cycles if design.reset else 0
    return plan.cycles + per_test * len(plan.tests)


@dataclass(frozen=True)
class Job:
    """Everything one simulator process runs."""

    design: Design
    evaluations: tuple[Evaluation, ...]
    limits: Limits = field(default_factory=Limits)

    def as_data(self) -> dict[str, Any]:
        d = self.design
        clock = {"port": d.clock.port, "period_ps": _period_ps(d.clock.period_ns)} if d.clock else None
        reset = (
            {
                "port": d.reset.port,
                "active": d.reset.active_value,
                "inactive": d.reset.inactive_value,
                "cycles": d.reset.cycles,
            }
            if d.reset
            else None
        )
        controls = {d.clock.port} if d.clock else set()
        return {
            "version": JOB_FORMAT_VERSION,
            "clock": clock,
            "reset": reset,
            "inputs": [[p.name, p.width] for p in d.inputs if p.name not in controls],
            "outputs": [[p.name, p.width, p.signed] for p in d.outputs],
            "limits": {"max_cycles": self.limits.max_cycles, "wall_s": self.limits.wall_s},
            "evaluations": [e.as_job_entry() for e in self.evaluations],
        }


def _period_ps(period_ns: float) -> int:
    """Clock period in picoseconds, rounded to a multiple of 4 so P/4 and P/2 are exact."""
    ps = max(4, round(period_ns * 1000))
    return ps - ps % 4
