"""``hwtp designs import``: candidates (:mod:`hwtp.corpus.sources`) checked and written as designs.

Each candidate is first examined in this thread (pyslang, milliseconds): read, parsed, its top
module found (``hwtp.rtl.frontend.top_modules``; several tops: the one named like the design, else a
rejection), its ports elaborated (no output: rejected), its clock and reset taken from the
overrides or guessed (``hwtp.rtl.design.guess_controls``), its system calls refused like any
untrusted design's. Identical RTL (:func:`hwtp.corpus.splits.content_identity`) is imported
once; later copies are duplicates. The survivors are verified in parallel (``jobs`` threads,
each driving its own simulator processes): the offline policy (``hwtp.policy.policies.make_policy``,
``random``) writes a reference plan whose expectations come from golden, and that plan is
scored on golden (``hwtp.scoring.score``) and must pass; a build failure, a golden simulation that
fails, or outputs the reference stimulus never changes (unobservable) reject the design.

A design is written to a private folder renamed into place, so DESIGNS_DIR never holds half a
design; ``import.json`` there records every design imported, rejected (with the reason) or
duplicated, by content identity, so a rerun skips what it already decided.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Any

from hwtp import yamlio
from hwtp.corpus.sources import Candidate
from hwtp.corpus.splits import content_identity
from hwtp.errors import ConfigError, DesignError, HwtpError
from hwtp.mutators.mutantset import GOLDEN, MutantSet
from hwtp.plans.files import PlanInput
from hwtp.plans.format import Plan, extract_plan, to_data
from hwtp.plans.values import Value
from hwtp.policy.policies import PlanRequest, PolicySpec, make_policy
from hwtp.rtl.design import (
    MANIFEST,
    Clock,
    ControlError,
    Design,
    Reset,
    check_trusted,
    clock_from,
    clocking_problem,
    edge_signals,
    guess_controls,
    load_design,
    reset_from,
)
from hwtp.rtl.frontend import SourceFile, check_syntax, elaborate, top_modules
from hwtp.scoring.score import Outcome, ScoreConfig, score
from hwtp.sim import procs
from hwtp.sim.executors.base import Executor
from hwtp.sim.simulate import describe_mismatch

SUMMARY = "import.json"
SUMMARY_VERSION = 1
_NAME_RE = re.compile(r"[^A-Za-z0-9_]")


class Status(str, Enum):
    IMPORTED = "imported"
    REJECTED = "rejected"
    DUPLICATE = "duplicate"


class Reason(str, Enum):
    """Why a design was rejected (the detail follows in ``reason``)."""

    INPUT = "input"  # unreadable files, no RTL, a manifest row that cannot be used
    PARSE = "parse"  # syntax or elaboration errors
    TOP = "top"  # no top module, or several and none named like the design
    NO_OUTPUTS = "no_outputs"
    CONTROLS = "controls"  # a clock or reset override that is wrong
    UNTRUSTED = "untrusted"  # system calls that run commands or write files
    BUILD = "build"  # the simulator could not build it
    GOLDEN = "golden"  # golden's simulation failed, or the reference plan did not pass on it
    UNOBSERVABLE = "unobservable"  # no output ever showed anything the stimulus did


class Rejected(Exception):
    def __init__(self, reason: Reason, detail: str, identity: str | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.identity = identity  # the RTL's, when it could be read


@dataclass(frozen=True)
class ImportConfig:
    jobs: int = 2
    seed: int = 0  # the offline policy's seed for the reference plan
    require_spec: bool = False
    allow_constant: bool = False  # keep designs whose outputs never change under the reference stimulus
    force: bool = False  # re-decide designs already in import.json


@dataclass
class Entry:
    """One line of the summary: a candidate and what became of it."""

    origin: str
    status: Status
    name: str | None = None
    identity: str | None = None
    reason: Reason | None = None
    detail: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    resumed: bool = False  # decided by an earlier import (not written in this one)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"origin": self.origin, "status": self.status.value, "name": self.name}
        out["identity"] = self.identity
        if self.reason is not None:
            out["reason"] = self.reason.value
            out["detail"] = self.detail
        if self.status == Status.DUPLICATE:
            out["of"] = self.detail
        out.update(self.info)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entry:
        status = Status(data["status"])
        info = {
            k: v for k, v in data.items() if k not in ("origin", "status", "name", "identity", "reason", "detail", "of")
        }
        reason = Reason(data["reason"]) if data.get("reason") else None
        detail = data.get("of") if status == Status.DUPLICATE else data.get("detail")
        return cls(data["origin"], status, data.get("name"), data.get("identity"), reason, detail, info, True)


@dataclass(frozen=True)
class Examined:
    """A candidate that parsed and elaborated: the design to verify (root not yet written)."""

    candidate: Candidate
    design: Design
    identity: str


def safe_name(raw: str) -> str:
    name = _NAME_RE.sub("_", raw.strip()) or "design"
    return name if not name[0].isdigit() else f"d_{name}"


def _read(path: Path) -> str:
    try:
        return yamlio.decode_utf8(path.read_bytes())
    except yamlio.TextDecodeError as exc:
        raise Rejected(Reason.INPUT, f"{path}:{exc.line}: {exc.message}") from exc
    except OSError as exc:
        raise Rejected(Reason.INPUT, f"{path}: cannot read: {exc.strerror}") from exc


def _source_names(paths: Sequence[Path]) -> list[str]:
    """``rtl/<file>`` for each source, numbered apart when two share a file name."""
    names: list[str] = []
    for p in paths:
        rel = f"rtl/{p.name}"
        k = 2
        while rel in names:
            rel = f"rtl/{p.stem}_{k}{p.suffix}"
            k += 1
        names.append(rel)
    return names


def _controls(candidate: Candidate, ports: Any, sources: Sequence[SourceFile]) -> tuple[Clock | None, Reset | None]:
    """Clock and reset: the manifest's, else guessed from names (any case) and from use
    (``posedge x``). A design with an edge on an input that is not its clock (several clocks,
    or a clock not set) is refused (:func:`hwtp.rtl.design.clocking_problem`): driving a clock as
    random data would import a clocked design as combinational."""
    edges = edge_signals(sources)
    guessed_clock, guessed_reset = guess_controls(ports, edges)
    try:
        clock = None if candidate.clock == "none" else clock_from(candidate.clock) if candidate.clock else guessed_clock
        if candidate.reset == "none" or (clock is None and not candidate.reset):
            reset = None  # a reset lasts clock cycles: none guessed without a clock
        else:
            reset = reset_from(candidate.reset) if candidate.reset else guessed_reset
    except ControlError as exc:
        raise Rejected(Reason.CONTROLS, str(exc)) from exc
    problem = clocking_problem(
        ports,
        edges,
        clock,
        reset,
        "give clock (a port) in a manifest row",
        chosen=bool(candidate.clock) and candidate.clock != "none",
    )
    if problem:
        raise Rejected(Reason.CONTROLS, problem)
    return clock, reset


def examine(candidate: Candidate, config: ImportConfig) -> Examined:
    """Read, parse and elaborate a candidate; :class:`Rejected` says why it cannot be a design."""
    if candidate.problem:
        raise Rejected(Reason.INPUT, candidate.problem)
    if not candidate.rtl:
        raise Rejected(Reason.INPUT, "no RTL files")
    texts = [_read(p) for p in candidate.rtl]
    identity = content_identity(texts)
    try:
        return _examine(candidate, config, texts, identity)
    except Rejected as exc:
        exc.identity = identity
        raise


def _examine(candidate: Candidate, config: ImportConfig, texts: list[str], identity: str) -> Examined:
    try:
        sources = tuple(SourceFile(rel, text) for rel, text in zip(_source_names(candidate.rtl), texts, strict=True))
    except DesignError as exc:
        raise Rejected(Reason.INPUT, str(exc)) from exc
    spec = candidate.spec_text or (_read(candidate.spec) if candidate.spec is not None else "")
    if config.require_spec and not spec.strip():
        raise Rejected(Reason.INPUT, "no spec (--require-spec)")
    name = safe_name(candidate.name)
    try:
        check_syntax(sources)
        tops = [candidate.top] if candidate.top else top_modules(sources)
    except DesignError as exc:
        raise Rejected(Reason.PARSE, _relative(str(exc), candidate)) from exc
    if not tops:
        raise Rejected(Reason.TOP, "no top module (every module is instantiated by another)")
    if len(tops) > 1:
        named = [t for t in tops if t in (candidate.name, name)]
        if len(named) != 1:
            raise Rejected(Reason.TOP, f"several top modules ({', '.join(tops)}): give top in a manifest")
        tops = named
    top = tops[0]
    try:
        ports = elaborate(sources, top)
    except DesignError as exc:
        reason = Reason.TOP if "no module named" in str(exc) else Reason.PARSE
        raise Rejected(reason, _relative(str(exc), candidate)) from exc
    if not any(p.direction == "output" for p in ports):
        raise Rejected(Reason.NO_OUTPUTS, f"module {top} has no outputs: nothing a plan could check")
    try:
        check_trusted(sources, Path(candidate.origin), top)
    except DesignError as exc:
        raise Rejected(Reason.UNTRUSTED, str(exc)) from exc
    clock, reset = _controls(candidate, ports, sources)
    for role, control in (("clock", clock), ("reset", reset)):
        port = next((p for p in ports if control is not None and p.name == control.port), None)
        if control is not None and (port is None or port.direction != "input" or port.width != 1):
            raise Rejected(Reason.CONTROLS, f"{role}: port {control.port!r} must be a 1-bit input of module {top}")
    design = Design(name, top, Path(candidate.origin), sources, spec, clock, reset, ports)
    return Examined(candidate, design, identity)


def _relative(message: str, candidate: Candidate) -> str:
    """A pyslang message names sources as ``rtl/<file>``: name the original file instead."""
    for rel, path in zip(_source_names(candidate.rtl), candidate.rtl, strict=True):
        message = message.replace(f"{rel}:", f"{path}:")
    return message


def reference_plan(design: Design, seed: int, executor: Executor | None = None) -> Plan:
    """The offline policy's plan for ``design`` (expectations from golden), checked on golden
    (on ``executor``, default a process here): :class:`Rejected` when it cannot be built,
    golden fails, or nothing is observable."""
    mutant_set = MutantSet(design, seed, ())
    policy = make_policy(PolicySpec("random", seed=seed), mutant_set, executor)
    try:
        generated = policy.generate([PlanRequest(GOLDEN, [])], 1)[0][0]
    except procs.Interrupted:
        raise
    except DesignError as exc:
        raise Rejected(Reason.BUILD, str(exc)) from exc
    except HwtpError as exc:  # a C++ build failure of the model, a simulator that never starts
        raise Rejected(Reason.BUILD, f"{type(exc).__name__}: {exc}") from exc
    if generated.text is None:
        raise Rejected(Reason.GOLDEN, generated.error or "the offline policy wrote no plan")
    plan = extract_plan(generated.text, source="reference")
    expects = [step for test in plan.tests for step in test.steps if step.kind == "expect"]
    if not expects:
        raise Rejected(
            Reason.UNOBSERVABLE, "golden's outputs were unknown (x) at every sample of the reference stimulus"
        )
    try:
        reference = [PlanInput("reference", plan, source="reference")]
        scores = score(mutant_set, reference, ScoreConfig(states=(GOLDEN,)), executor=executor)
    except HwtpError as exc:
        raise Rejected(Reason.GOLDEN, f"scoring the reference plan: {exc}") from exc
    result = scores.results[0]
    if result.outcome != Outcome.PASSED:
        detail = result.detail or {}
        why = (
            f"test {detail.get('test')}, {describe_mismatch(detail)}"
            if "port" in detail
            else str(detail.get("reason") or "no detail")
        )
        raise Rejected(Reason.GOLDEN, f"the reference plan did not pass on golden: {result.outcome.value}: {why}")
    return plan


def constant_outputs(plan: Plan) -> dict[str, str] | None:
    """Each output's one value when no output ever changed over the plan's expectations, else None."""
    values: dict[str, set[str]] = {}
    for test in plan.tests:
        for step in test.steps:
            if step.kind == "expect":
                for port, value in step.values:  # as Verilog writes it (0, 8'h1f, 4'b10x1), never a repr
                    values.setdefault(port, set()).add(str(value.literal() if isinstance(value, Value) else value))
    if any(len(v) > 1 for v in values.values()):
        return None
    return {port: next(iter(v)) for port, v in values.items()}


def write_design(design: Design, plan: Plan, outdir: Path) -> Path:
    """The design folder ``outdir/NAME`` (design.yaml, rtl/, spec.md, plans/reference.yaml),
    made in a private folder and renamed into place."""
    outdir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-{design.name}-", dir=outdir))
    try:
        for src in design.sources:
            (work / src.path).parent.mkdir(parents=True, exist_ok=True)
            (work / src.path).write_text(src.text, encoding="utf-8")
        manifest: dict[str, Any] = {"name": design.name, "top": design.top, "sources": [s.path for s in design.sources]}
        if design.spec.strip():
            (work / "spec.md").write_text(design.spec, encoding="utf-8")
            manifest["spec"] = "spec.md"
        if design.clock:
            manifest["clock"] = {"port": design.clock.port, "period_ns": design.clock.period_ns}
        if design.reset:
            manifest["reset"] = {
                "port": design.reset.port,
                "active": design.reset.active,
                "cycles": design.reset.cycles,
            }
        (work / MANIFEST).write_text(yamlio.dump(manifest), encoding="utf-8")
        (work / "plans").mkdir()
        (work / "plans" / "reference.yaml").write_text(yamlio.dump(to_data(plan)), encoding="utf-8")
        load_design(work)  # what hwtp will read: it must load
        final = outdir / design.name
        if final.exists():
            shutil.rmtree(final)
        os.rename(work, final)
        return final
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


@dataclass
class ImportSummary:
    outdir: Path
    entries: list[Entry]
    seconds: float = 0.0

    def count(self, status: Status, resumed: bool | None = None) -> int:
        return sum(1 for e in self.entries if e.status == status and (resumed is None or e.resumed == resumed))

    def as_dict(self) -> dict[str, Any]:
        reasons: dict[str, int] = {}
        for e in self.entries:
            if e.reason is not None:
                reasons[e.reason.value] = reasons.get(e.reason.value, 0) + 1
        return {
            "version": SUMMARY_VERSION,
            "counts": {s.value: self.count(s) for s in Status} | {"rejected_by_reason": reasons},
            "seconds": round(self.seconds, 3),
            "designs": [e.as_dict() for e in self.entries],
        }


def read_summary(outdir: Path) -> list[Entry]:
    path = outdir / SUMMARY
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("version") != SUMMARY_VERSION:
            raise ValueError(f"version {data.get('version')!r}, not {SUMMARY_VERSION}")
        return [Entry.from_dict(d) for d in data["designs"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: malformed import summary ({exc}); move it away to import afresh") from exc


def _write_summary(summary: ImportSummary) -> None:
    path = summary.outdir / SUMMARY
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary.as_dict(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def import_designs(
    candidates: Sequence[Candidate],
    outdir: Path,
    config: ImportConfig,
    progress: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Examine, deduplicate, verify (in parallel) and write ``candidates`` into ``outdir``,
    resuming from its ``import.json``; returns the summary (also written there)."""
    start = time.perf_counter()
    outdir.mkdir(parents=True, exist_ok=True)
    procs.sweep(outdir, ".tmp-")
    previous = [] if config.force else read_summary(outdir)
    # what an earlier import decided, by identity (imported only while its folder is there)
    known: dict[str, Entry] = {}
    for e in previous:
        if e.status == Status.DUPLICATE or not e.identity:
            continue
        if e.status == Status.REJECTED or (outdir / str(e.name) / MANIFEST).is_file():
            known.setdefault(e.identity, e)
    taken = {str(e.name): str(e.identity) for e in known.values() if e.status == Status.IMPORTED}
    # rejected rows, by what they asked for and the files they named (a changed row or file is decided again)
    rejected = {str(e.info["row"]): e for e in previous if e.status == Status.REJECTED and e.info.get("row")}
    entries: list[Entry] = []
    todo: list[tuple[Entry, Examined]] = []
    claimed: dict[str, Entry] = {}  # identity -> the entry of this import that owns it
    for candidate in candidates:
        decided = _decided(candidate, config, known, claimed, rejected)
        if isinstance(decided, Entry):
            entries.append(decided)
            if decided.identity and decided.status != Status.DUPLICATE:
                claimed.setdefault(decided.identity, decided)
            if progress:
                progress(1)
            continue
        ident = decided.identity
        name = decided.design.name
        if name not in taken and (outdir / name / MANIFEST).is_file():  # written before the summary was
            taken[name] = _folder_identity(outdir / name) or ""
        if taken.get(name) == ident and (outdir / name / "plans" / "reference.yaml").is_file():
            entry = Entry(
                candidate.origin, Status.IMPORTED, name, ident, info=_info(decided.design, candidate), resumed=True
            )
            claimed[ident] = entry
            entries.append(entry)
            if progress:
                progress(1)
            continue
        if name in taken and taken[name] != ident:
            name = f"{name}_{ident[:6]}"
        taken[name] = ident
        design = replace(decided.design, name=name)
        entry = Entry(candidate.origin, Status.IMPORTED, name, ident, info=_info(design, candidate))
        claimed[ident] = entry
        entries.append(entry)
        todo.append((entry, Examined(candidate, design, ident)))

    origins = {e.origin for e in entries}
    kept = [e for e in previous if e.origin not in origins]  # decided by earlier imports of other sources
    summary = ImportSummary(outdir, [*kept, *entries])
    lock = threading.Lock()

    def verify(item: tuple[Entry, Examined]) -> None:
        entry, examined = item
        try:
            plan = reference_plan(examined.design, config.seed)
            constant = constant_outputs(plan)
            if constant is not None and not config.allow_constant:
                shown = ", ".join(f"{k}={v}" for k, v in sorted(constant.items()))
                raise Rejected(
                    Reason.UNOBSERVABLE,
                    f"no output changed under the reference stimulus ({shown} throughout); --allow-constant keeps it",
                )
            write_design(examined.design, plan, outdir)
        except Rejected as exc:
            entry.status, entry.reason, entry.detail = Status.REJECTED, exc.reason, exc.detail
            entry.info = {"row": entry.info.get("row")}
        with lock:  # a killed import resumes from what is recorded (imported: only with its folder)
            _write_summary(summary)
        if progress:
            progress(1)

    procs.map_threads(verify, todo, config.jobs)
    summary.seconds = time.perf_counter() - start
    _write_summary(summary)
    return summary


def _decided(
    candidate: Candidate,
    config: ImportConfig,
    known: dict[str, Entry],
    claimed: dict[str, Entry],
    rejected: dict[str, Entry],
) -> Entry | Examined:
    """The entry of a candidate decided without simulating it (rejected on reading, a duplicate,
    decided by an earlier import of this very row: ``rejected`` and ``known`` by
    :func:`row_key`), else the candidate examined, to verify."""
    row = {"row": row_key(candidate)}
    prior = rejected.get(row["row"])
    if prior is not None and prior.identity not in claimed:  # the same row on the same files: the same verdict
        return Entry(
            candidate.origin, prior.status, prior.name, prior.identity, prior.reason, prior.detail, prior.info, True
        )
    try:
        examined = examine(candidate, config)
    except Rejected as exc:
        ident = exc.identity
        if ident and ident in claimed:
            return Entry(
                candidate.origin, Status.DUPLICATE, safe_name(candidate.name), ident, detail=claimed[ident].name
            )
        return Entry(candidate.origin, Status.REJECTED, safe_name(candidate.name), ident, exc.reason, exc.detail, row)
    ident = examined.identity
    if ident in claimed:
        return Entry(candidate.origin, Status.DUPLICATE, examined.design.name, ident, detail=claimed[ident].name)
    prior = known.get(ident)
    if prior is None or prior.status == Status.REJECTED:
        return examined  # new, or rejected for a row that asked otherwise: decided again
    if prior.info.get("row") == row["row"]:
        return Entry(candidate.origin, prior.status, prior.name, ident, prior.reason, prior.detail, prior.info, True)
    if prior.origin == candidate.origin:
        return examined  # its manifest row changed since: decided again
    return Entry(candidate.origin, Status.DUPLICATE, prior.name, ident, detail=prior.name, resumed=True)


def _folder_identity(folder: Path) -> str | None:
    try:
        return content_identity(s.text for s in load_design(folder).sources)
    except HwtpError:
        return None


def _digest(path: Path | None) -> str | None:
    """The file's content digest; None when there is no file (or it cannot be read)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path is not None else None
    except OSError:
        return None


def row_key(candidate: Candidate) -> str:
    """What the candidate's manifest row (or folder) asks for, and the content of the files it
    names: a changed row, or a changed, added or removed file, is decided again (no ``--force``)."""
    asked = [
        candidate.name,
        [str(p) for p in candidate.rtl],
        [_digest(p) for p in candidate.rtl],
        str(candidate.spec or ""),
        _digest(candidate.spec),
        candidate.spec_text or "",
        candidate.top,
        candidate.clock,
        candidate.reset,
        candidate.problem,
    ]
    return hashlib.sha256(json.dumps(asked, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _info(design: Design, candidate: Candidate) -> dict[str, Any]:
    return {
        "row": row_key(candidate),
        "kind": design.kind,
        "top": design.top,
        "clock": design.clock.port if design.clock else None,
        "reset": design.reset.port if design.reset else None,
        "spec": bool(design.spec.strip()),
    }
