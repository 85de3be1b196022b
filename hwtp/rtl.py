"""The pyslang front end: parse RTL sources, report syntax errors, read the top's ports.

Everything that touches pyslang's compilation API for designs lives here; the mutation
engine (``hwtp.mutators``) walks the same syntax trees for its sites.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyslang

from hwtp.errors import DesignError

if TYPE_CHECKING:
    from hwtp.design import Port, SourceFile

_DIRECTIONS = {"In": "input", "Out": "output", "InOut": "inout"}


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


def module_declarations(tree: Any) -> list[Any]:
    """The module declarations of one syntax tree (a lone module is the tree's root)."""
    kind = pyslang.syntax.SyntaxKind.ModuleDeclaration
    if tree.root.kind == kind:
        return [tree.root]
    return [m for m in tree.root.members if m.kind == kind]


def elaborate(sources: Sequence[SourceFile], top: str) -> tuple[Port, ...]:
    """Elaborate ``top`` and return its ports, parameters resolved to their defaults."""
    from hwtp.design import Port

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
