"""Site discovery: :func:`find_sites` with pyslang, and the choice of front end.

:mod:`hwtp.mutators.slang_index` turns pyslang's syntax tree into a
:class:`~hwtp.mutators.context.SiteContext` (exact byte spans, constant contexts and
left-hand sides left out); the selected operators turn that into sites. The pyverilog
frontend (:mod:`hwtp.mutators.pyverilog_frontend`, ``hwtp mutate --frontend pyverilog``)
shares :func:`collect_sites`; :func:`site_finder` picks one by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pyslang

from hwtp.errors import ConfigError, DesignError
from hwtp.mutators.base import Operator
from hwtp.mutators.context import SiteContext
from hwtp.mutators.operators import select
from hwtp.mutators.site import Site
from hwtp.mutators.slang_index import index_tree
from hwtp.rtl.frontend import NO_OPTIONS, BuildOptions, SourceFile, parse

OperatorSpec = Iterable[str | Operator] | None
SiteFinder = Callable[..., list[Site]]  # (text, path, operators=..., include_widths=..., options=...) -> sites

#: The front ends ``hwtp mutate --frontend`` accepts; the first is the default.
FRONTENDS = ("pyslang", "pyverilog")


def find_sites(text: str, path: str, operators: OperatorSpec = None,
               include_widths: bool = False, options: BuildOptions = NO_OPTIONS) -> list[Site]:
    """Every site of ``operators`` (names, families or operator objects; default all) in
    the Verilog ``text`` of file ``path``, sorted by (start, operator, replacement).

    Constant contexts (parameters, declaration ranges, replication counts, case labels, loop
    headers) and left-hand sides are never mutated; ``include_widths`` lets the ``constant``
    family change literals in parameter values and declaration ranges (standalone mutants
    only: a schemata build cannot guard a width). The text is preprocessed with the include
    folders, headers and defines of ``options`` (the build's); text from macros and included
    files is not mutated. Raises :class:`DesignError` when the text does not parse.
    """
    chosen = select(operators)
    _manager, (tree,) = parse([SourceFile(path, text)], options)
    errors = [d for d in tree.diagnostics if d.isError()]
    if errors:
        raise DesignError(f"{path}: {len(errors)} syntax error(s); first: "
                          f"{_describe(tree, errors[0])}")
    ctx = SiteContext(text, path, include_widths=include_widths, tree=tree)
    index_tree(ctx, tree)
    return collect_sites(ctx, chosen)


def _describe(tree: pyslang.syntax.SyntaxTree, diag: pyslang.Diagnostic) -> str:
    manager = tree.sourceManager
    loc = diag.location
    engine = pyslang.DiagnosticEngine(manager)
    return (f"line {manager.getLineNumber(loc)} col {manager.getColumnNumber(loc)}: "
            f"{engine.formatMessage(diag)}")


def collect_sites(ctx: SiteContext, operators: Iterable[Operator]) -> list[Site]:
    """Run ``operators`` on ``ctx``: drop no-op sites and repeats of an earlier operator's
    site (same span, same standalone text), sort by (start, operator, replacement)."""
    sites: list[Site] = []
    seen: set[tuple[int, int, str]] = set()
    for op in operators:
        for site in op.sites(ctx):
            key = (site.start, site.end, site.standalone)
            if site.standalone == site.original or key in seen:
                continue
            seen.add(key)
            sites.append(site)
    return sorted(sites, key=lambda s: (s.start, s.operator, s.replacement))


def site_finder(frontend: str) -> SiteFinder:
    """The site finder of ``frontend`` (one of :data:`FRONTENDS`): both take the same
    arguments and give the same sites wherever both parse the source."""
    if frontend == "pyslang":
        return find_sites
    if frontend == "pyverilog":
        # imported on use: pyverilog_frontend imports this module (collect_sites)
        from hwtp.mutators.pyverilog_frontend import find_sites_pyverilog

        return find_sites_pyverilog
    raise ConfigError(f"unknown front end {frontend!r} (valid: {', '.join(FRONTENDS)})")
