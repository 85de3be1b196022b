"""The pyslang front end: parse RTL sources, report syntax errors, read the top's ports.

Everything that touches pyslang's compilation API for designs lives here; the mutation
engine (``hwtp.mutators``) walks the same syntax trees for its sites. Its records,
:class:`SourceFile` (what goes in) and :class:`Port` (what comes out), are defined here and
used through :mod:`hwtp.design`, which builds designs on this module (never the reverse).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyslang

from hwtp.errors import DesignError

Direction = Literal["input", "output", "inout"]
_DIRECTIONS = {"In": "input", "Out": "output", "InOut": "inout"}


@dataclass(frozen=True)
class SourceFile:
    """One RTL source: its path relative to the design folder, and its text."""

    path: str
    text: str


@dataclass(frozen=True)
class Port:
    """A top-level port as the RTL declares it."""

    name: str
    direction: Direction
    width: int
    signed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "direction": self.direction, "width": self.width, "signed": self.signed}


def parse(sources: Sequence[SourceFile]) -> tuple[pyslang.SourceManager, list[Any]]:
    """Parse every source into a syntax tree sharing one source manager."""
    manager = pyslang.SourceManager()
    trees = [pyslang.syntax.SyntaxTree.fromText(s.text, manager, s.path, s.path) for s in sources]
    return manager, trees


def _errors(manager: pyslang.SourceManager, diagnostics: Any) -> list[str]:
    engine = pyslang.DiagnosticEngine(manager)
    out = []
    for diag in diagnostics:
        if not diag.isError():
            continue
        loc = diag.location
        try:
            where = f"{manager.getFileName(loc)}:{manager.getLineNumber(loc)}:{manager.getColumnNumber(loc)}"
        except Exception:  # a diagnostic without a location (e.g. a missing top)
            where = "(design)"
        out.append(f"{where}: {engine.formatMessage(diag)}")
    return out


def check_syntax(sources: Sequence[SourceFile]) -> None:
    """Raise :class:`DesignError` with file:line:col for the first syntax error."""
    manager, trees = parse(sources)
    for tree in trees:
        errors = _errors(manager, tree.diagnostics)
        if errors:
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise DesignError(f"{errors[0]}{more}")


def module_names(sources: Sequence[SourceFile]) -> list[str]:
    """Names of the modules the sources declare, in order."""
    check_syntax(sources)
    _manager, trees = parse(sources)
    names: list[str] = []
    for tree in trees:
        names.extend(m.header.name.valueText for m in module_declarations(tree))
    return names


def top_modules(sources: Sequence[SourceFile]) -> list[str]:
    """Modules that no other module instantiates (pyslang's top instances)."""
    check_syntax(sources)
    _manager, trees = parse(sources)
    compilation = pyslang.ast.Compilation()
    for tree in trees:
        compilation.addSyntaxTree(tree)
    return [str(i.name) for i in compilation.getRoot().topInstances]


def module_declarations(tree: Any) -> list[Any]:
    """The module declarations of one syntax tree (a lone member, module or not, is the root)."""
    kind = pyslang.syntax.SyntaxKind.ModuleDeclaration
    root = tree.root
    if root.kind == kind:
        return [root]
    if root.kind != pyslang.syntax.SyntaxKind.CompilationUnit:  # e.g. a file holding only `wire x;`
        return []
    return [m for m in root.members if m.kind == kind]


def elaborate(sources: Sequence[SourceFile], top: str) -> tuple[Port, ...]:
    """Elaborate ``top`` and return its ports, parameters resolved to their defaults."""
    check_syntax(sources)
    manager, trees = parse(sources)
    options = pyslang.ast.CompilationOptions()
    options.topModules = {top}
    compilation = pyslang.ast.Compilation(pyslang.Bag([options]))
    for tree in trees:
        compilation.addSyntaxTree(tree)
    instances = [i for i in compilation.getRoot().topInstances if i.name == top]
    if not instances:
        declared = ", ".join(module_names(sources)) or "none"
        raise DesignError(f"no module named {top!r} in the sources (modules: {declared})")
    errors = _errors(manager, compilation.getAllDiagnostics())
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise DesignError(f"{errors[0]}{more}")
    ports = []
    for port in instances[0].body.portList:
        direction = _DIRECTIONS.get(str(port.direction).rsplit(".", 1)[-1])
        if direction is None or not hasattr(port, "type"):
            raise DesignError(f"module {top}: port {port.name!r} has an unsupported kind")
        width = int(port.type.bitWidth)
        if width < 1:
            raise DesignError(f"module {top}: port {port.name!r} has no fixed width")
        ports.append(Port(port.name, direction, width, bool(port.type.isSigned)))  # type: ignore[arg-type]
    return tuple(ports)


def module_body_offsets(text: str, path: str = "source") -> list[int]:
    """Byte offsets just after each module header's ``;`` (where declarations may go)."""
    tree = pyslang.syntax.SyntaxTree.fromText(text, path)
    return [int(m.header.sourceRange.end.offset) for m in module_declarations(tree)]


#: System tasks and functions through which RTL reaches outside the simulation: they run a
#: command or host code, or create and write files. Reading files (``$readmemh``) and printing
#: (``$display``, ``$fwrite`` to stdout) stay allowed; every file a design could write needs
#: ``$fopen``, ``$writemem*`` or a waveform dump.
ESCAPING_CALLS: dict[str, str] = {
    "$system": "runs a shell command",
    "$fopen": "opens a file (for writing)",
    "$writememh": "writes a file",
    "$writememb": "writes a file",
    "$dumpfile": "writes a waveform file",
    "$dumpvars": "writes a waveform file",
    "$dumpports": "writes a waveform file",
}
_VERILATOR_C = re.compile(r"^\$c(?:pure)?\d*$")  # Verilator's $c(...): C++ pasted into the model


def escaping_calls(sources: Sequence[SourceFile]) -> list[tuple[str, int, str, str]]:
    """Calls in the RTL that run commands or host code, or write files: (file, line, name, why).

    Found on pyslang's syntax tree, so comments and strings never match and a call written
    through a macro is reported at the line that uses the macro. DPI imports count as calls
    (an imported C function such as libc's ``system`` runs as the user).
    """
    manager, trees = parse(sources)
    found: list[tuple[str, int, str, str]] = []
    system_identifier = pyslang.parsing.TokenKind.SystemIdentifier
    dpi_import = pyslang.syntax.SyntaxKind.DPIImport

    def where(loc: Any) -> tuple[str, int]:
        loc = manager.getFullyExpandedLoc(loc)
        return str(manager.getFileName(loc)), int(manager.getLineNumber(loc))

    def visit(node: Any) -> None:
        if isinstance(node, pyslang.parsing.Token):
            if node.kind == system_identifier:
                name = node.valueText
                why = ESCAPING_CALLS.get(name) or ("runs C++ code" if _VERILATOR_C.match(name) else None)
                if why:
                    found.append((*where(node.location), name, why))
        elif node.kind == dpi_import:
            found.append((*where(node.sourceRange.start), 'import "DPI-C"', "calls host C code"))

    for tree in trees:
        tree.root.visit(visit)
    return found
