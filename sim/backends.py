"""Simulator backends behind one small interface, with a name registry.

A backend builds a set of sources into a simulator executable (in a folder the build cache
owns) and says how to start it with the cocotb harness. Verilator is the default; Icarus is
available when ``iverilog`` is installed.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hwtp import env
from hwtp.errors import DesignError, ToolchainError
from hwtp.sim import procs, toolchain

HARNESS_MODULE = "hwtp.sim.harness"
#: Changing how builds are made invalidates cached builds.
BUILD_ABI = "1"


class Backend(Protocol):
    """What every simulator backend provides."""

    @property
    def name(self) -> str:
        """The backend's registry name."""

    def fingerprint(self) -> str:
        """Toolchain identity that goes into the build-cache key."""

    def build(self, sources: Sequence[Path], top: str, build_dir: Path, extra_args: Sequence[str]) -> None:
        """Compile ``sources`` (paths relative to ``build_dir``) with top module ``top``
        into ``build_dir``, running in ``build_dir``."""

    def command(self, build_dir: Path, top: str, plusargs: Sequence[str]) -> list[str]:
        """argv that starts the simulation of a build."""

    def environment(self, top: str) -> dict[str, str]:
        """Environment of the simulator process (without the job variables)."""


def _cocotb_environment(top: str, base: dict[str, str]) -> dict[str, str]:
    import cocotb_tools.config as cocotb_config
    import find_libpython

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
        try:
            proc = procs.run(argv, cwd=cwd, env=environ, stdout=fh, stderr=subprocess.STDOUT)
        except OSError as exc:
            raise ToolchainError(f"cannot run {argv[0]}: {exc.strerror}") from exc
    if proc.returncode != 0:
        text = log.read_text(encoding="utf-8", errors="replace")
        errors = [ln for ln in text.splitlines() if "%Error" in ln or "error:" in ln]
        first = errors[0] if errors else "\n".join(text.splitlines()[-15:])
        internal = any("Internal Error" in ln for ln in errors)
        if design_errors and errors and not internal:
            raise DesignError(f"{what} failed: {first.strip()} (full log: {log})")
        raise ToolchainError(f"{what} failed (exit code {proc.returncode}): {first.strip()} (full log: {log})")


@dataclass(frozen=True)
class VerilatorBackend:
    """Verilator through cocotb's VPI library (the default backend)."""

    name: str = "verilator"

    def fingerprint(self) -> str:
        tool = toolchain.find_verilator()
        import cocotb

        return f"verilator-{tool.version_text}-cocotb-{cocotb.__version__}-abi{BUILD_ABI}"

    def build(self, sources: Sequence[Path], top: str, build_dir: Path, extra_args: Sequence[str]) -> None:
        import cocotb_tools.config as cocotb_config

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
            "--timescale",
            "1ns/1ps",
            "-Wno-fatal",
            "-Wno-lint",
            "-Wno-style",
            "--x-assign",
            "0",
            "--x-initial",
            "0",
            *extra_args,
            str(cocotb_config.share_dir / "lib" / "verilator" / "verilator.cpp"),
            *(str(s) for s in sources),
        ]
        environ = toolchain.simulator_environment(tool)
        log = build_dir / "build.log"
        _run_build_step(argv, build_dir, environ, log, "Verilator")
        jobs = str(max(1, min(os.cpu_count() or 1, 4)))
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
        _run_build_step(make, build_dir, environ, log, "C++ build of the Verilated model", design_errors=False)

    def command(self, build_dir: Path, top: str, plusargs: Sequence[str]) -> list[str]:
        return [str(build_dir / top), *plusargs]

    def environment(self, top: str) -> dict[str, str]:
        environ = _cocotb_environment(top, toolchain.simulator_environment())
        environ["COCOTB_TRUST_INERTIAL_WRITES"] = "1"
        return environ


@dataclass(frozen=True)
class IcarusBackend:
    """Icarus Verilog (``iverilog``/``vvp``) through cocotb's VPI module."""

    name: str = "icarus"

    def _exe(self, name: str) -> str:
        found = toolchain.icarus()
        if found is None:
            raise ToolchainError("Icarus Verilog not found; install it (Debian: apt-get install iverilog)")
        return str(found.parent / name)

    def fingerprint(self) -> str:
        out = procs.run([self._exe("iverilog"), "-V"], timeout=60, capture_output=True, text=True)
        match = re.search(r"version\s+(\S+)", out.stdout + out.stderr)
        import cocotb

        return f"icarus-{match.group(1) if match else 'unknown'}-cocotb-{cocotb.__version__}-abi{BUILD_ABI}"

    def build(self, sources: Sequence[Path], top: str, build_dir: Path, extra_args: Sequence[str]) -> None:
        timescale = build_dir / "timescale.v"
        timescale.write_text("`timescale 1ns/1ps\n", encoding="utf-8")
        argv = [
            self._exe("iverilog"),
            "-g2012",
            "-o",
            str(build_dir / "sim.vvp"),
            "-s",
            top,
            *extra_args,
            str(timescale),
            *(str(s) for s in sources),
        ]
        _run_build_step(argv, build_dir, env.base_environment(), build_dir / "build.log", "Icarus")

    def command(self, build_dir: Path, top: str, plusargs: Sequence[str]) -> list[str]:
        import cocotb_tools.config as cocotb_config

        return [
            self._exe("vvp"),
            "-m",
            str(cocotb_config.lib_entry("vpi", "icarus")),
            str(build_dir / "sim.vvp"),
            *plusargs,
            "-none",
        ]

    def environment(self, top: str) -> dict[str, str]:
        return _cocotb_environment(top, env.base_environment())


_BACKENDS: dict[str, type[VerilatorBackend] | type[IcarusBackend]] = {
    "verilator": VerilatorBackend,
    "icarus": IcarusBackend,
}


def get_backend(name: str) -> Backend:
    """The backend called ``name``; fails listing the valid names."""
    try:
        backend: Backend = _BACKENDS[name]()
    except KeyError:
        raise DesignError(f"unknown simulator {name!r} (valid: {', '.join(sorted(_BACKENDS))})") from None
    return backend


def backend_names() -> list[str]:
    return sorted(_BACKENDS)
