"""Designs: a folder with ``design.yaml``, or a bare Verilog file plus ``--top``.

Ports (name, direction, width, signedness) come from the RTL through pyslang, never from the
manifest. Loading a design validates the manifest, the sources (they may not leave the
folder) and the RTL (syntax errors come back with file:line:col).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from hwtp import env, yamlio
from hwtp.errors import DesignError
from hwtp.rtl import elaborate, escaping_calls

Direction = Literal["input", "output", "inout"]
MANIFEST = "design.yaml"
_MANIFEST_KEYS = {"name", "top", "sources", "spec", "clock", "reset", "description"}
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]*$")


@dataclass(frozen=True)
class Port:
    """A top-level port as the RTL declares it."""

    name: str
    direction: Direction
    width: int
    signed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "direction": self.direction, "width": self.width, "signed": self.signed}


@dataclass(frozen=True)
class Clock:
    """The design's clock input and its period."""

    port: str
    period_ns: float = 10.0


@dataclass(frozen=True)
class Reset:
    """The design's reset input: its active level and how many cycles a reset lasts."""

    port: str
    active: Literal["low", "high"] = "low"
    cycles: int = 2

    @property
    def active_value(self) -> int:
        return 0 if self.active == "low" else 1

    @property
    def inactive_value(self) -> int:
        return 1 - self.active_value


@dataclass(frozen=True)
class SourceFile:
    """One RTL source: its path relative to the design folder, and its text."""

    path: str
    text: str


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


def load_shipped() -> list[Design]:
    """Every shipped design, loaded."""
    return [load_design(name) for name in shipped_names()]


#: Set for one command by ``--allow-system-tasks`` (None: ``$HWTP_ALLOW_SYSTEM_TASKS`` decides).
_allow_system_tasks: bool | None = None


def allow_system_tasks(allow: bool | None) -> None:
    """Allow (True), refuse (False) or leave to the environment (None) RTL escaping calls."""
    global _allow_system_tasks
    _allow_system_tasks = allow


def system_tasks_allowed() -> bool:
    """Whether designs may call system tasks that run commands or write files."""
    return env.allow_system_tasks() if _allow_system_tasks is None else _allow_system_tasks


def check_trusted(sources: tuple[SourceFile, ...], root: Path) -> None:
    """Refuse RTL that runs commands or host code, or writes files, unless the user opted in.

    The simulated RTL runs as the user; plans and LLM text are only data. See the README's
    "Trust model".
    """
    if system_tasks_allowed():
        return
    calls = escaping_calls(sources)
    if not calls:
        return
    file, line, name, why = calls[0]
    path = Path(file) if Path(file).is_absolute() else root / file
    more = f" (and {len(calls) - 1} more)" if len(calls) > 1 else ""
    raise DesignError(
        f"{path}:{line}: {name} {why}{more}: hwtp refuses RTL that runs commands or writes files; "
        f"if you trust this design, pass --allow-system-tasks or set {env.ALLOW_SYSTEM_TASKS_VAR}=1"
    )


def load_design(
    ref: str | Path,
    *,
    top: str | None = None,
    clock: Clock | None = None,
    reset: Reset | None = None,
) -> Design:
    """Load a design from a shipped name, a design folder, or a bare Verilog file.

    For a bare file, ``top`` names the top module (optional when the file has one module);
    ``clock``/``reset`` describe its clock and reset (when omitted, a 1-bit input named
    ``clk``/``clock`` is taken as a 10 ns clock and ``rst_n``/``rst``/``reset`` as reset).
    """
    path = Path(ref)
    if not path.exists() and isinstance(ref, str) and _NAME_RE.match(ref):
        shipped = shipped_root() / ref
        if (shipped / MANIFEST).is_file():
            return _load_folder(shipped, shipped=True)
        raise DesignError(f"{ref}: no such file, folder or shipped design (shipped: {', '.join(shipped_names())})")
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
    line = located.line_of(key)
    where = f"{path}:{line}" if line else str(path)
    field = ".".join(str(k) for k in key) or "(document)"
    return DesignError(f"{where}: {field}: {message}")


def _load_folder(folder: Path, shipped: bool = False) -> Design:
    manifest_path = folder / MANIFEST
    try:
        located = yamlio.load(yamlio.decode_utf8(manifest_path.read_bytes()))
    except (yamlio.YamlLoadError, yamlio.TextDecodeError) as exc:
        where = f"{manifest_path}:{exc.line}" if exc.line else str(manifest_path)
        raise DesignError(f"{where}: {exc.message}") from exc
    except OSError as exc:
        raise DesignError(f"{manifest_path}: cannot read: {exc}") from exc
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
    clock = _parse_clock(manifest_path, located, data.get("clock"))
    reset = _parse_reset(manifest_path, located, data.get("reset"))
    ports = _ports_or_error(sources, top, manifest_path, located)
    if not shipped:
        check_trusted(sources, root)
    design = Design(name, top, root, sources, spec, clock, reset, ports, shipped)
    _check_control_ports(design, manifest_path)
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


def _parse_clock(path: Path, located: yamlio.Located, value: Any) -> Clock | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("port"), str):
        raise _manifest_error(path, located, ("clock",), "expected {port: NAME, period_ns: N}")
    period = value.get("period_ns", 10)
    if isinstance(period, bool) or not isinstance(period, (int, float)) or period <= 0:
        raise _manifest_error(path, located, ("clock", "period_ns"), "expected a positive number")
    extra = set(value) - {"port", "period_ns"}
    if extra:
        raise _manifest_error(path, located, ("clock", sorted(extra)[0]), "unknown field (valid: port, period_ns)")
    return Clock(value["port"], float(period))


def _parse_reset(path: Path, located: yamlio.Located, value: Any) -> Reset | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("port"), str):
        raise _manifest_error(path, located, ("reset",), "expected {port: NAME, active: low|high, cycles: N}")
    active = value.get("active", "low")
    if active not in ("low", "high"):
        raise _manifest_error(path, located, ("reset", "active"), "expected 'low' or 'high'")
    cycles = value.get("cycles", 2)
    if isinstance(cycles, bool) or not isinstance(cycles, int) or not 1 <= cycles <= 1000:
        raise _manifest_error(path, located, ("reset", "cycles"), "expected an integer from 1 to 1000")
    extra = set(value) - {"port", "active", "cycles"}
    if extra:
        raise _manifest_error(path, located, ("reset", sorted(extra)[0]), "unknown field (valid: port, active, cycles)")
    return Reset(value["port"], active, cycles)


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
        from hwtp.rtl import module_names

        names = module_names(sources)
        if not names:
            raise DesignError(f"{path}: no module found: a design needs a top module (module NAME ... endmodule)")
        if len(names) != 1:
            listed = ", ".join(names) or "none"
            raise DesignError(f"{path}: pass --top to choose the top module (modules: {listed})")
        top = names[0]
    ports = elaborate(sources, top)
    check_trusted(sources, root)
    by_name = {p.name: p for p in ports}
    if clock is None:
        clk = next((n for n in ("clk", "clock", "i_clk", "clk_i") if n in by_name), None)
        clock = Clock(clk, 10.0) if clk else None
    if reset is None and clock is not None:
        for name, active in (
            ("rst_n", "low"),
            ("rstn", "low"),
            ("reset_n", "low"),
            ("rst_ni", "low"),
            ("rst", "high"),
            ("reset", "high"),
            ("rst_i", "high"),
        ):
            if name in by_name:
                reset = Reset(name, active, 2)  # type: ignore[arg-type]
                break
    design = Design(path.stem, top, root, sources, "", clock, reset, ports)
    _check_control_ports(design, path)
    return design
