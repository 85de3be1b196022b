"""Which source text the configured parameters elaborate (``not_elaborated`` mutants of ``hwtp ci``).

A mutant in a generate branch that the configuration never takes (``if (A > B)`` with ``A == B``),
in a loop generate with no iteration, or in a module no instance under the top reaches, changes
nothing the tests could ever see: it is no survivor. pyslang elaborates the top with the build's
parameters and defines; every generate block it creates says whether it was instantiated. A
byte offset of a file is *elaborated* when the innermost generate block around it was
instantiated at least once (in any instance of its module), or, outside every generate block,
when its module has at least one instance. Text in no module (a package, a compilation-unit
item) counts as elaborated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyslang

from hwtp.rtl.frontend import BuildOptions, SourceFile, compile_top, module_declarations, parse

Span = tuple[str, int, int]  # (file, start offset, end offset)


@dataclass(frozen=True)
class Elaboration:
    """The generate blocks and module declarations of the sources, and those elaborated."""

    blocks: frozenset[Span]
    live_blocks: frozenset[Span]
    modules: frozenset[Span]
    live_modules: frozenset[Span]

    def elaborated(self, file: str, offset: int) -> bool:
        """Whether the text at ``offset`` of ``file`` is part of the elaborated design."""
        block = _innermost(self.blocks, file, offset)
        if block is not None:
            return block in self.live_blocks
        module = _innermost(self.modules, file, offset)
        return module is None or module in self.live_modules


def _innermost(spans: frozenset[Span], file: str, offset: int) -> Span | None:
    around = [s for s in spans if s[0] == file and s[1] <= offset < s[2]]
    return min(around, key=lambda s: s[2] - s[1]) if around else None


def elaboration(sources: Sequence[SourceFile], top: str, options: BuildOptions) -> Elaboration:
    """Elaborate ``top`` with ``options`` (parameters, defines, includes) and record what it reached."""
    manager, trees = parse(sources, options)
    compilation = compile_top(trees, top, options)

    def span(syntax: object) -> Span | None:
        source_range = getattr(syntax, "sourceRange", None)
        if source_range is None:
            return None
        start = source_range.start
        return (str(manager.getFileName(start)), int(start.offset), int(source_range.end.offset))

    modules = {s for t in trees for m in module_declarations(t) if (s := span(m)) is not None}
    blocks: set[Span] = set()
    live_blocks: set[Span] = set()
    live_modules: set[Span] = set()

    def visit(symbol: object) -> bool:
        kind = getattr(symbol, "kind", None)
        if kind == pyslang.ast.SymbolKind.GenerateBlock:
            where = span(getattr(symbol, "syntax", None))
            if where is not None:
                blocks.add(where)
                if not symbol.isUninstantiated:  # type: ignore[attr-defined]
                    live_blocks.add(where)
        elif kind == pyslang.ast.SymbolKind.InstanceBody and not symbol.isUninstantiated:  # type: ignore[attr-defined]
            where = span(getattr(symbol.definition, "syntax", None))  # type: ignore[attr-defined]
            if where is not None:
                live_modules.add(where)
        return True

    compilation.getRoot().visit(visit)
    return Elaboration(frozenset(blocks), frozenset(live_blocks), frozenset(modules), frozenset(live_modules))
