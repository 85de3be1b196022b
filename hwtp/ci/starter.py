"""``hwtp ci init``: write a commented starter ``hwtp.yaml`` by looking at a project folder.

It finds the RTL (``*.v``, ``*.sv``), the top module (a module no other module instantiates;
a ``TOPLEVEL`` in a cocotb Makefile wins), the cocotb test modules (Python files with
``@cocotb.test``; a Makefile's ``COCOTB_TEST_MODULES``/``MODULE`` wins) and guesses clock and
reset from the top's port names. What it could not find is left as a TODO for the user.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from hwtp.config import CONFIG_NAME
from hwtp.design import Clock, Reset, SourceFile, guess_controls
from hwtp.errors import ConfigError, DesignError
from hwtp.rtl import elaborate, top_modules

_SKIP_DIRS = {"sim_build", "build", "__pycache__", "node_modules", "venv", "site-packages", "dist"}
_MAX_FILES = 2000
_MAKE_VAR = re.compile(r"^\s*(?:export\s+)?([A-Z_]+)\s*[:?+]?=\s*(.*?)\s*$", re.MULTILINE)


@dataclass
class Findings:
    """What ``init`` found in the folder, and what it could not decide."""

    sources: list[str] = field(default_factory=list)
    top: str | None = None
    other_tops: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    clock: Clock | None = None
    reset: Reset | None = None
    notes: list[str] = field(default_factory=list)


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


def _make_vars(root: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for makefile in _files(root, ("",)):
        if makefile.name != "Makefile":
            continue
        for name, value in _MAKE_VAR.findall(makefile.read_text(encoding="utf-8", errors="replace")):
            found.setdefault(name, value)
    return found


def _guess_controls(findings: Findings, sources: list[SourceFile]) -> None:
    if findings.top is None:
        return
    try:
        ports = elaborate(sources, findings.top)
    except DesignError as exc:
        findings.notes.append(f"could not read the ports of {findings.top}: {exc}")
        return
    findings.clock, findings.reset = guess_controls(ports)


def inspect(root: Path) -> Findings:
    """Look at ``root`` for RTL, the top module and cocotb tests."""
    findings = Findings()
    rtl = _files(root, (".v", ".sv"))
    if not rtl:
        raise ConfigError(f"{root}: no Verilog (*.v, *.sv) found; run `hwtp ci init` in your project folder")
    sources = [SourceFile(p.relative_to(root).as_posix(), p.read_text(encoding="utf-8", errors="replace"))
               for p in rtl]
    findings.sources = [s.path for s in sources]
    make = _make_vars(root)
    try:
        tops = top_modules(sources)
    except DesignError as exc:
        findings.notes.append(f"the RTL does not parse ({exc}); set design.top by hand")
        tops = []
    wanted = make.get("COCOTB_TOPLEVEL") or make.get("TOPLEVEL")
    if wanted and re.match(r"^[A-Za-z_]\w*$", wanted):
        findings.top = wanted
    elif tops:
        findings.top = tops[0]
    findings.other_tops = [t for t in tops if t != findings.top]
    tests = [p for p in _files(root, (".py",))
             if "cocotb.test" in p.read_text(encoding="utf-8", errors="replace")]
    listed = make.get("COCOTB_TEST_MODULES") or make.get("MODULE")
    names = [m for m in re.split(r"[,\s]+", listed or "") if re.match(r"^[A-Za-z_][\w.]*$", m)]
    named_test = [p.stem for p in tests if p.stem.startswith("test")]
    findings.modules = names or named_test or [p.stem for p in tests]
    folders = {p.parent.relative_to(root).as_posix() or "." for p in tests if p.stem in findings.modules}
    findings.paths = sorted(folders) or ["."]
    if not findings.modules:
        findings.notes.append("no cocotb test module found (no .py file with @cocotb.test); "
                              "fill in tests.modules")
    _guess_controls(findings, sources)
    return findings


def _q(text: str) -> str:
    """A YAML scalar (JSON strings are valid YAML)."""
    return json.dumps(text)


def render(f: Findings) -> str:
    """The commented starter file."""
    top = _q(f.top) if f.top else '""  # TODO: the top module your tests drive'
    others = f"  (other top-level modules: {', '.join(f.other_tops)})" if f.other_tops else ""
    sources = "\n".join(f"    - {_q(s)}" for s in f.sources)
    clock = (f"  clock: {{port: {_q(f.clock.port)}, period_ns: {f.clock.period_ns:g}}}" if f.clock
             else "  # clock: {port: clk, period_ns: 10}")
    reset = (f"  reset: {{port: {_q(f.reset.port)}, active: {f.reset.active}, cycles: {f.reset.cycles}}}"
             if f.reset else "  # reset: {port: rst_n, active: low, cycles: 2}")
    modules = (f"  modules: [{', '.join(_q(m) for m in f.modules)}]" if f.modules
               else "  modules: []                  # TODO: your cocotb test modules, e.g. [test_top]")
    return f"""\
# hwtp ci: mutation-test this project's cocotb testbench (written by `hwtp ci init`; edit freely).
# hwtp injects bugs (mutants) into the design and runs your unchanged tests against each one;
# the mutation score is the share of bugs your tests catch. Paths are relative to this file.
# Run `hwtp ci` here; its options (-n, --min-score, --junit, ...) override these values.

design:
  sources:                      # RTL files of the design under test
{sources}
  top: {top}{others}
  # clock and reset are only used by `hwtp export-tests`; your tests drive them themselves.
{clock}
{reset}

tests:                          # modules: cocotb test modules (COCOTB_TEST_MODULES), in order
{modules}
  paths: [{", ".join(_q(p) for p in f.paths)}]      # folders put on PYTHONPATH
  # filter: "test_smoke.*"      # only the tests matching this regex (COCOTB_TEST_FILTER)
  # env: {{MY_SETTING: "1"}}    # extra environment variables for the simulator process
  # random_seed: 1              # COCOTB_RANDOM_SEED: the same for golden and every mutant

build:
  simulator: verilator          # or icarus
  args: []                      # extra simulator build arguments, e.g. ["-Wno-WIDTH"]
  defines: {{}}                   # preprocessor defines: NAME: VALUE
  parameters: {{}}                # the top module's parameters: NAME: VALUE (each simulator's own flag)

mutation:
  n: 32                         # how many mutants (0: every mutable site)
  operators: []                 # operator families or names (empty: every bug-injecting one)
  seed: 0                       # the same seed picks the same mutants

# timeout: 60                   # seconds per simulator run (default: 10 x the golden run, at least 30)
# jobs: 2                       # simulator processes at once (default: the CPU count)
min_score: 0.8                  # the gate: `hwtp ci` exits 1 when the mutation score is below this
"""


def write_starter(root: Path, force: bool = False) -> tuple[Path, Findings]:
    """Inspect ``root`` and write ``root/hwtp.yaml``; refuses to overwrite unless ``force``."""
    target = root / CONFIG_NAME
    if target.exists() and not force:
        raise ConfigError(f"{target} already exists (use --force to overwrite it)")
    findings = inspect(root)
    target.write_text(render(findings), encoding="utf-8")
    return target, findings
