"""What ``hwtp ci init`` read from a project's own cocotb flow (a runner script or a Makefile).

:mod:`hwtp.ci.runnerscript` and :mod:`hwtp.ci.makefile` each give a :class:`Detected`; what they
could not evaluate is an :class:`Unknown` (file, line, the construct, and the ``hwtp.yaml`` key
the user fills in instead). :mod:`hwtp.ci.starter` turns it into the starter file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: cocotb simulator names hwtp has a backend for (others build with hwtp's default, Verilator).
SIMULATORS = ("verilator", "icarus")


@dataclass(frozen=True)
class Unknown:
    """A construct the reader did not evaluate: where, what, and which key to fill in by hand."""

    file: str   # relative to the project folder
    line: int
    what: str
    key: str    # the hwtp.yaml key it would have given, e.g. design.sources

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}; fill in {self.key} by hand"


@dataclass(frozen=True)
class Detected:
    """A project's build and test settings as its cocotb flow gives them (paths absolute)."""

    origin: str                                   # the file read, relative to the project folder
    sources: tuple[Path, ...] = ()
    top: str | None = None
    modules: tuple[str, ...] = ()                 # cocotb test modules, dotted names as given
    module_paths: tuple[Path, ...] = ()           # folders Python searches for them, in order
    includes: tuple[Path, ...] = ()
    defines: tuple[tuple[str, str], ...] = ()
    parameters: tuple[tuple[str, str], ...] = ()
    args: tuple[str, ...] = ()                    # other build arguments, as given
    simulator: str | None = None                  # one of SIMULATORS, when the flow names one
    test_dir: Path | None = None                  # the simulator's working folder
    test_filter: str | None = None
    random_seed: int | None = None
    env: tuple[tuple[str, str], ...] = ()
    unknown: tuple[Unknown, ...] = ()
    notes: tuple[str, ...] = ()                   # what was read but is not used, and why


def module_folder(module: str, candidates: Sequence[Path]) -> Path | None:
    """The first of ``candidates`` from which ``import module`` finds a file (``a.b``: ``a/b.py``
    or ``a/b/__init__.py``), as Python's path search would."""
    rel = Path(*module.split("."))
    for folder in candidates:
        if (folder / rel).with_suffix(".py").is_file() or (folder / rel / "__init__.py").is_file():
            return folder
    return None


def pytest_base(folder: Path) -> Path:
    """The folder pytest puts on ``sys.path`` for a test file in ``folder`` (its default
    "prepend" import mode): the first one upwards that is not a package."""
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        folder = folder.parent
    return folder
