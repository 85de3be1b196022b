"""``hwtp ci init``: write a commented starter ``hwtp.yaml`` by looking at a project folder.

The project's own cocotb flow comes first: a runner script (``cocotb_tools.runner``; read by
:mod:`hwtp.ci.runnerscript`, never run) or else a cocotb Makefile (:mod:`hwtp.ci.makefile`)
gives sources, top, include folders, defines, parameters, build arguments, test modules and
the simulator's working folder. What neither gives is found by looking: the RTL (``*.v``,
``*.sv``), the top module (a module no other module instantiates), the cocotb test modules
(Python files with ``@cocotb.test``); clock and reset are guessed from the top's port names.
What could not be read is listed with its file:line and the key to fill in by hand.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from hwtp.ci.detected import Detected, module_folder
from hwtp.ci.makefile import read_makefile
from hwtp.ci.runnerscript import is_runner_script, read_runner_script
from hwtp.config import CONFIG_NAME
from hwtp.errors import ConfigError, DesignError
from hwtp.rtl.design import Clock, Reset, SourceFile, clock_candidates, edge_signals, guess_controls
from hwtp.rtl.frontend import BuildOptions, elaborate, included_files, top_modules

_SKIP_DIRS = {"sim_build", "build", "__pycache__", "node_modules", "venv", "site-packages", "dist"}
_MAX_FILES = 2000
_NUMBER = re.compile(r"^-?[0-9]+$")


@dataclass
class Findings:
    """What ``init`` found in the folder, and what it could not decide (paths relative to it)."""

    sources: list[str] = field(default_factory=list)
    top: str | None = None
    other_tops: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    clock: Clock | None = None
    reset: Reset | None = None
    clocks: list[str] = field(default_factory=list)  # several inputs used as clocks (none is written)
    notes: list[str] = field(default_factory=list)
    origin: str | None = None          # the runner script or Makefile read, if any
    includes: list[str] = field(default_factory=list)
    defines: list[tuple[str, str]] = field(default_factory=list)
    parameters: list[tuple[str, str]] = field(default_factory=list)
    args: list[str] = field(default_factory=list)
    simulator: str = "verilator"
    test_dir: str | None = None
    test_filter: str | None = None
    random_seed: int | None = None
    env: list[tuple[str, str]] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # file:line: what; fill in KEY by hand
    root: Path = Path(".")  # the folder hwtp.yaml goes in (paths are relative to it)


def _files(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).parts
        if any(p.startswith(".") or p in _SKIP_DIRS for p in rel[:-1]):
            continue
        if path.suffix in suffixes and path.is_file():
            out.append(path)
            if len(out) >= _MAX_FILES:
                break
    return out


def _depth_first(paths: list[Path], root: Path) -> list[Path]:
    return sorted(paths, key=lambda p: (len(p.relative_to(root).parts), p.as_posix()))


_MAKEFILES = ("Makefile", "makefile", "GNUmakefile")


def _read_flow(path: Path, root: Path) -> Detected | None:
    """What one runner script or Makefile gives; None when it is neither a cocotb one."""
    if path.name in _MAKEFILES:
        return read_makefile(path, root)
    if path.suffix == ".py" and is_runner_script(path.read_text(encoding="utf-8", errors="replace")):
        return read_runner_script(path, root)
    return None


def flows(root: Path, python: list[Path] | None = None) -> list[Detected]:
    """Every cocotb flow under ``root``: runner scripts first, then cocotb Makefiles, shallowest first."""
    python = _files(root, (".py",)) if python is None else python
    makefiles = [p for p in _files(root, ("",)) if p.name in _MAKEFILES]
    out = []
    for path in [*_depth_first(python, root), *_depth_first(makefiles, root)]:
        found = _read_flow(path, root)
        if found is not None:
            out.append(found)
    return out


def _detect(root: Path, python: list[Path], flow: Path | None) -> Detected | None:
    """The project's cocotb flow: ``flow`` when given; else the only runner script or cocotb
    Makefile (several: the user chooses, :class:`ConfigError` lists them)."""
    if flow is not None:
        found = _read_flow(flow.resolve(), root)
        if found is None:
            raise ConfigError(f"--flow {flow}: not a cocotb runner script or cocotb Makefile")
        return found
    candidates = flows(root, python)
    scripts = [c for c in candidates if not c.origin.endswith(_MAKEFILES)]
    if len(candidates) > 1 and len(scripts) != 1:
        listed = "\n".join(f"  {c.origin}: top {c.top or '?'}, tests {', '.join(c.modules) or '?'}"
                            for c in candidates)
        first = candidates[0].origin
        raise ConfigError(f"{root}: several cocotb testbenches; choose one with --flow (and -o to write one "
                          f"config file each, e.g. `hwtp ci init --flow {first} -o {config_name(first)}`), "
                          f"or write one for each with `hwtp ci init --all`:\n{listed}")
    return scripts[0] if scripts else (candidates[0] if candidates else None)


def _project_root(root: Path, found: Detected) -> Path:
    """The folder hwtp.yaml goes in: ``root``, or the nearest folder that also holds the
    flow's sources when they lie outside it (``tb/x/Makefile`` naming ``../../rtl/x.v``)."""
    paths = [p for p in (*found.sources, *found.includes) if p.exists()]
    outside = [p for p in paths if not p.is_relative_to(root)]
    if not outside:
        return root
    common = Path(os.path.commonpath([root, *outside]))
    return common if common != Path(common.anchor) else root


def _relative(root: Path, paths: tuple[Path, ...], what: str, findings: Findings) -> list[str]:
    out = []
    for path in paths:
        if path.is_relative_to(root):
            out.append(path.relative_to(root).as_posix() or ".")
        else:
            findings.unknown.append(f"{findings.origin}: {what} {path} is outside {root}; run `hwtp ci init` in a "
                                    "folder that holds it (paths in hwtp.yaml stay inside its folder)")
    return out


def _apply(root: Path, found: Detected, findings: Findings) -> None:
    findings.origin = found.origin
    findings.unknown += [str(u) for u in found.unknown]
    findings.notes += list(found.notes)
    if found.sources:
        missing = [p for p in found.sources if not p.is_file()]
        for path in missing:
            findings.unknown.append(f"{found.origin}: source {path} does not exist; fix design.sources")
        findings.sources = _relative(root, tuple(p for p in found.sources if p.is_file()), "source", findings)
    findings.top = found.top
    findings.modules = list(found.modules)
    paths = []
    for module in found.modules:
        folder = module_folder(module, found.module_paths)
        if folder is not None:
            paths += _relative(root, (folder,), "test folder", findings)
    # the flow's own PYTHONPATH folders (after its folder) hold what the tests import (a model package)
    if found.origin.endswith(_MAKEFILES):
        extra = tuple(p for p in found.module_paths[1:] if p.is_dir() and p.is_relative_to(root))
        paths += _relative(root, extra, "test folder", findings)
    findings.paths = list(dict.fromkeys(paths))
    findings.includes = _relative(root, tuple(p for p in found.includes if p.is_dir()), "include folder", findings)
    for path in found.includes:
        if not path.is_dir():
            findings.unknown.append(f"{found.origin}: include folder {path} does not exist; fix build.includes")
    findings.defines = list(found.defines)
    findings.parameters = list(found.parameters)
    findings.args = list(found.args)
    findings.simulator = found.simulator or "verilator"
    if found.test_dir is not None:
        rel = _relative(root, (found.test_dir,), "test folder", findings)
        findings.test_dir = rel[0] if rel else None
    findings.test_filter = found.test_filter
    findings.random_seed = found.random_seed
    findings.env = list(found.env)


def _options(root: Path, findings: Findings, sources: list[SourceFile]) -> BuildOptions:
    """The build options found, with the headers the sources include (none when they cannot be found)."""
    try:
        headers = included_files(root, sources, findings.includes, findings.defines)
    except DesignError as exc:
        findings.notes.append(f"{exc}; add the folder that holds it to build.includes")
        headers = ()
    return BuildOptions(defines=tuple(findings.defines), parameters=tuple(findings.parameters),
                        includes=tuple(findings.includes), headers=headers)


def _guess_controls(findings: Findings, sources: list[SourceFile], options: BuildOptions) -> None:
    if findings.top is None:
        return
    try:
        ports = elaborate(sources, findings.top, options)
    except DesignError as exc:
        findings.notes.append(f"could not read the ports of {findings.top}: {exc}")
        return
    edges = edge_signals(sources)
    findings.clock, findings.reset = guess_controls(ports, edges)
    clocks = clock_candidates(ports, edges, findings.reset)
    if len(clocks) > 1:  # hwtp drives one clock: none is written
        findings.clock = findings.reset = None
        findings.clocks = clocks
        findings.notes.append(f"several clocks ({', '.join(clocks)}): `hwtp ci` runs your tests, which drive them; "
                              "the formal check of survivors is skipped and `hwtp export-tests` refuses the design "
                              "(both drive one clock)")


def inspect(root: Path, flow: Path | None = None) -> Findings:
    """Look at ``root`` for its cocotb flow (``flow``: that runner script or Makefile), RTL, the
    top module and cocotb tests. ``Findings.root`` is where hwtp.yaml goes: ``root``, or a
    folder above it that holds the flow's sources too."""
    root = root.resolve()
    findings = Findings(root=root)
    python = _files(root, (".py",))
    found = _detect(root, python, flow)
    if found is not None:
        moved = _project_root(root, found)
        if moved != root:
            origin = (flow.resolve() if flow else root / found.origin)
            found = _read_flow(origin, moved) or found
            findings.notes.append(f"the sources of {origin.relative_to(moved)} lie outside {root.name}/, so "
                                  f"the configuration goes in {moved} (its paths stay inside its folder)")
            root = findings.root = moved
            python = _files(root, (".py",))
        _apply(root, found, findings)
    if not findings.sources:
        rtl = _files(root, (".v", ".sv"))
        if not rtl:
            raise ConfigError(f"{root}: no Verilog (*.v, *.sv) found; run `hwtp ci init` in your project folder")
        findings.sources = [p.relative_to(root).as_posix() for p in rtl]
    sources = [SourceFile(rel, (root / rel).read_text(encoding="utf-8", errors="replace"))
               for rel in findings.sources]
    options = _options(root, findings, sources)
    try:
        tops = top_modules(sources, options)
    except DesignError as exc:
        findings.notes.append(f"the RTL does not parse ({exc}); set design.top by hand")
        tops = []
    if findings.top is None and tops:
        findings.top = tops[0]
    findings.other_tops = [t for t in tops if t != findings.top]
    if not findings.modules:
        tests = [p for p in python if "cocotb.test" in p.read_text(encoding="utf-8", errors="replace")]
        named_test = [p.stem for p in tests if p.stem.startswith("test")]
        findings.modules = named_test or [p.stem for p in tests]
        folders = {p.parent.relative_to(root).as_posix() or "." for p in tests if p.stem in findings.modules}
        findings.paths = sorted(folders)
    if not findings.paths:
        findings.paths = ["."]
    if not findings.modules:
        findings.notes.append("no cocotb test module found (no .py file with @cocotb.test); "
                              "fill in tests.modules")
    _guess_controls(findings, sources, options)
    return findings


def _q(text: str) -> str:
    """A YAML scalar (JSON strings are valid YAML)."""
    return json.dumps(text)


def _value(text: str) -> str:
    """A define's or parameter's value: a number as a number, anything else as a string."""
    return text if _NUMBER.match(text) else _q(text)


def _mapping(pairs: list[tuple[str, str]]) -> str:
    return "{" + ", ".join(f"{name}: {_value(value)}" for name, value in pairs) + "}"


def _list(items: list[str]) -> str:
    return "[" + ", ".join(_q(i) for i in items) + "]"


def _commented(line: str, comment: str) -> str:
    """``line`` with ``comment`` at column 33 (or one space after a longer line)."""
    return f"{line:<31} # {comment}"


def render(f: Findings) -> str:
    """The commented starter file."""
    top = _q(f.top) if f.top else '""  # TODO: the top module your tests drive'
    others = f"  (other top-level modules: {', '.join(f.other_tops)})" if f.other_tops else ""
    sources = "\n".join(f"    - {_q(s)}" for s in f.sources)
    clock = (f"  clock: {{port: {_q(f.clock.port)}, period_ns: {f.clock.period_ns:g}}}" if f.clock
             else f"  # several clocks ({', '.join(f.clocks)}): export-tests and the formal check drive one; "
                  f"naming one here drives the others as data\n  # clock: {{port: {_q(f.clocks[0])}, period_ns: 10}}"
             if f.clocks else "  # clock: {port: clk, period_ns: 10}")
    reset = (f"  reset: {{port: {_q(f.reset.port)}, active: {f.reset.active}, cycles: {f.reset.cycles}}}"
             if f.reset else "  # reset: {port: rst_n, active: low, cycles: 2}")
    modules = (f"  modules: [{', '.join(_q(m) for m in f.modules)}]" if f.modules
               else "  modules: []                  # TODO: your cocotb test modules, e.g. [test_top]")
    origin = (f"# Read from {f.origin} (your cocotb flow); check it against that file.\n" if f.origin else "")
    todo = "".join(f"# TODO not understood: {u}\n" for u in f.unknown)
    test_dir = (_commented(f"  dir: {_q(f.test_dir)}", "the simulator's working folder (cocotb's test_dir)")
                if f.test_dir else "  # dir: sim_build             # the simulator's working folder (default: private)")
    test_filter = (f"  filter: {_q(f.test_filter)}" if f.test_filter
                   else '  # filter: "test_smoke.*"      # only the tests matching this regex (COCOTB_TEST_FILTER)')
    seed = (f"  random_seed: {f.random_seed}" if f.random_seed is not None
            else "  # random_seed: 1              # COCOTB_RANDOM_SEED: the same for golden and every mutant")
    env = (f"  env: {{{', '.join(f'{_q(k)}: {_q(v)}' for k, v in f.env)}}}" if f.env
           else '  # env: {MY_SETTING: "1"}    # extra environment variables for the simulator process')
    return f"""\
# hwtp ci: mutation-test this project's cocotb testbench (written by `hwtp ci init`; edit freely).
# hwtp injects bugs (mutants) into the design and runs your unchanged tests against each one;
# the mutation score is the share of bugs your tests catch. Paths are relative to this file.
# Run `hwtp ci` here; its options (-n, --min-score, --junit, ...) override these values.
{origin}{todo}
design:
  sources:                      # RTL files of the design under test (mutated)
{sources}
  top: {top}{others}
  # clock and reset are only used by `hwtp export-tests`; your tests drive them themselves.
{clock}
{reset}

tests:                          # modules: cocotb test modules (COCOTB_TEST_MODULES), in order
{modules}
{_commented(f"  paths: {_list(f.paths)}", "folders put on PYTHONPATH")}
{test_dir}
{test_filter}
{env}
{seed}

build:
{_commented(f"  simulator: {f.simulator}", "verilator or icarus")}
{_commented(f"  includes: {_list(f.includes)}", 'include folders (`include "x.svh"), e.g. [include]')}
{_commented(f"  defines: {_mapping(f.defines)}", "preprocessor defines: NAME: VALUE")}
{_commented(f"  parameters: {_mapping(f.parameters)}", "the top module's parameters: NAME: VALUE")}
{_commented(f"  args: {_list(f.args)}", 'extra simulator build arguments, e.g. ["-Wno-WIDTH"]')}

mutation:
  n: 32                         # how many mutants (0: every mutable site)
  operators: []                 # operator families or names (empty: every bug-injecting one)
  seed: 0                       # the same seed picks the same mutants

# timeout: 60                   # seconds per mutant run (default: 3 x the golden run, at least 15)
# jobs: 2                       # simulator processes at once (default: the CPU count)
min_score: 0.8                  # the gate: `hwtp ci` exits 1 when the mutation score is below this
"""


def config_name(origin: str, taken: set[str] | None = None) -> str:
    """``hwtp-<folder>.yaml`` for the flow at ``origin`` (``tb/rx/Makefile``: ``hwtp-rx.yaml``;
    a runner script: its stem), numbered apart from the names in ``taken``."""
    path = Path(origin)
    label = path.parent.name if path.name in _MAKEFILES and path.parent.name else path.stem
    name, k = f"hwtp-{label}.yaml", 2
    while taken is not None and name in taken:
        name, k = f"hwtp-{label}-{k}.yaml", k + 1
    return name


def write_all(root: Path, force: bool = False) -> list[tuple[Path, Findings]]:
    """One starter config per cocotb testbench under ``root`` (:func:`flows`), each named by
    :func:`config_name` in its project folder; refuses to overwrite unless ``force``."""
    root = root.resolve()
    found = flows(root)
    if not found:
        raise ConfigError(f"{root}: no cocotb runner script or cocotb Makefile found (--all writes one config each)")
    taken: set[str] = set()
    planned = []
    for flow in found:
        name = config_name(flow.origin, taken)
        taken.add(name)
        planned.append((root / flow.origin, name))
    return [write_starter(root, force, flow, name) for flow, name in planned]


def write_starter(root: Path, force: bool = False, flow: Path | None = None,
                  name: str = CONFIG_NAME) -> tuple[Path, Findings]:
    """Inspect ``root`` (``flow``: the runner script or Makefile to read) and write
    ``name`` into the project folder found (:func:`inspect`); refuses to overwrite unless ``force``."""
    if Path(name).name != name or not name.endswith((".yaml", ".yml")):
        raise ConfigError(f"-o {name}: expected a file name ending in .yaml, written in the project folder")
    findings = inspect(root, flow)
    target = findings.root / name
    if target.exists() and not force:
        raise ConfigError(f"{target} already exists (use --force to overwrite it, or -o another name)")
    target.write_text(render(findings), encoding="utf-8")
    return target, findings
