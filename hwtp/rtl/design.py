"""Designs: a folder with ``design.yaml``, or a bare Verilog file plus ``--top``.

Ports (name, direction, width, signedness) come from the RTL through pyslang, never from the
manifest. Loading a design validates the manifest, the sources (they may not leave the
folder) and the RTL (syntax errors come back with file:line:col).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hwtp import env, yamlio
from hwtp.errors import DesignError
from hwtp.rtl.frontend import NO_OPTIONS, BuildOptions, Port, SourceFile, elaborate, module_names

MANIFEST = "design.yaml"
_MANIFEST_KEYS = {"name", "top", "sources", "spec", "clock", "reset", "description"}
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")
Active = Literal["low", "high"]
#: The most cycles a reset may last (the harness holds it for that many rising edges).
MAX_RESET_CYCLES = 1000
#: Port names taken as the clock when none is given, in order of preference.
CLOCK_NAMES = ("clk", "clock", "clk_i", "i_clk", "aclk")
#: Port names taken as the reset when none is given, in order of preference.
RESET_NAMES = ("rst_n", "rstn", "reset_n", "resetn", "rst_ni", "aresetn", "rst", "reset", "rst_i")
#: A reset whose name ends like this (rst_n, rstn, aresetn, rst_ni, rst_b, rst_l) is active low.
_ACTIVE_LOW_NAME = re.compile(r"(?:n|_ni|_b|_l)$", re.IGNORECASE)
_CLOCK_SHAPE = "expected {port: NAME, period_ns: N}"
_RESET_SHAPE = "expected {port: NAME, active: low|high, cycles: N}"


class ControlError(DesignError):
    """A clock or reset description that is wrong; ``key`` names the field (``("reset", "cycles")``)
    and ``problem`` what is wrong, so each reader can say where it came from."""

    def __init__(self, key: tuple[str, ...], problem: str) -> None:
        super().__init__(f"{'.'.join(key)}: {problem}")
        self.key = key
        self.problem = problem


@dataclass(frozen=True)
class Clock:
    """The design's clock input and its period (a positive number of ns)."""

    port: str
    period_ns: float = 10.0

    def __post_init__(self) -> None:
        if not isinstance(self.port, str) or not self.port:
            raise ControlError(("clock", "port"), "expected a port name")
        period = self.period_ns
        if isinstance(period, bool) or not isinstance(period, (int, float)) or not 0 < period < math.inf:
            raise ControlError(("clock", "period_ns"), "expected a positive number")
        object.__setattr__(self, "period_ns", float(period))


@dataclass(frozen=True)
class Reset:
    """The design's reset input: its active level and how many cycles (1..1000) a reset lasts.

    Build one with :func:`reset_of` to take the level from the port's name when it is not given.
    """

    port: str
    active: Active
    cycles: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.port, str) or not self.port:
            raise ControlError(("reset", "port"), "expected a port name")
        if self.active not in ("low", "high"):
            raise ControlError(("reset", "active"), "expected 'low' or 'high'")
        cycles = self.cycles
        if isinstance(cycles, bool) or not isinstance(cycles, int) or not 1 <= cycles <= MAX_RESET_CYCLES:
            raise ControlError(("reset", "cycles"), f"expected an integer from 1 to {MAX_RESET_CYCLES}")

    @property
    def active_value(self) -> int:
        return 0 if self.active == "low" else 1

    @property
    def inactive_value(self) -> int:
        return 1 - self.active_value


def reset_level(port: str) -> Active:
    """The active level a reset's name implies: ``rst_n``, ``rstn``, ``aresetn``, ``rst_ni``
    (a name ending in ``n``, ``_ni``, ``_b`` or ``_l``) are active low, any other is active high."""
    return "low" if _ACTIVE_LOW_NAME.search(port) else "high"


def reset_of(port: str, active: Any = None, cycles: Any = 2) -> Reset:
    """A validated :class:`Reset`; without ``active`` the level comes from the port's name."""
    return Reset(port, reset_level(port) if active is None else active, cycles)


def clock_from(value: Any) -> Clock:
    """A :class:`Clock` from ``{port: NAME, period_ns: N}`` (a manifest's or ``hwtp.yaml``'s);
    :class:`ControlError` names the wrong field."""
    if not isinstance(value, dict) or not isinstance(value.get("port"), str):
        raise ControlError(("clock",), _CLOCK_SHAPE)
    extra = sorted(set(value) - {"port", "period_ns"})
    if extra:
        raise ControlError(("clock", extra[0]), "unknown field (valid: port, period_ns)")
    return Clock(value["port"], value.get("period_ns", 10.0))


def reset_from(value: Any) -> Reset:
    """A :class:`Reset` from ``{port: NAME, active: low|high, cycles: N}`` (``active`` defaults
    to the level the port's name implies, ``cycles`` to 2); :class:`ControlError` names the field."""
    if not isinstance(value, dict) or not isinstance(value.get("port"), str):
        raise ControlError(("reset",), _RESET_SHAPE)
    extra = sorted(set(value) - {"port", "active", "cycles"})
    if extra:
        raise ControlError(("reset", extra[0]), "unknown field (valid: port, active, cycles)")
    return reset_of(value["port"], value.get("active"), value.get("cycles", 2))


def guess_controls(ports: Sequence[Port], edges: Collection[str] = ()) -> tuple[Clock | None, Reset | None]:
    """Clock and reset guessed from the names of 1-bit inputs, in any case (:data:`CLOCK_NAMES`,
    :data:`RESET_NAMES`; ``CLK``, ``RST``): a 10 ns clock, and a 2-cycle reset at the level its
    name implies. Without a clock name, the one input of ``edges`` (used as ``posedge x``) that
    is not the reset is the clock; several such inputs give no clock (:func:`clock_candidates`)."""
    names = {p.name.lower(): p.name for p in ports if p.direction == "input" and p.width == 1}
    reset = next((reset_of(names[n]) for n in RESET_NAMES if n in names), None)
    clock = next((Clock(names[n]) for n in CLOCK_NAMES if n in names), None)
    if clock is None:
        used = clock_candidates(ports, edges, reset)
        clock = Clock(used[0]) if len(used) == 1 else None
    return clock, reset


_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_EDGE = re.compile(r"\b(?:posedge|negedge)\s*\(?\s*([A-Za-z_][A-Za-z0-9_$]*)")


def edge_signals(sources: Sequence[SourceFile]) -> frozenset[str]:
    """Every name used as ``posedge x`` / ``negedge x`` in the sources (comments aside)."""
    return frozenset(m.group(1) for s in sources for m in _EDGE.finditer(_COMMENT.sub(" ", s.text)))


def clock_candidates(ports: Sequence[Port], edges: Collection[str], reset: Reset | None) -> list[str]:
    """The 1-bit inputs used as an edge (``posedge x``) other than the reset: the design's clocks."""
    return [
        p.name
        for p in ports
        if p.direction == "input"
        and p.width == 1
        and p.name in edges
        and (reset is None or p.name != reset.port)
        and p.name.lower() not in RESET_NAMES
    ]


def clocking_problem(ports: Sequence[Port], edges: Collection[str], clock: Clock | None,
                     reset: Reset | None, hint: str, chosen: bool = False) -> str | None:
    """Why hwtp cannot drive this design's clocks, or None: an input used as an edge
    (``posedge x``, :func:`clock_candidates`) that is not ``clock`` would be driven as random
    data (a clocked design taken as combinational, or a second clock hwtp does not drive).
    ``chosen``: the user named ``clock`` (its other edge inputs then are inputs as asked);
    ``hint``: how the reader sets the clock, said when that is the fix."""
    used = clock_candidates(ports, edges, reset)
    undriven = [p for p in used if clock is None or p != clock.port]
    if not undriven or (chosen and clock is not None):
        return None
    if len(used) > 1:
        return (f"several clocks ({', '.join(used)}: each is used as posedge/negedge): hwtp drives one clock "
                f"and would drive {', '.join(undriven)} as random data; {hint} to choose the one hwtp drives "
                "(the others are then driven as data)")
    return (f"input {undriven[0]} is used as a clock (posedge/negedge {undriven[0]}) but no clock is set: "
            f"hwtp would drive it as random data, a clocked design taken as combinational; {hint}")


@dataclass(frozen=True)
class Design:
    """A design to test: its RTL, its spec, its clock/reset and its ports."""

    name: str
    top: str
    root: Path
    sources: tuple[SourceFile, ...]
    spec: str
    clock: Clock | None
    reset: Reset | None
    ports: tuple[Port, ...]
    shipped: bool = False

    @property
    def kind(self) -> Literal["combinational", "sequential"]:
        return "sequential" if self.clock is not None else "combinational"

    @property
    def inputs(self) -> tuple[Port, ...]:
        return tuple(p for p in self.ports if p.direction == "input")

    @property
    def outputs(self) -> tuple[Port, ...]:
        return tuple(p for p in self.ports if p.direction == "output")

    @property
    def control_ports(self) -> frozenset[str]:
        """Ports the harness owns (clock and reset): plans may not drive them."""
        names = {self.clock.port} if self.clock else set()
        if self.reset:
            names.add(self.reset.port)
        return frozenset(names)

    def port(self, name: str) -> Port | None:
        return next((p for p in self.ports if p.name == name), None)

    @property
    def content_hash(self) -> str:
        """sha256 of everything that changes behaviour: sources, top, clock and reset."""
        h = hashlib.sha256()
        h.update(f"top={self.top}\nclock={self.clock}\nreset={self.reset}\n".encode())
        for src in self.sources:
            h.update(f"{src.path}\0{len(src.text)}\0".encode())
            h.update(src.text.encode())
        return h.hexdigest()

    def source(self, path: str) -> SourceFile:
        for src in self.sources:
            if src.path == path:
                return src
        raise DesignError(f"design {self.name} has no source {path!r}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "top": self.top,
            "kind": self.kind,
            "sources": [s.path for s in self.sources],
            "clock": {"port": self.clock.port, "period_ns": self.clock.period_ns} if self.clock else None,
            "reset": (
                {"port": self.reset.port, "active": self.reset.active, "cycles": self.reset.cycles}
                if self.reset
                else None
            ),
            "ports": [p.as_dict() for p in self.ports],
        }


def shipped_root() -> Path:
    """The folder holding the shipped designs (installed as package data)."""
    return Path(str(importlib.resources.files("hwtp.designs")))


def shipped_names() -> list[str]:
    """Names of the shipped designs, sorted."""
    root = shipped_root()
    return sorted(p.name for p in root.iterdir() if (p / MANIFEST).is_file())


#: Folders of design folders set for one command by ``--designs-dir`` (searched first).
_designs_dirs: tuple[Path, ...] = ()


def use_designs_dirs(dirs: Sequence[Path | str]) -> None:
    """Search these folders of design folders first when a design is named (``--designs-dir``)."""
    global _designs_dirs
    _designs_dirs = tuple(Path(d).expanduser() for d in dirs)


def search_path() -> list[tuple[Path, str]]:
    """Where a design name is looked up, in order, with where each folder came from:
    ``--designs-dir``, then ``$HWTP_DESIGNS``, then the shipped designs."""
    return [
        *((d, "--designs-dir") for d in _designs_dirs),
        *((d, env.DESIGNS_VAR) for d in env.designs_path()),
        (shipped_root(), "shipped"),
    ]


def designs_in(folder: Path) -> list[str]:
    """Names of the design folders (``NAME/design.yaml``) directly in ``folder``, sorted."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if (p / MANIFEST).is_file() and _NAME_RE.match(p.name))


def find_design(name: str) -> Path:
    """The design folder a name resolves to (the first of :func:`search_path` holding
    ``NAME/design.yaml``); :class:`DesignError` names every place looked in."""
    looked = []
    for folder, origin in search_path():
        if (folder / name / MANIFEST).is_file():
            return folder / name
        if origin != "shipped":
            looked.append(f"{folder} ({origin}{'' if folder.is_dir() else ', does not exist'})")
    where = f", nor a design folder {name}/ in {'; '.join(looked)}" if looked else ""
    raise DesignError(f"{name}: no such file, folder or shipped design{where} (shipped: {', '.join(shipped_names())})")


def known_designs() -> list[tuple[str, Path]]:
    """(name, folder) of every design :func:`find_design` can reach, the first of each name winning."""
    seen: dict[str, Path] = {}
    for folder, _origin in search_path():
        for name in designs_in(folder):
            seen.setdefault(name, folder / name)
    return sorted(seen.items())


#: Set for one command by ``--allow-system-tasks`` (None: ``$HWTP_ALLOW_SYSTEM_TASKS`` decides).
_allow_system_tasks: bool | None = None


def allow_system_tasks(allow: bool | None) -> None:
    """Allow (True), refuse (False) or leave to the environment (None) RTL escaping calls."""
    global _allow_system_tasks
    _allow_system_tasks = allow


def system_tasks_allowed() -> bool:
    """Whether designs may call system tasks that run commands or write files."""
    return env.allow_system_tasks() if _allow_system_tasks is None else _allow_system_tasks


def check_trusted(sources: Sequence[SourceFile], root: Path, top: str, options: BuildOptions = NO_OPTIONS,
                  simulator: str | None = None) -> None:
    """Refuse RTL that runs commands or host code, writes files or includes files from outside
    its folder, as ``simulator`` (default: the default backend) compiles it with ``options``;
    escaping calls are allowed when the user opted in (:func:`system_tasks_allowed`).
    The simulated RTL runs as the user; plans and LLM text are only data. See
    :mod:`hwtp.rtl.trust` and docs/explanation/trust-model.md."""
    from hwtp.rtl import trust
    from hwtp.sim.backends import DEFAULT_BACKEND, get_backend

    backend = get_backend(simulator or DEFAULT_BACKEND)
    trust.check(backend, sources, top, options, root=str(root), allow_escapes=system_tasks_allowed())


def load_design(
    ref: str | Path,
    *,
    top: str | None = None,
    clock: Clock | None = None,
    reset: Reset | None = None,
) -> Design:
    """Load a design from a name (found by :func:`find_design`: ``--designs-dir``,
    ``$HWTP_DESIGNS``, the shipped designs), a design folder, or a bare Verilog file.

    For a bare file, ``top`` names the top module (optional when the file has one module);
    ``clock``/``reset`` describe its clock and reset (when omitted, they are guessed from the
    port names by :func:`guess_controls`; a reset only with a clock).
    """
    path = Path(ref)
    if not path.exists() and isinstance(ref, str) and _NAME_RE.match(ref):
        folder = find_design(ref)
        return _load_folder(folder, shipped=folder.parent == shipped_root())
    if path.is_dir():
        if not (path / MANIFEST).is_file():
            raise DesignError(f"{path}: folder has no {MANIFEST}")
        return _load_folder(path)
    if path.is_file():
        if path.name == MANIFEST:
            return _load_folder(path.parent)
        return _load_bare(path, top=top, clock=clock, reset=reset)
    raise DesignError(f"{path}: no such file or folder")


def _manifest_error(path: Path, located: yamlio.Located, key: tuple[Any, ...], message: str) -> DesignError:
    return yamlio.located_error(DesignError, path, located, key, message)


def _load_folder(folder: Path, shipped: bool = False) -> Design:
    manifest_path = folder / MANIFEST
    located = yamlio.load_file(manifest_path, DesignError)
    data = located.data
    if not isinstance(data, dict):
        raise _manifest_error(manifest_path, located, (), "expected a mapping")
    unknown = sorted(set(data) - _MANIFEST_KEYS)
    if unknown:
        raise _manifest_error(
            manifest_path,
            located,
            (unknown[0],),
            f"unknown field (valid: {', '.join(sorted(_MANIFEST_KEYS))})",
        )
    name = _required_name(manifest_path, located, data, "name")
    top = _required_name(manifest_path, located, data, "top")
    sources_field = data.get("sources")
    if not isinstance(sources_field, list) or not sources_field:
        raise _manifest_error(manifest_path, located, ("sources",), "expected a non-empty list of paths")
    root = folder.resolve()
    sources = tuple(_read_source(root, manifest_path, located, i, rel) for i, rel in enumerate(sources_field))
    spec = ""
    if data.get("spec") is not None:
        spec_rel = data["spec"]
        if not isinstance(spec_rel, str):
            raise _manifest_error(manifest_path, located, ("spec",), "expected a path")
        spec_path = _inside(root, spec_rel, manifest_path, located, ("spec",))
        if not spec_path.is_file():
            raise _manifest_error(manifest_path, located, ("spec",), f"file {spec_rel!r} does not exist")
        try:
            spec = yamlio.decode_utf8(spec_path.read_bytes())
        except yamlio.TextDecodeError as exc:
            raise DesignError(f"{spec_path}:{exc.line}: {exc.message} (spec of {manifest_path})") from exc
    clock, reset = _controls(manifest_path, located, data)
    ports = _ports_or_error(sources, top, manifest_path, located)
    if not shipped:
        check_trusted(sources, root, top)
    design = Design(name, top, root, sources, spec, clock, reset, ports, shipped)
    _check_control_ports(design, manifest_path)
    problem = clocking_problem(ports, edge_signals(sources), clock, reset, "set clock: {port: NAME}", chosen=True)
    if problem:
        raise _manifest_error(manifest_path, located, ("clock",), problem)
    return design


def _required_name(path: Path, located: yamlio.Located, data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise _manifest_error(path, located, (key,), "required; expected an identifier")
    return value


def _inside(root: Path, rel: str, path: Path, located: yamlio.Located, key: tuple[Any, ...]) -> Path:
    candidate = (root / rel).resolve()
    if Path(rel).is_absolute() or not candidate.is_relative_to(root):
        raise _manifest_error(path, located, key, f"path {rel!r} leaves the design folder")
    return candidate


def _read_source(root: Path, path: Path, located: yamlio.Located, i: int, rel: Any) -> SourceFile:
    if not isinstance(rel, str) or not rel:
        raise _manifest_error(path, located, ("sources", i), "expected a path")
    full = _inside(root, rel, path, located, ("sources", i))
    if not full.is_file():
        raise _manifest_error(path, located, ("sources", i), f"file {rel!r} does not exist")
    try:
        return SourceFile(rel, yamlio.decode_utf8(full.read_bytes()))
    except yamlio.TextDecodeError as exc:
        raise DesignError(f"{full}:{exc.line}: {exc.message} (sources[{i}] of {path})") from exc
    except OSError as exc:
        raise _manifest_error(path, located, ("sources", i), f"cannot read {rel}: {exc.strerror}") from exc


def _controls(path: Path, located: yamlio.Located, data: dict[str, Any]) -> tuple[Clock | None, Reset | None]:
    try:
        clock = clock_from(data["clock"]) if data.get("clock") is not None else None
        reset = reset_from(data["reset"]) if data.get("reset") is not None else None
    except ControlError as exc:
        raise _manifest_error(path, located, exc.key, exc.problem) from exc
    return clock, reset


def _ports_or_error(sources: tuple[SourceFile, ...], top: str, path: Path, located: yamlio.Located) -> tuple[Port, ...]:
    try:
        return elaborate(sources, top)
    except DesignError as exc:
        if "no module named" in str(exc):
            raise _manifest_error(path, located, ("top",), str(exc)) from exc
        raise


def _check_control_ports(design: Design, where: Path) -> None:
    for role, name in (("clock", design.clock and design.clock.port), ("reset", design.reset and design.reset.port)):
        if not name:
            continue
        port = design.port(name)
        if port is None or port.direction != "input" or port.width != 1:
            raise DesignError(f"{where}: {role}: port {name!r} must be a 1-bit input of module {design.top}")


def _load_bare(path: Path, *, top: str | None, clock: Clock | None, reset: Reset | None) -> Design:
    text = yamlio.read_text(path, DesignError)
    root = path.parent.resolve()
    sources = (SourceFile(path.name, text),)
    if top is None:
        names = module_names(sources)
        if not names:
            raise DesignError(f"{path}: no module found: a design needs a top module (module NAME ... endmodule)")
        if len(names) != 1:
            listed = ", ".join(names) or "none"
            raise DesignError(f"{path}: pass --top to choose the top module (modules: {listed})")
        top = names[0]
    ports = elaborate(sources, top)
    check_trusted(sources, root, top)
    edges = edge_signals(sources)
    guessed_clock, guessed_reset = guess_controls(ports, edges)
    chosen = clock is not None
    clock = clock or guessed_clock
    if reset is None and clock is not None:  # a reset lasts clock cycles: none without a clock
        reset = guessed_reset
    design = Design(path.stem, top, root, sources, "", clock, reset, ports)
    _check_control_ports(design, path)
    problem = clocking_problem(ports, edges, clock, reset, "give --clock PORT", chosen=chosen)
    if problem:
        raise DesignError(f"{path}: {problem}")
    return design
