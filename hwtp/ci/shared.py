"""One simulator process for many mutants, checked for soundness against a process per mutant.

A shared process (:mod:`hwtp.ci.sharedtests` inside it) runs the user's unchanged tests once per
state: before each state the mutant selector is set and every signal's power-on value is written
back, as ``hwtp score`` does between evaluations. Each state keeps its wall-clock timeout: the
host reads the process's progress lines and, when one state runs over, stops the process, calls
that state ``timeout`` and starts another process with the states left (results already
finished are read from the JUnit the process rewrites at every state). A crash is the running
state's ``error``; the rest resume the same way.

Sound means: every state's tests give in the shared process what they give in a process of
their own. Two checks, and a process per mutant (with a message) when either fails:

- always: each shared process runs golden twice first; both must match the golden run in its
  own process (same tests failing, none). A test that reads absolute simulation time, or keeps
  global state between runs, fails this (its second run starts later, after another).
- on first use of a testbench (no record for its build and test sources in the cache) and on
  ``--verify``: a sample of mutants (killed and survived ones) is also run one process each;
  status and failing tests must agree. One that differs (golden agreeing) takes its own
  process's result and a second sample is checked: when that agrees, only that mutant runs
  alone from then on (the record's ``alone``); two that differ make it a process per mutant.
  A timeout in either mode is no verdict. The verdict is recorded in the cache.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyslang

from hwtp import env
from hwtp.ci import diagnosis, sharedtests
from hwtp.ci.config import CiConfig
from hwtp.ci.runs import (
    Run,
    TestOutcome,
    TestStatus,
    environment,
    parse_results,
    run_of,
    run_tests,
    working_folder,
)
from hwtp.mutators.schemata import PLUSARG
from hwtp.rtl.design import Design, SourceFile
from hwtp.rtl.frontend import NO_OPTIONS, BuildOptions, compile_top, module_declarations, parse
from hwtp.sim import procs
from hwtp.sim.buildcache import Build
from hwtp.sim.runner import EvalStatus, log_tail

#: Mutants run both ways when a testbench is checked (first use, --verify).
SAMPLE = 4
#: Wall-clock seconds a shared process may take to reach its first state (start-up, imports).
STARTUP_S = 120.0
_POLL_S = 0.1
#: Folders under tests.paths that hold no test code (a project root may be on the path).
_NOT_TESTS = frozenset({"__pycache__", "sim_build", "build", "venv", "site-packages", "node_modules"})
_LOG_TAIL_LINES = 25


class SharedUnavailable(Exception):
    """The shared process did not get to its first state (the reason has its log tail)."""


@dataclass
class _Mark:
    position: int
    wall: float
    differ: list[str]  # signals whose power-on value could not be restored for this state


def _job(folder: Path, states: Sequence[int], config: CiConfig, power_on: dict[str, object] | None) -> Path:
    path = folder / "job.json"
    path.write_text(json.dumps({"states": list(states), "modules": list(config.test_modules), **(power_on or {}),
                                "filter": config.test_filter, "progress": str(folder / "progress.jsonl"),
                                "partial": str(folder / "partial.xml"), "tests": str(folder / "tests.json")}),
                    encoding="utf-8")
    return path


def _marks(path: Path) -> list[_Mark]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            break  # a line being written
        out.append(_Mark(int(row["position"]), float(row["wall"]), list(row.get("differ", []))))
    return out


def _groups(tests: Sequence[TestOutcome], user: Sequence[tuple[str, str]]
            ) -> list[tuple[TestOutcome, list[TestOutcome]]]:
    """The results file regrouped by state: (its power-on marker, its user tests in ``user``'s
    order). cocotb's JUnit groups test cases by module, in the order each module's ran; a state
    is complete when every module holds all of its tests."""
    by_module: dict[str, list[TestOutcome]] = {}
    for t in tests:
        by_module.setdefault(t.module, []).append(t)
    markers = [t for t in by_module.get(sharedtests.__name__, []) if t.name == sharedtests.POWER_ON]
    per_state: dict[str, int] = {}
    for module, _name in user:
        per_state[module] = per_state.get(module, 0) + 1
    groups: list[tuple[TestOutcome, list[TestOutcome]]] = []
    for position, marker in enumerate(markers):
        taken: dict[str, int] = {}
        group = []
        for module, _name in user:
            k = position * per_state[module] + taken.get(module, 0)
            taken[module] = taken.get(module, 0) + 1
            row = by_module.get(module, [])
            if k >= len(row):
                return groups
            group.append(row[k])
        groups.append((marker, group))
    return groups


def _one_process(build: Build, config: CiConfig, states: Sequence[int], folder: Path, timeout_s: float,
                 power_on: dict[str, object] | None, watch: diagnosis.Watch | None = None,
                 advance: Callable[[int], None] | None = None,
                 ) -> tuple[list[Run | None], dict[int, list[str]]]:
    """Run ``states`` in one process: a Run per state (None for those it did not get to), and
    the states whose power-on state could not be restored, with the signals that differed."""
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    results, partial, log_path = folder / "results.xml", folder / "partial.xml", folder / "sim.log"
    environ = environment(build, config, results)
    environ["COCOTB_TEST_MODULES"] = sharedtests.__name__
    environ.pop("COCOTB_TEST_FILTER", None)  # applied by sharedtests, to the user's tests only
    environ[env.CI_SHARED_VAR] = str(_job(folder, states, config, power_on))
    if watch is not None:
        environ[env.CI_OBSERVE_VAR] = str(watch.job(folder, 0, config.test_modules, config.test_filter))
    argv = build.backend.command(build.path, config.top, [f"+{PLUSARG}=0"])
    start = time.perf_counter()
    timed_out = False
    marks: list[_Mark] = []
    with log_path.open("w", encoding="utf-8") as out, procs.supervised(
        argv, cwd=working_folder(config, folder), env=environ, stdout=out, stderr=subprocess.STDOUT
    ) as proc:
        seen_at = start  # host time the last mark was seen
        while not procs.wait(proc, _POLL_S):
            now = time.perf_counter()
            new = _marks(folder / "progress.jsonl")
            if len(new) != len(marks):
                if advance is not None and len(new) > len(marks):
                    advance(len(new) - max(len(marks), 1))  # a new mark: the state before it finished
                marks, seen_at = new, now
            budget = timeout_s if marks else STARTUP_S
            if now - seen_at > budget:
                timed_out = True
                break
        marks = _marks(folder / "progress.jsonl")
    end_wall = time.time()
    tail = log_tail(log_path, _LOG_TAIL_LINES)
    if not marks:
        raise SharedUnavailable(f"the shared simulator process did not start its tests "
                                f"({'stopped after ' + format(STARTUP_S, 'g') + ' s' if timed_out else 'it ended'});"
                                f" log tail:\n{tail}")
    done = results.is_file()
    source = results if done else partial
    try:
        user = [(m, n) for m, n in json.loads((folder / "tests.json").read_text(encoding="utf-8"))]
        groups = _groups(parse_results(source), user) if source.is_file() else []
    except (OSError, ValueError):
        groups = []
    walls = [m.wall for m in marks] + [end_wall]
    runs: list[Run | None] = [None] * len(states)
    for position, (marker, tests) in enumerate(groups[: len(states)]):
        if position >= len(marks):
            break  # recorded after a simulator failure, never run
        seconds = walls[position + 1] - walls[position]
        if marker.status == TestStatus.FAILED:
            runs[position] = Run(EvalStatus.ERROR, (), seconds, f"power-on failed: {marker.message}")
        else:
            runs[position] = run_of(tuple(tests), seconds, tail)
    if watch is not None:
        seen = diagnosis.read(folder, watch)
        runs = [r.with_observations(seen.get(k, [])) if r is not None else None for k, r in enumerate(runs)]
    current = marks[-1].position
    if current < len(states) and runs[current] is None:
        seconds = end_wall - marks[-1].wall
        if timed_out:
            runs[current] = Run(EvalStatus.TIMEOUT, (), seconds, f"stopped after the {timeout_s:g} s timeout")
        elif not done:
            runs[current] = Run(EvalStatus.ERROR, (), seconds,
                                f"the simulator ended during this state (exit code {proc.returncode}); "
                                f"log tail:\n{tail}")
    return runs, {m.position: m.differ for m in marks if m.differ and m.position < len(states)}


def run_shared(build: Build, config: CiConfig, states: Sequence[int], folder: Path, timeout_s: float,
               power_on: dict[str, object] | None = None, watch: diagnosis.Watch | None = None,
               advance: Callable[[int], None] | None = None,
               ) -> tuple[list[Run], dict[int, list[str]]]:
    """A Run per state (in order) from as few shared processes as timeouts and crashes allow, and
    the positions whose power-on state could not be restored (their runs are not to be used).
    ``advance`` is told how many more states finished, as the process reports them (progress)."""
    runs: list[Run | None] = [None] * len(states)
    tainted: dict[int, list[str]] = {}
    attempt = 0
    while left := [i for i, r in enumerate(runs) if r is None]:
        got, differ = _one_process(build, config, [states[i] for i in left], folder / f"p{attempt}", timeout_s,
                                   power_on, watch, advance)
        attempt += 1
        if all(r is None for r in got):  # no progress: do not loop
            got[0] = Run(EvalStatus.ERROR, (), 0.0, "the shared simulator process gave no result")
        for k, (i, run) in enumerate(zip(left, got, strict=True)):
            runs[i] = run
            if k in differ:
                tainted[i] = differ[k]
    return [r for r in runs if r is not None], tainted


def same(a: Run, b: Run) -> bool:
    """Two runs of one state agree: the same status and the same failing tests."""
    return a.status == b.status and {(t.module, t.name) for t in a.failed} == {(t.module, t.name) for t in b.failed}


def _why(what: str, shared: Run, alone: Run) -> str:
    def show(run: Run) -> str:
        if run.failed:
            return "fails " + ", ".join(f"{t.module}.{t.name}" for t in run.failed)
        return "passes" if run.status == EvalStatus.PASS else run.status.value
    return f"{what}: {show(alone)} in a process of its own but {show(shared)} in the shared process"


def _outputs_differ(run: Run) -> str:
    """How an observed golden run's outputs differ from golden's in a process of its own ("": not)."""
    o = next((o for o in run.observed if o.propagated), None)
    if o is None:
        return ""
    return f"output {o.signal} differs at {o.propagated_ns:g} ns of {o.test} from golden's in a process of its own"


#: Why a mutant differs when shared though golden agrees (what its run alone reaches, golden's does not).
_AFTER = ("what such a mutant's tests do depends on what ran before them in the process (a branch only it "
          "reaches reads absolute simulation time, or state the tests or the design keep between runs)")

#: Bumped when what makes a shared process sound changes (2: initial-block mutants run alone,
#: output registers in generate blocks are restored; 3: one mutant that differs runs alone, a
#: timeout is no verdict): an older verdict is not reused.
VERDICT_RULES = 3


def soundness_key(build: Build, config: CiConfig) -> str:
    """The build and everything of the testbench a verdict depends on (the tests' Python files)."""
    h = hashlib.sha256(json.dumps([VERDICT_RULES, build.key, config.test_modules, config.test_filter, config.test_env,
                                   config.random_seed, config.top, str(config.test_dir or "")]).encode())
    for folder in config.test_paths:
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).parts[:-1]
            if not any(p.startswith(".") or p in _NOT_TESTS for p in parts):
                h.update(f"\0{path.relative_to(folder)}\0".encode() + path.read_bytes())
    return h.hexdigest()


def _record_path(key: str) -> Path:
    return env.cache_dir() / "ci-shared" / f"{key[:32]}.json"


def _record(key: str) -> dict[str, object] | None:
    try:
        data = json.loads(_record_path(key).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _save(key: str, sound: bool, reason: str, alone: Sequence[int] = (), cause: str = "") -> None:
    """The verdict on a testbench; ``alone``: mutants that differ when shared (``cause``: why),
    run in a process of their own while the rest share."""
    path = _record_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{threading.get_ident()}.tmp")
    data: dict[str, object] = {"sound": sound, "reason": reason}
    if alone:
        data.update(alone=list(alone), cause=cause)
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(path)


def _record_reason(record: dict[str, object] | None) -> str:
    """Why a record's ``alone`` mutants run in a process of their own."""
    return str((record or {}).get("cause") or "they differ in a shared process")


def _sample(runs: dict[int, Run], size: int) -> list[int]:
    """Up to ``size`` mutants, killed and survived alternately, spread over the run."""
    killed = [m for m, r in runs.items() if r.status == EvalStatus.FAIL]
    survived = [m for m, r in runs.items() if r.status == EvalStatus.PASS]

    def spread(items: list[int], k: int) -> list[int]:
        if k <= 0 or not items:
            return []
        step = len(items) / min(k, len(items))
        return [items[int(i * step)] for i in range(min(k, len(items)))]

    take_s = min(len(survived), size // 2)
    picked = spread(killed, size - take_s) + spread(survived, take_s)
    return sorted(picked)


@dataclass(frozen=True)
class Outcome:
    """The mutants' runs and how they were run (for the report and the terminal)."""

    runs: dict[int, Run]
    mode: str         # "shared" or "process"
    note: str         # one line: processes used, or why a process per mutant


_SK = pyslang.syntax.SyntaxKind
#: Blocks whose assignments hold state between evaluations (always_comb recomputes).
_STATEFUL_BLOCKS = {_SK.AlwaysBlock, _SK.AlwaysFFBlock, _SK.AlwaysLatchBlock, _SK.InitialBlock}
_WRITES = {_SK.AssignmentExpression, _SK.NonblockingAssignmentExpression}


def _procedural_targets(trees: Sequence[Any], top: str) -> set[str]:
    """Names the top module's always/initial blocks assign: the only output variables that hold
    state. An output variable driven by ``assign`` or an instance port (``output logic`` in
    SystemVerilog) is recomputed from the rest, like a net."""
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, pyslang.syntax.BinaryExpressionSyntax) and node.kind in _WRITES:
            token = node.left.getFirstToken()
            if token is not None:
                names.add(token.valueText)

    def blocks(node: Any) -> None:  # always/initial blocks, in generate blocks too
        if getattr(node, "kind", None) in _STATEFUL_BLOCKS:
            node.visit(visit)

    for tree in trees:
        for module in module_declarations(tree):
            if module.header.name.valueText == top:
                module.visit(blocks)
    return names


def run_once(sources: Sequence[SourceFile], options: BuildOptions, sites: Sequence[tuple[str, int]]) -> set[int]:
    """Which of ``sites`` ((file, offset)) lie in an ``initial`` block: code that runs once per
    simulator process, before a shared process selects any mutant, so such a mutant runs in a
    process of its own (by the index of ``sites``)."""
    manager, trees = parse(sources, options)
    spans: list[tuple[str, int, int]] = []

    def visit(node: Any) -> None:
        if getattr(node, "kind", None) == _SK.InitialBlock:
            start = node.sourceRange.start
            spans.append((str(manager.getFileName(start)), int(start.offset), int(node.sourceRange.end.offset)))

    for tree in trees:
        tree.root.visit(visit)
    return {i for i, (file, offset) in enumerate(sites) if any(f == file and a <= offset < b for f, a, b in spans)}


def power_on_job(design: Design, options: BuildOptions = NO_OPTIONS) -> dict[str, object]:
    """What the shared process needs to restore power-on state (see :mod:`hwtp.ci.sharedtests`):
    the top's output ports that hold state (variables, not nets, that an always or initial block
    assigns: a simulator may not let them be written, so they are checked after restoring), and
    the clock and reset it may pulse. ``options``: the build's include folders, defines and
    parameters (the RTL is parsed as built)."""
    _manager, trees = parse(design.sources, options)
    compilation = compile_top(trees, design.top, options)
    stateful = _procedural_targets(trees, design.top)
    check = [port.name for inst in compilation.getRoot().topInstances if inst.name == design.top
             for port in inst.body.portList
             if getattr(port, "internalSymbol", None) is not None
             and port.internalSymbol.kind != pyslang.ast.SymbolKind.Net and port.name in stateful]
    reset = None
    if design.clock is not None and design.reset is not None:
        reset = {"clock": design.clock.port, "port": design.reset.port, "active": design.reset.active_value,
                 "cycles": design.reset.cycles}
    return {"reset": reset, "check": check}


def run_mutants(build: Build, config: CiConfig, mutants: Sequence[int], golden: Run, folder: Path,
                timeout_s: float, power_on: dict[str, object] | None = None, verify: bool = False,
                progress: Callable[[int, Run], None] | None = None, watch: diagnosis.Watch | None = None,
                solo: Collection[int] = (), advance: Callable[[int], None] | None = None,
                labels: dict[int, str] | None = None) -> Outcome:
    """Run every mutant, in shared processes when sound (see the module docstring), else one
    process each; ``power_on`` is :func:`power_on_job`; ``progress`` is told each mutant's run as it is known;
    ``watch``: observe each test (:mod:`hwtp.ci.observe`), in either mode; ``advance``: states a shared
    process finished, as they finish (its results are told only once checked). ``solo``: mutants that
    always run in a process of their own (in an ``initial`` block, :func:`run_once`); they take
    no part in the soundness check, so they never make a testbench unsound. ``labels``: how the
    messages name each mutant (its id and place)."""
    lock = threading.Lock()
    labels = labels or {}

    def tell(m: int, run: Run) -> None:
        if progress:
            with lock:
                progress(m, run)

    def alone(m: int) -> Run:
        return run_tests(build, config, m, folder / f"m{m}", timeout_s, watch)

    def per_process(todo: Sequence[int], why: str) -> Outcome:
        def one(m: int) -> tuple[int, Run]:
            run = alone(m)
            tell(m, run)
            return m, run
        runs = dict(procs.map_threads(one, list(todo), min(config.jobs, len(todo) or 1)))
        return Outcome(runs, "process", why)

    if not config.shared or not mutants:
        return per_process(mutants, "one process per mutant" + ("" if config.shared else " (shared: false)"))
    alone_first = [m for m in mutants if m in solo]
    if alone_first:
        shared_part = run_mutants(build, config, [m for m in mutants if m not in solo], golden, folder, timeout_s,
                                  power_on, verify, progress, watch, advance=advance, labels=labels)
        runs_solo = per_process(alone_first, "")
        note = (f"{shared_part.note}; {len(alone_first)} mutant{'s' if len(alone_first) > 1 else ''} in an "
                "initial block ran in a process of their own (an initial block runs once per process)")
        return Outcome({**shared_part.runs, **runs_solo.runs}, shared_part.mode, note)
    key = soundness_key(build, config)
    record = _record(key)
    if record is not None and not record.get("sound") and not verify:
        return per_process(mutants, f"one process per mutant: this testbench is not sound in a shared "
                                    f"process ({record.get('reason')}); --verify checks it again")
    listed = (record or {}).get("alone")
    remembered = {m for m in listed if isinstance(m, int)} if isinstance(listed, list) and not verify else set()
    if remembered & set(mutants):  # mutants an earlier check found differ when shared: alone, the rest shared
        rest = run_mutants(build, config, [m for m in mutants if m not in remembered], golden, folder, timeout_s,
                           power_on, verify, progress, watch, advance=advance, labels=labels)
        own = per_process([m for m in mutants if m in remembered], "")
        return Outcome({**rest.runs, **own.runs}, rest.mode,
                       f"{rest.note}; {len(own.runs)} ran in a process of their own ({_record_reason(record)})")
    n_proc = max(1, min(config.jobs, len(mutants)))
    chunks = [list(mutants[i::n_proc]) for i in range(n_proc)]

    def chunk(i: int) -> tuple[list[Run], dict[int, list[str]]]:
        return run_shared(build, config, [0, 0, *chunks[i]], folder / f"shared{i}", timeout_s, power_on, watch,
                          advance)

    got = procs.map_threads(chunk, range(n_proc), n_proc)
    problems = [_why(f"golden, run {k + 1} in shared process {i + 1}", r, golden)
                for i, (runs_i, tainted_i) in enumerate(got) for k, r in enumerate(runs_i[:2])
                if k not in tainted_i and not same(r, golden)]
    problems += [f"golden, run {k + 1} in shared process {i + 1}: {differs}"
                 for i, (runs_i, tainted_i) in enumerate(got) for k, r in enumerate(runs_i[:2])
                 if k not in tainted_i and (differs := _outputs_differ(r))]
    runs: dict[int, Run] = {}
    redo: dict[int, list[str]] = {}
    for i, (runs_i, tainted_i) in enumerate(got):
        for k, (m, r) in enumerate(zip(chunks[i], runs_i[2:], strict=True)):
            if k + 2 in tainted_i:
                redo[m] = tainted_i[k + 2]
            else:
                runs[m] = r
    if redo:  # power-on state not restorable for these: their own process each
        runs.update(zip(redo, procs.map_threads(alone, list(redo), min(config.jobs, len(redo))), strict=True))
    differ: dict[int, str] = {}  # mutants whose shared run differs from their own process's (golden agreed)
    if problems:  # golden itself: the tests depend on when they run, or on an earlier run
        reason = (f"a shared process did not give what a process of its own gives: {problems[0]} (tests "
                  "that read absolute simulation time or keep state between runs do this)")
        _save(key, False, reason)
        return per_process(mutants, f"one process per mutant: {reason}")
    if record is None or verify:
        checked: list[int] = []
        pool = {m: r for m, r in runs.items() if m not in redo}
        for _round in range(2):  # a mutant that differs: a second sample decides whether the rest may share
            sample = _sample({m: r for m, r in pool.items() if m not in checked}, SAMPLE)
            alone_runs = dict(zip(sample, procs.map_threads(alone, sample, min(config.jobs, len(sample) or 1)),
                                  strict=True))
            checked += sample
            for m, solo_run in alone_runs.items():
                if not same(runs[m], solo_run) and EvalStatus.TIMEOUT not in (runs[m].status, solo_run.status):
                    differ[m] = _why(f"mutant {labels.get(m, m)}", runs[m], solo_run)
                runs[m] = solo_run  # a process of its own is the reference (a timeout there is the machine's load)
            if not differ or _round or len(differ) > 1:
                break
        if len(differ) > 1:
            reason = (f"{len(differ)} of {len(checked)} mutants checked did not give in a shared process what a "
                      f"process of their own gives ({next(iter(differ.values()))}), while golden agreed in both of "
                      f"its shared runs: {_AFTER}")
            _save(key, False, reason)
            return per_process(mutants, f"one process per mutant: {reason}")
        cause = ""
        if differ:
            cause = (f"{next(iter(differ.values()))}, while golden and {len(checked) - 1} other mutants agreed: "
                     f"{_AFTER}")
        _save(key, True, f"{len(checked) - len(differ)} mutants agreed", alone=sorted(differ), cause=cause)
    for m in mutants:
        tell(m, runs[m])
    note = (f"{n_proc} shared simulator process{'es' if n_proc > 1 else ''} for {len(mutants)} mutants")
    if differ:
        note += f"; one mutant runs in a process of its own ({cause})"
    if redo:
        signals = sorted({s for names in redo.values() for s in names})
        note += (f"; {len(redo)} run again in a process of their own (their power-on value of "
                 f"{', '.join(signals[:3])}{', ...' if len(signals) > 3 else ''} could not be restored)")
    return Outcome(runs, "shared", note)
