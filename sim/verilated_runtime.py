"""Verilator's runtime library, compiled once per toolchain and flags instead of once per build.

Every Verilator build compiles the same four runtime files (``verilated.cpp``,
``verilated_vpi.cpp``, ``verilated_dpi.cpp``, ``verilated_threads.cpp``): about 15 s of the
~17 s of compiler time a small design's build costs when ccache is not installed (measured on
2 cores; the model itself and cocotb's ``verilator.cpp`` take about 2 s). Their objects
depend only on the Verilator install and the flags, never on the design, so after a build
they are published in ``<cache>/verilator-runtime/<key>/`` and the next build with the same
key gets copies, newer than their sources, which ``make`` then leaves alone.

The key covers the toolchain fingerprint and install folder, the C++ compiler and the
compiler variables of the environment, the ``make`` arguments and every ``VM_* = value``
setting of the generated makefiles (coverage, tracing, timing, SystemC, ``-CFLAGS``...),
which is what ``verilated.mk`` compiles the runtime with. cocotb's ``verilator.cpp`` is
never shared: it includes the model's header. Publishing is one atomic rename of a complete
folder (``.tmp-PID-*`` folders of dead processes are swept), so a reader sees a complete set
or none; when none, the build compiles the runtime itself, exactly as without this module.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hwtp import env
from hwtp.sim import procs

#: The runtime objects every build links, with the dependency files make reads beside them.
OBJECTS = ("verilated", "verilated_vpi", "verilated_dpi", "verilated_threads")
_SETTING = re.compile(r"^VM_\w+ = (?:.*\\\n)*.*$", re.MULTILINE)  # with its continuation lines
#: Environment variables make reads into the compiler's command line.
_MAKE_ENV = ("CXX", "CXXFLAGS", "CPPFLAGS", "OPT", "OPT_FAST", "OPT_SLOW", "OPT_GLOBAL")


def root() -> Path:
    return env.cache_dir() / "verilator-runtime"


def key(build_dir: Path, fingerprint: str, make_args: Sequence[str], environ: dict[str, str]) -> str:
    """The key of the runtime a build in ``build_dir`` (after the Verilator step) compiles."""
    settings = []
    for name in ("Vtop_classes.mk", "Vtop.mk"):
        makefile = build_dir / name
        text = makefile.read_text(encoding="utf-8") if makefile.is_file() else ""
        settings += [m.group(0).strip() for m in _SETTING.finditer(text)]
    cxx = environ.get("CXX", "g++")
    found = shutil.which(cxx, path=environ.get("PATH"))
    version = procs.run([found, "--version"], capture_output=True, text=True, timeout=60).stdout if found else ""
    made = [environ.get(name) for name in _MAKE_ENV]
    blob = json.dumps([fingerprint, environ.get("VERILATOR_ROOT"), version, made, list(make_args), sorted(settings)])
    return hashlib.sha256(blob.encode()).hexdigest()


def _files() -> list[str]:
    return [f"{obj}{ext}" for obj in OBJECTS for ext in (".o", ".d")]


def reuse(build_dir: Path, runtime_key: str) -> bool:
    """Copy the published runtime objects of ``runtime_key`` into ``build_dir`` (newer than
    their sources, so make keeps them); False when none is published yet."""
    folder = root() / runtime_key[:32]
    if not folder.is_dir():
        return False
    try:
        for name in _files():
            target = build_dir / name
            shutil.copyfile(folder / name, target)
            os.utime(target)
    except OSError:  # removed under us (a cleared cache): make compiles what is missing
        return False
    return True


def publish(build_dir: Path, runtime_key: str) -> None:
    """Publish the runtime objects of a finished build in ``build_dir`` under ``runtime_key``."""
    base = root()
    folder = base / runtime_key[:32]
    if folder.is_dir() or not all((build_dir / name).is_file() for name in _files()):
        return
    base.mkdir(parents=True, exist_ok=True)
    procs.sweep(base, ".tmp-")
    work = Path(tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-", dir=base))
    try:
        for name in _files():
            shutil.copyfile(build_dir / name, work / name)
        os.rename(work, folder)
    except OSError:  # another process published the same key first
        shutil.rmtree(work, ignore_errors=True)
