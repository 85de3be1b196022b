"""The pyslang front end: parse RTL sources, report syntax errors, read the top's ports.

Everything that touches pyslang's compilation API for designs lives here; the mutation
engine (``hwtp.mutators``) walks the same syntax trees for its sites. Its records,
:class:`SourceFile` and :class:`BuildOptions` (what goes in) and :class:`Port` (what comes
out), are defined here and used through :mod:`hwtp.rtl.design`, which builds designs on this
module (never the reverse).

Sources are parsed as the simulator will compile them: with the build's include folders (the
header files they hold are :attr:`BuildOptions.headers`, given by text, so a parse never reads
the disk), its defines and, when elaborating, its parameters. :func:`included_files` finds the
headers on disk once, when a configuration is loaded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import pyslang

from hwtp.errors import DesignError

Direction = Literal["input", "output", "inout"]
_DIRECTIONS = {"In": "input", "Out": "output", "InOut": "inout"}


#: Characters a build cannot take in a file name: Verilator's generated makefile splits names
#: at white space and gives the others meaning.
_UNBUILDABLE_NAME = re.compile(r"""[\s#$:;=%*?\[\]"'\\`|&<>(){}]""")


@dataclass(frozen=True)
class SourceFile:
    """One RTL source: its path relative to the design folder, and its text. A path that a
    build cannot take (white space, ``#``, ``$``, quotes...) is refused here, where every
    source is made (:class:`DesignError`, exit 2, naming the file)."""

    path: str
    text: str

    def __post_init__(self) -> None:
        bad = _UNBUILDABLE_NAME.search(self.path)
        if bad:
            raise DesignError(f"{self.path}: a source file name with {bad.group()!r} cannot be built (the "
                              f"simulator's makefile splits or interprets it); rename the file")


@dataclass(frozen=True)
class BuildOptions:
    """What a build gets besides its sources and top, in no simulator's syntax: each backend
    renders it into its own flags (:meth:`hwtp.sim.backends.Backend.arguments`), and pyslang
    parses with the same include folders, defines and parameters."""

    defines: tuple[tuple[str, str], ...] = ()     # preprocessor defines: NAME, VALUE
    parameters: tuple[tuple[str, str], ...] = ()  # the top module's parameters: NAME, VALUE
    args: tuple[str, ...] = ()                    # extra arguments in the backend's own syntax, as given
    includes: tuple[str, ...] = ()                # include folders, relative to the sources' folder
    headers: tuple[SourceFile, ...] = ()          # the files `include reaches (compiled only through it)


#: No defines, parameters, arguments or include folders.
NO_OPTIONS = BuildOptions()
#: Where a parse places the sources and headers (pyslang resolves `include against it; nothing is read).
_VIRTUAL_ROOT = PurePosixPath("/hwtp-sources")


@dataclass(frozen=True)
class Port:
    """A top-level port as the RTL declares it."""

    name: str
    direction: Direction
    width: int
    signed: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "direction": self.direction, "width": self.width, "signed": self.signed}


def _preprocessor(includes: Sequence[str], defines: Sequence[tuple[str, str]]) -> pyslang.Bag:
    options = pyslang.parsing.PreprocessorOptions()
    options.additionalIncludePaths = list(includes)
    options.predefines = [f"{name}={value}" for name, value in defines]
    return pyslang.Bag([options])


def parse(sources: Sequence[SourceFile], options: BuildOptions = NO_OPTIONS
          ) -> tuple[pyslang.SourceManager, list[Any]]:
    """Parse every source into a syntax tree sharing one source manager, with the include
    folders, headers and defines of ``options`` (names in messages are the sources' paths)."""
    manager = pyslang.SourceManager()
    for header in options.headers:
        manager.assignText(str(_VIRTUAL_ROOT / header.path), header.text)
    bag = _preprocessor([str(_VIRTUAL_ROOT / inc) for inc in options.includes], options.defines)
    trees = [pyslang.syntax.SyntaxTree.fromText(s.text, manager, s.path, str(_VIRTUAL_ROOT / s.path), bag)
             for s in sources]
    return manager, trees


def included_files(root: Path, sources: Sequence[SourceFile], includes: Sequence[str],
                   defines: Sequence[tuple[str, str]]) -> tuple[SourceFile, ...]:
    """The files the sources' `include directives reach (with ``defines`` set), read from under
    ``root``, as the preprocessor finds them: next to the including file, then in ``includes``
    (folders relative to ``root``). Raises :class:`DesignError` naming the directive's
    file:line for an include not found or outside ``root``."""
    manager = pyslang.SourceManager()
    bag = _preprocessor([str(root / inc) for inc in includes], defines)
    for src in sources:
        tree = pyslang.syntax.SyntaxTree.fromText(src.text, manager, src.path, str(root / src.path), bag)
        for diag in tree.diagnostics:
            if diag.isError() and "include" in str(diag.code).lower():
                loc = diag.location
                where = f"{manager.getFileName(loc)}:{manager.getLineNumber(loc)}"
                message = pyslang.DiagnosticEngine(manager).formatMessage(diag)
                raise DesignError(f"{where}: {message} (searched next to the file and in the include folders: "
                                  f"{', '.join(includes) or 'none'})")
    own = {(root / s.path).resolve() for s in sources}
    found: dict[str, SourceFile] = {}
    for buffer in manager.getAllBuffers():
        full = str(manager.getFullPath(buffer))
        if not full.startswith("/"):
            continue  # a macro expansion, not a file
        path = Path(full).resolve()
        if path in own:
            continue
        if not path.is_relative_to(root.resolve()):
            raise DesignError(f"{path}: an included file outside {root}; the sources and their headers "
                              f"must share one folder")
        rel = path.relative_to(root.resolve()).as_posix()
        found.setdefault(rel, SourceFile(rel, path.read_text(encoding="utf-8", errors="replace")))
    return tuple(found[k] for k in sorted(found))


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


def check_syntax(sources: Sequence[SourceFile], options: BuildOptions = NO_OPTIONS) -> None:
    """Raise :class:`DesignError` with file:line:col for the first syntax error."""
    manager, trees = parse(sources, options)
    for tree in trees:
        errors = _errors(manager, tree.diagnostics)
        if errors:
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise DesignError(f"{errors[0]}{more}")


def module_names(sources: Sequence[SourceFile], options: BuildOptions = NO_OPTIONS) -> list[str]:
    """Names of the modules the sources declare, in order."""
    check_syntax(sources, options)
    _manager, trees = parse(sources, options)
    names: list[str] = []
    for tree in trees:
        names.extend(m.header.name.valueText for m in module_declarations(tree))
    return names


def top_modules(sources: Sequence[SourceFile], options: BuildOptions = NO_OPTIONS) -> list[str]:
    """Modules that no other module instantiates (pyslang's top instances)."""
    check_syntax(sources, options)
    _manager, trees = parse(sources, options)
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


def compile_top(trees: Sequence[Any], top: str, options: BuildOptions = NO_OPTIONS) -> Any:
    """pyslang's compilation of ``trees`` with top module ``top`` and the parameters of ``options``."""
    compilation_options = pyslang.ast.CompilationOptions()
    compilation_options.topModules = {top}
    compilation_options.paramOverrides = [f"{name}={value}" for name, value in options.parameters]
    compilation = pyslang.ast.Compilation(pyslang.Bag([compilation_options]))
    for tree in trees:
        compilation.addSyntaxTree(tree)
    return compilation


def elaborate(sources: Sequence[SourceFile], top: str, options: BuildOptions = NO_OPTIONS) -> tuple[Port, ...]:
    """Elaborate ``top`` and return its ports, parameters as ``options`` sets them (else their defaults)."""
    check_syntax(sources, options)
    manager, trees = parse(sources, options)
    compilation = compile_top(trees, top, options)
    instances = [i for i in compilation.getRoot().topInstances if i.name == top]
    if not instances:
        declared = ", ".join(module_names(sources, options)) or "none"
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
