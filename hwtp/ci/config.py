"""``hwtp.yaml``: the configuration of ``hwtp ci``, validated with line numbers.

:mod:`hwtp.config` reads the file and hands its top-level keys here. The file lives in the
user's repository; every relative path in it is relative to the folder that holds it. Errors
name ``file:line: field: what is wrong`` and how to fix it. Every field also has a CLI option
(``hwtp ci --help``); options override the file.

.. code-block:: yaml

    design:
      sources: [rtl/sat_counter.v]   # or: folder: path/to/design (a folder with design.yaml)
      top: sat_counter
      clock: {port: clk, period_ns: 10}            # optional; used by hwtp export-tests
      reset: {port: rst_n, active: low, cycles: 2}  # optional; used by hwtp export-tests
    tests:
      modules: [test_sat_counter]   # cocotb test modules (COCOTB_TEST_MODULES); tests.test_x in a package
      paths: [tests]                # folders put on PYTHONPATH (default: this folder)
      dir: sim_build                # the simulator's working folder (cocotb's test_dir; default: a private one)
    build: {args: [], defines: {}, parameters: {}, includes: [include], simulator: verilator}
    mutation: {n: 32, operators: [], seed: 0, formal: auto}   # formal: survivors proved equivalent by Yosys
    timeout: 60                     # wall-clock seconds per mutant (default: 3 x golden's run, at least 15)
    jobs: 2
    min_score: 0.8
    shared: true                    # many mutants per simulator process, when checked sound
    diagnose: true                  # say why each survivor survived (activated / propagated)
    timeouts_as: excluded           # or killed / survived: how timeouts count in the score
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hwtp import yamlio
from hwtp.errors import ConfigError, DesignError
from hwtp.rtl.design import (
    Clock,
    ControlError,
    Design,
    Reset,
    SourceFile,
    check_trusted,
    clock_from,
    clocking_problem,
    edge_signals,
    guess_controls,
    load_design,
    reset_from,
)
from hwtp.rtl.frontend import elaborate, included_files, module_names
from hwtp.sim.backends import DEFAULT_BACKEND, NO_OPTIONS, BuildOptions, backend_names
from hwtp.sim.cpus import usable_cpus

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: How a timeout counts in the score: as killed, as survived, or left out (the default).
TIMEOUTS_AS = ("excluded", "killed", "survived")
#: Whether survivors are checked for equivalence with Yosys: off, auto (when installed), on (required).
FORMAL = ("auto", "on", "off")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {
    # "run" is hwtp run's section of the same file (hwtp.run.config); hwtp ci leaves it alone.
    (): ("design", "tests", "build", "mutation", "timeout", "jobs", "min_score", "shared", "timeouts_as", "diagnose",
         "run"),
    ("design",): ("folder", "sources", "top", "clock", "reset"),
    ("tests",): ("modules", "paths", "filter", "env", "random_seed", "dir"),
    ("build",): ("simulator", "args", "defines", "parameters", "includes"),
    ("mutation",): ("n", "operators", "seed", "since", "formal", "formal_timeout"),
}


@dataclass(frozen=True)
class CiConfig:
    """What ``hwtp ci`` does. Paths are absolute once loaded."""

    root: Path                                   # folder of hwtp.yaml; relative paths start here
    top: str                                     # the user's top module (their tests drive it)
    sources: tuple[str, ...] = ()                # RTL files, relative to ``root`` (unless design_folder)
    design_folder: Path | None = None            # a design folder with design.yaml instead of sources
    clock: Clock | None = None                   # for export-tests only; the testbench drives the clock
    reset: Reset | None = None                   # for export-tests only
    test_modules: tuple[str, ...] = ()           # cocotb test modules, run in this order
    test_paths: tuple[Path, ...] = ()            # folders put first on PYTHONPATH
    test_filter: str | None = None               # COCOTB_TEST_FILTER: regex of test names to run
    test_env: tuple[tuple[str, str], ...] = ()   # extra environment of the simulator process
    random_seed: int = 1                         # COCOTB_RANDOM_SEED: the same for golden and every mutant
    test_dir: Path | None = None                 # the simulator's working folder (None: a private one per run)
    simulator: str = DEFAULT_BACKEND             # a backend of hwtp.sim.backends
    build: BuildOptions = NO_OPTIONS             # defines, parameters, arguments, include folders and headers
    n: int | None = 32                           # how many mutants (None: every site)
    operators: tuple[str, ...] = ()              # operator families or names (empty: all bug-injecting)
    seed: int = 0                                # mutant selection seed
    since: str | None = None                     # only lines changed since this git revision
    timeout_s: float | None = None               # per simulator run; None: from golden's (hwtp.ci.mutation)
    formal: str = "auto"                         # survivors checked for equivalence by Yosys: auto, on, off
    formal_depth: int = 20                       # bounded-check cycles after reset
    formal_timeout: float = 5.0                  # CPU seconds per survivor for the formal check
    jobs: int = field(default_factory=usable_cpus)
    min_score: float | None = None               # the gate; None: report only
    shared: bool = True                          # many mutants per simulator process when sound (hwtp.ci.shared)
    timeouts_as: str = "excluded"                # a timeout counts as killed, survived or not at all
    diagnose: bool = True                        # activation probes and output comparison (hwtp.ci.diagnosis)
    source: str = "hwtp.yaml"                    # where the config came from, for messages

    def __post_init__(self) -> None:
        if not self.test_modules:
            raise ConfigError(f"{self.source}: tests.modules: name at least one cocotb test module")
        if not self.design_folder and not self.sources:
            raise ConfigError(f"{self.source}: design: give sources and top, or a design folder")
        if self.n is not None and self.n < 1:
            raise ConfigError(f"{self.source}: mutation.n (-n) must be at least 1 (or 0 for every site)")
        if self.jobs < 1:
            raise ConfigError(f"{self.source}: jobs (-j) must be at least 1")
        if self.timeout_s is not None and self.timeout_s <= 0:
            raise ConfigError(f"{self.source}: timeout (--timeout) must be a positive number of seconds")
        if self.min_score is not None and not 0.0 <= self.min_score <= 1.0:
            raise ConfigError(f"{self.source}: min_score (--min-score) must be from 0 to 1")
        if self.simulator not in backend_names():
            raise ConfigError(f"{self.source}: build.simulator must be one of {', '.join(backend_names())}")
        if self.formal not in FORMAL:
            raise ConfigError(f"{self.source}: mutation.formal (--formal) must be one of {', '.join(FORMAL)}")
        if self.timeouts_as not in TIMEOUTS_AS:
            raise ConfigError(f"{self.source}: timeouts_as (--timeouts-as) must be one of {', '.join(TIMEOUTS_AS)}")
        if self.design_folder is not None and (self.build.includes or self.build.headers):
            raise ConfigError(f"{self.source}: build.includes: only with design.sources (not design.folder)")

    def load_design(self) -> Design:
        """The design under test (ports elaborated from the RTL)."""
        if self.design_folder is not None:
            design = load_design(self.design_folder)
            return replace(design, clock=self.clock or design.clock, reset=self.reset or design.reset)
        texts = []
        for rel in self.sources:
            path = self.root / rel
            try:
                texts.append(SourceFile(rel, yamlio.decode_utf8(path.read_bytes())))
            except yamlio.TextDecodeError as exc:
                raise DesignError(f"{path}:{exc.line}: {exc.message} (design.sources of {self.source})") from exc
            except OSError as exc:
                raise DesignError(f"{self.source}: design.sources: cannot read {rel}: {exc.strerror}") from exc
        sources = tuple(texts)
        try:
            ports = elaborate(sources, self.top, self.build)
        except DesignError as exc:
            if "no module named" in str(exc):
                raise DesignError(f"{self.source}: design.top: {exc}") from exc
            raise
        check_trusted(sources, self.root, self.top, self.build, self.simulator)
        clock, reset = self.clock, self.reset
        if clock is None and reset is None:  # not configured: only export-tests and the formal check need them
            edges = edge_signals(sources)
            clock, reset = guess_controls(ports, edges)
            if clocking_problem(ports, edges, clock, reset, ""):  # several clocks: none is guessed
                clock, reset = None, None
        return Design(self.top, self.top, self.root, sources, "", clock, reset, ports)

    def with_plans_module(self, path: Path) -> CiConfig:
        """This config with one more cocotb test module (``--include-plans FILE.py``)."""
        if path.suffix != ".py" or not path.is_file():
            raise ConfigError(f"--include-plans {path}: expected a .py file (from hwtp export-tests)")
        if not _IDENT.match(path.stem):
            raise ConfigError(f"--include-plans {path}: {path.stem!r} is not a valid Python module name")
        folder = path.resolve().parent
        paths = self.test_paths if folder in self.test_paths else (*self.test_paths, folder)
        modules = self.test_modules if path.stem in self.test_modules else (*self.test_modules, path.stem)
        return replace(self, test_paths=paths, test_modules=modules)


class _Reader:
    """Typed access to the loaded document, with errors that name file, line and field."""

    def __init__(self, path: Path, located: yamlio.Located) -> None:
        self.path = path
        self.located = located

    def error(self, key: tuple[Any, ...], message: str) -> ConfigError:
        return yamlio.located_error(ConfigError, self.path, self.located, key, message)

    def section(self, key: tuple[str, ...]) -> dict[str, Any]:
        node: Any = self.located.data
        for k in key:
            node = node.get(k) if isinstance(node, dict) else None
        if node is None:
            return {}
        if not isinstance(node, dict):
            raise self.error(key, "expected a mapping")
        unknown = sorted(set(node) - set(_KEYS[key]))
        if unknown:
            raise self.error((*key, unknown[0]), f"unknown field (valid: {', '.join(_KEYS[key])})")
        return node

    def str_list(self, key: tuple[str, ...], value: Any,
                 pattern: re.Pattern[str] | None = None) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(key, "expected a list of names")
        for i, v in enumerate(value):
            if pattern is not None and not pattern.match(v):
                raise self.error((*key, i), f"{v!r} is not a valid name")
        return tuple(value)

    def number(self, key: tuple[str, ...], value: Any, kind: type, lo: float | None = None) -> Any:
        if value is None:
            return None
        ok = isinstance(value, (int, float)) if kind is float else isinstance(value, int)
        if isinstance(value, bool) or not ok or (lo is not None and value < lo):
            bound = f" >= {lo:g}" if lo is not None else ""
            what = "a number" if kind is float else "an integer"
            raise self.error(key, f"expected {what}{bound}, got {value!r}")
        return kind(value)

    def pairs(self, key: tuple[str, ...], value: Any, names: bool) -> tuple[tuple[str, str], ...]:
        if value is None:
            return ()
        if not isinstance(value, dict):
            raise self.error(key, "expected a mapping of NAME: value")
        out = []
        for k, v in value.items():
            if names and not _IDENT.match(k):
                raise self.error((*key, k), "expected an identifier")
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise self.error((*key, k), "expected a number or a string")
            out.append((k, str(v)))
        return tuple(out)

    def inside(self, key: tuple[Any, ...], root: Path, rel: Any, want: str) -> Path:
        if not isinstance(rel, str) or not rel:
            raise self.error(key, "expected a path")
        full = (root / rel).resolve()
        if want == "file" and not full.is_file():
            raise self.error(key, f"file {rel!r} does not exist (paths are relative to {root})")
        if want == "dir" and not full.is_dir():
            raise self.error(key, f"folder {rel!r} does not exist (paths are relative to {root})")
        return full


def _clock_reset(r: _Reader, design: dict[str, Any]) -> tuple[Clock | None, Reset | None]:
    try:
        clock = clock_from(design["clock"]) if design.get("clock") is not None else None
        reset = reset_from(design["reset"]) if design.get("reset") is not None else None
    except ControlError as exc:
        raise r.error(("design", *exc.key), exc.problem) from exc
    return clock, reset


def _design(r: _Reader, root: Path) -> dict[str, Any]:
    design = r.section(("design",))
    out: dict[str, Any] = {}
    if design.get("folder") is not None:
        if design.get("sources") is not None:
            raise r.error(("design", "sources"), "give either folder or sources, not both")
        folder = r.inside(("design", "folder"), root, design["folder"], "dir")
        try:
            loaded = load_design(folder)
        except DesignError as exc:
            raise r.error(("design", "folder"), str(exc)) from exc
        top = design.get("top", loaded.top)
        if top != loaded.top:
            raise r.error(("design", "top"), f"the design folder's top is {loaded.top!r}")
        out.update(design_folder=folder, top=loaded.top)
    else:
        sources = design.get("sources")
        if isinstance(sources, str):
            sources = [sources]
        if not isinstance(sources, list) or not sources:
            raise r.error(("design", "sources"), "expected a non-empty list of RTL files (or design.folder)")
        rels = _relative_paths(r, ("design", "sources"), root, sources, "file")
        top = design.get("top")
        if not isinstance(top, str) or not _IDENT.match(top):
            raise r.error(("design", "top"), "required: the name of the top module your tests drive")
        out.update(sources=rels, top=top)
    out["clock"], out["reset"] = _clock_reset(r, design)
    return out


def _read_sources(root: Path, rels: tuple[str, ...]) -> tuple[SourceFile, ...] | None:
    """The sources' text; None when one cannot be read (reported with its own file and line
    when the design is loaded)."""
    try:
        return tuple(SourceFile(rel, yamlio.decode_utf8((root / rel).read_bytes())) for rel in rels)
    except (yamlio.TextDecodeError, OSError):
        return None


def _check_sources(r: _Reader, root: Path, fields: dict[str, Any]) -> None:
    """Find the headers the sources include (into ``fields["build"]``) and check that
    ``design.top`` is declared, both as the build will preprocess the sources."""
    texts = _read_sources(root, fields["sources"])
    if texts is None:
        return
    build: BuildOptions = fields["build"]
    try:
        headers = included_files(root, texts, build.includes, build.defines)
    except DesignError as exc:
        key = ("build", "includes") if build.includes else ("design", "sources")
        raise r.error(key, f"{exc}; add the folder that holds it to build.includes") from exc
    build = replace(build, headers=headers)
    fields["build"] = build
    try:
        declared = module_names(texts, build)
    except DesignError:
        return  # a syntax error: reported with its file and line when the design is loaded
    if fields["top"] not in declared:
        raise r.error(("design", "top"), f"no module named {fields['top']!r} in design.sources "
                                         f"(modules: {', '.join(declared) or 'none'})")


def _tests(r: _Reader, root: Path) -> dict[str, Any]:
    tests = r.section(("tests",))
    modules = r.str_list(("tests", "modules"), tests.get("modules"), _MODULE)
    if not modules:
        raise r.error(("tests", "modules"), "required: the cocotb test modules to run, e.g. [test_counter]")
    raw_paths = tests.get("paths", ["."])
    if isinstance(raw_paths, str):
        raw_paths = [raw_paths]
    if not isinstance(raw_paths, list):
        raise r.error(("tests", "paths"), "expected a list of folders")
    paths = tuple(r.inside(("tests", "paths", i), root, p, "dir") for i, p in enumerate(raw_paths))
    test_filter = tests.get("filter")
    if test_filter is not None:
        if not isinstance(test_filter, str):
            raise r.error(("tests", "filter"), "expected a regular expression")
        try:
            re.compile(test_filter)
        except re.error as exc:
            raise r.error(("tests", "filter"), f"not a valid regular expression: {exc}") from exc
    seed = r.number(("tests", "random_seed"), tests.get("random_seed", 1), int, 0)
    test_dir = tests.get("dir")
    if test_dir is not None and (not isinstance(test_dir, str) or not test_dir):
        raise r.error(("tests", "dir"), "expected a folder (created when missing)")
    return {"test_modules": modules, "test_paths": paths, "test_filter": test_filter,
            "test_env": r.pairs(("tests", "env"), tests.get("env"), names=False), "random_seed": seed,
            "test_dir": (root / test_dir).resolve() if test_dir else None}


def _includes(r: _Reader, root: Path, value: Any) -> tuple[str, ...]:
    """``build.includes``: folders inside ``root``, as paths relative to it."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise r.error(("build", "includes"), "expected a list of folders")
    return _relative_paths(r, ("build", "includes"), root, value, "dir")


def _relative_paths(r: _Reader, key: tuple[str, ...], root: Path, values: list[Any], want: str) -> tuple[str, ...]:
    """Each of ``values`` (a ``want``: file or dir) inside ``root``, as a path relative to it."""
    out = []
    for i, rel in enumerate(values):
        full = r.inside((*key, i), root, rel, want)
        if not full.is_relative_to(root):
            raise r.error((*key, i), f"{rel!r} is outside {root}; move {r.path.name} up to a common folder")
        out.append(full.relative_to(root).as_posix() or ".")
    return tuple(out)


def _build_and_mutation(r: _Reader, root: Path) -> dict[str, Any]:
    build = r.section(("build",))
    mutation = r.section(("mutation",))
    simulator = build.get("simulator", DEFAULT_BACKEND)
    if simulator not in backend_names():
        raise r.error(("build", "simulator"), f"expected one of {', '.join(backend_names())}")
    args = build.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise r.error(("build", "args"), "expected a list of strings")
    n = r.number(("mutation", "n"), mutation.get("n", 32), int, 0)
    since = mutation.get("since")
    if since is not None and (not isinstance(since, str) or since.startswith("-")):
        raise r.error(("mutation", "since"), "expected a git revision")
    formal = mutation.get("formal", "auto")
    if isinstance(formal, bool):  # YAML reads a bare on/off as a boolean
        formal = "on" if formal else "off"
    if formal not in FORMAL:
        raise r.error(("mutation", "formal"), f"expected one of {', '.join(FORMAL)}")
    formal_timeout = r.number(("mutation", "formal_timeout"), mutation.get("formal_timeout", 5.0), float, 0.001)
    return {
        "formal": formal, "formal_timeout": formal_timeout,
        "simulator": simulator,
        "build": BuildOptions(defines=r.pairs(("build", "defines"), build.get("defines"), names=True),
                              parameters=r.pairs(("build", "parameters"), build.get("parameters"), names=True),
                              args=tuple(args), includes=_includes(r, root, build.get("includes"))),
        "n": n or None, "operators": r.str_list(("mutation", "operators"), mutation.get("operators")),
        "seed": r.number(("mutation", "seed"), mutation.get("seed", 0), int), "since": since,
    }


def from_document(path: Path, located: yamlio.Located) -> CiConfig:
    """Check the ci keys of ``hwtp.yaml`` as :mod:`hwtp.config` loaded it (a mapping; every
    error names file:line: field)."""
    r = _Reader(path, located)
    r.section(())
    root = path.resolve().parent
    data = located.data
    fields: dict[str, Any] = {"root": root, "source": str(path)}
    fields.update(_design(r, root))
    fields.update(_tests(r, root))
    fields.update(_build_and_mutation(r, root))
    if "sources" in fields:
        _check_sources(r, root, fields)
    elif fields["build"].includes:
        raise r.error(("build", "includes"), "only with design.sources (a design folder has no include folders)")
    fields["timeout_s"] = r.number(("timeout",), data.get("timeout"), float, 0.001)
    jobs = r.number(("jobs",), data.get("jobs"), int, 1)
    if jobs is not None:
        fields["jobs"] = jobs
    min_score = r.number(("min_score",), data.get("min_score"), float, 0)
    if min_score is not None and min_score > 1:
        raise r.error(("min_score",), "expected a number from 0 to 1")
    fields["min_score"] = min_score
    for key in ("shared", "diagnose"):
        value = data.get(key, True)
        if not isinstance(value, bool):
            raise r.error((key,), "expected true or false")
        fields[key] = value
    timeouts_as = data.get("timeouts_as", "excluded")
    if timeouts_as not in TIMEOUTS_AS:
        raise r.error(("timeouts_as",), f"expected one of {', '.join(TIMEOUTS_AS)}")
    fields["timeouts_as"] = timeouts_as
    return CiConfig(**fields)
