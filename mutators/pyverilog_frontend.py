"""The alternative frontend for plain Verilog-2001: site discovery with pyverilog.

Selected with ``hwtp mutate --frontend pyverilog`` (``MutationConfig(frontend="pyverilog")``);
pyverilog is an optional extra (``pip install 'hwtp[pyverilog]'``), imported on first use.

:func:`find_sites_pyverilog` builds the same :class:`~hwtp.mutators.context.SiteContext` as
the pyslang frontend, from pyverilog's AST, so every operator runs unchanged and the two
frontends give identical sites wherever both understand the source. pyverilog keeps only
line numbers; :mod:`hwtp.mutators.pv_match` recovers byte spans by matching the AST against
the source's tokens (comments and strings skipped).

Supported: every family (``arithmetic``, ``relational``, ``logical``, ``bitwise``,
``reduction``, ``shift``, ``unary``, ``constant``, ``condition``, ``case``, ``assignment``,
``edge``, ``index``, ``equivalent``) on what pyverilog parses: continuous assignments, net
declaration assignments, ``always``/``initial`` blocks, functions, tasks and generate blocks.
Not supported: ``include_widths`` (pyverilog's line numbers cannot place width literals
reliably), hierarchical names, ``^~`` (pyverilog reads it as ``^ ~``), delays inside
assignments, and statements other than assignments, ``if``, ``case``, blocks, loops, delays
and task calls; such sources raise :class:`~hwtp.errors.MutantError`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import tempfile
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

from hwtp import env
from hwtp.errors import ConfigError, DesignError, MutantError
from hwtp.mutators.context import Assign, Case, CaseItem, Event, Root, SiteContext, Span
from hwtp.mutators.operators import select
from hwtp.mutators.pv_match import Matcher, MatchError
from hwtp.mutators.site import Site
from hwtp.mutators.sites import OperatorSpec, collect_sites
from hwtp.rtl.frontend import NO_OPTIONS, BuildOptions

Node = Any  # pyverilog AST nodes

_NETS = ("Wire", "Tri", "Supply")
_CASES = {"CaseStatement": "case", "CasezStatement": "casez", "CasexStatement": "casex"}
MISSING = "the pyverilog front end needs pyverilog, an optional extra: pip install 'hwtp[pyverilog]'"


def find_sites_pyverilog(text: str, path: str, operators: OperatorSpec = None,
                         include_widths: bool = False, options: BuildOptions = NO_OPTIONS) -> list[Site]:
    """Like :func:`hwtp.mutators.sites.find_sites`, with pyverilog as the parser.

    Raises :class:`DesignError` when pyverilog cannot parse ``text`` and
    :class:`MutantError` for ``include_widths``, include folders or defines (``options``), or a
    construct this frontend cannot map.
    """
    if include_widths:
        raise MutantError("the pyverilog frontend does not support include_widths; "
                          "use hwtp.mutators.sites.find_sites")
    if options.includes or options.headers or options.defines:
        raise MutantError("the pyverilog frontend does not take include folders or defines; "
                          "use the pyslang frontend")
    chosen = select(operators)
    ast = parse(text, path)
    ctx = SiteContext(text, path, tree=ast)
    try:
        _Indexer(ctx).source(ast)
    except (MatchError, IndexError) as exc:
        raise MutantError(f"{path}: the pyverilog frontend cannot map this source: {exc}") \
            from exc
    return collect_sites(ctx, chosen)


def parse(text: str, path: str) -> Node:
    """pyverilog's AST of ``text``; :class:`DesignError` when it does not parse."""
    parser = _parser()
    parser.lexer.reset_lineno()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return parser.parse(text)
    except Exception as exc:  # pyverilog raises ParseError and plain errors alike
        raise DesignError(f"{path}: pyverilog cannot parse this source: {exc}") from exc


@functools.cache
def _parser() -> Any:
    """One pyverilog parser per process; its LALR tables are cached in the hwtp cache.

    pyverilog (and its ply) are imported here: they are an optional extra, needed only when
    this front end is used. :class:`ConfigError` when they are not installed.
    """
    try:
        with warnings.catch_warnings():  # pyverilog's __init__ leaves its VERSION file open
            warnings.simplefilter("ignore", ResourceWarning)
            from ply.yacc import NullLogger, yacc
            from pyverilog.vparser.lexer import VerilogLexer
            from pyverilog.vparser.parser import VerilogParser
    except ImportError as exc:
        raise ConfigError(MISSING) from exc

    class QuietParser(VerilogParser):
        """VerilogParser that writes no parser.out/parsetab.py into the working folder."""

        def __init__(self, tables: Path) -> None:
            self.lexer = VerilogLexer(error_func=self._lexer_error_func)
            self.lexer.build()
            self.tokens = self.lexer.tokens
            self.parser = _yacc(yacc, self, tables, NullLogger())

    tables = env.cache_dir() / "pyverilog" / f"parsetab-{version('pyverilog')}.pickle"
    return QuietParser(tables)


def _yacc(yacc: Any, module: Any, tables: Path, log: Any) -> Any:
    """Load the tables from ``tables`` or build them and store them there atomically."""
    options = {"module": module, "method": "LALR", "debug": False, "errorlog": log}
    if tables.exists():
        with warnings.catch_warnings(), contextlib.suppress(Exception):
            warnings.simplefilter("ignore", ResourceWarning)  # ply leaks a truncated file
            return yacc(picklefile=str(tables), write_tables=False, **options)
    try:
        tables.parent.mkdir(parents=True, exist_ok=True)
        fd, scratch = tempfile.mkstemp(dir=tables.parent, suffix=".pickle")
        os.close(fd)
        os.unlink(scratch)
    except OSError:  # no writable cache: build in memory
        return yacc(write_tables=False, **options)
    parser = yacc(picklefile=scratch, **options)
    with contextlib.suppress(OSError):
        os.replace(scratch, tables)
    return parser


def _kind(node: Node) -> str:
    return type(node).__name__


class _Indexer:
    """Fills a :class:`SiteContext` from pyverilog's AST, with spans from the tokens."""

    def __init__(self, ctx: SiteContext) -> None:
        self.ctx = ctx
        self.m = Matcher(ctx.data)
        self.cursor = 0

    def source(self, ast: Node) -> None:
        for module in ast.description.definitions:
            if _kind(module) == "ModuleDef":
                self.items(module.items)

    # -- module items (anchored by keyword and line) --------------------------------------
    def anchor(self, node: Node, text: str) -> int:
        return self.m.find(max(self.cursor, self.m.line_start(node.lineno)), text)

    def items(self, items: Any) -> None:
        for item in items or ():
            kind = _kind(item)
            if kind == "Assign":
                self.continuous(item, self.m.expect(self.anchor(item, "assign"), "assign"))
            elif kind == "Decl":
                self.declaration(item)
            elif kind in ("Always", "Initial"):
                self.procedural(item, kind.lower())
            elif kind in ("Function", "Task"):
                self.subroutine(item, kind.lower())
            elif kind == "GenerateStatement":
                self.items(item.items)
            elif kind in ("ForStatement", "IfStatement", "Block"):
                self.items(_generate_items(item))

    def continuous(self, node: Node, i: int) -> None:
        j, _lhs = self.m.first(node.left, i, ("=",))
        k, rhs = self.m.first(node.right, j + 1, (";", ","))
        self.ctx.roots.append(Root(rhs, "rhs"))
        self.cursor = k + 1

    def declaration(self, node: Node) -> None:
        parts = list(node.list)
        if not parts or _kind(parts[0]) not in _NETS:
            return  # a variable's initial value is not a run-time expression
        for part in parts:
            if _kind(part) == "Assign":
                name = part.left.var.name
                i = self.anchor(part, name)
                while self.m.text(i + 1) != "=":
                    i = self.m.find(i + 1, name)
                self.continuous(part, i)

    def procedural(self, node: Node, keyword: str) -> None:
        i = self.m.expect(self.anchor(node, keyword), keyword)
        if keyword == "always":
            i = self.senslist(node.sens_list, self.m.expect(i, "@"))
        self.cursor = self.statement(node.statement, i, False)

    def senslist(self, node: Node, i: int) -> int:
        if self.m.text(i) == "*":
            return i + 1
        i = self.m.expect(i, "(")
        if self.m.text(i) == "*":
            return self.m.expect(i + 1, ")")
        for n, sens in enumerate(node.list):
            if n:
                i = self.m.expect(i, "or", ",")
            start = self.m.tokens[i]
            if sens.type in ("posedge", "negedge"):
                i = self.m.expect(i, sens.type)
            i, sig = self.m.first(sens.sig, i, ("or", ",", ")"))
            if sens.type in ("posedge", "negedge"):
                self.ctx.events.append(Event(start.start, sig.outer_end, sens.type, start.start,
                                             start.end))
        return self.m.expect(i, ")")

    def subroutine(self, node: Node, keyword: str) -> None:
        i = self.m.expect(self.anchor(node, keyword), keyword)
        i = self.m.find(i, ";") + 1
        for item in node.statement or ():
            i = self.item(item, i, True)
        self.cursor = self.m.expect(i, "end" + keyword)

    # -- statements (matched token by token) ----------------------------------------------
    def statement(self, node: Node, i: int, sub: bool) -> int:
        """Match one statement from token ``i``; return the index after it."""
        kind = _kind(node)
        if kind in ("BlockingSubstitution", "NonblockingSubstitution"):
            return self.assignment(node, i, sub, "=" if kind[0] == "B" else "<=")
        if kind == "IfStatement":
            return self.conditional(node, i, sub)
        if kind in _CASES:
            return self.case(node, i, sub, _CASES[kind])
        if kind in ("Block", "ParallelBlock"):
            return self.block(node, i, sub)
        if kind == "ForStatement":
            i = self.m.expect(self.m.expect(i, "for"), "(")
            i = self.m.expect(self.substitution(node.pre, i), ";")
            i, _cond = self.m.first(node.cond, i, (";",))
            i = self.m.expect(self.substitution(node.post, i + 1), ")")
            return self.statement(node.statement, i, sub)
        if kind == "WhileStatement":
            i = self.m.expect(self.m.expect(i, "while"), "(")
            i, _cond = self.m.first(node.cond, i, (")",))
            return self.statement(node.statement, i + 1, sub)
        if kind == "ForeverStatement":
            return self.statement(node.statement, self.m.expect(i, "forever"), sub)
        if kind == "EventStatement" and node.lineno == 0:  # pyverilog's null statement
            return self.m.expect(i, ";")
        if kind == "SingleStatement":
            return self.single(node.statement, i)
        raise MatchError(f"line {node.lineno}: unsupported statement {kind}")

    def substitution(self, node: Node, i: int) -> int:
        j, _lhs = self.m.first(node.left, i, ("=",))
        k, _rhs = self.m.first(node.right, j + 1, (";", ")"))
        return k

    def single(self, node: Node, i: int) -> int:
        kind = _kind(node)
        if kind == "DelayStatement":
            i, _delay = self.m.first(node.delay, self.m.expect(i, "#"), (";",))
        elif kind in ("SystemCall", "TaskCall"):
            i = self.m.find(i, ";")
        else:
            raise MatchError(f"line {node.lineno}: unsupported statement {kind}")
        return self.m.expect(i, ";")

    def assignment(self, node: Node, i: int, sub: bool, op: str) -> int:
        if node.ldelay is not None or node.rdelay is not None:
            raise MatchError(f"line {node.lineno}: delays in assignments are not mapped")
        j, _lhs = self.m.first(node.left, i, (op,))
        k, rhs = self.m.first(node.right, j + 1, (";",))
        tok = self.m.tokens
        self.ctx.assigns.append(Assign(tok[i].start, tok[k].end, op, tok[j].start, tok[j].end,
                                       sub))
        self.ctx.roots.append(Root(rhs, "rhs", sub))
        return k + 1

    def conditional(self, node: Node, i: int, sub: bool) -> int:
        i = self.m.expect(self.m.expect(i, "if"), "(")
        i, cond = self.m.first(node.cond, i, (")",))
        self.ctx.roots.append(Root(cond, "if", sub))
        i = self.statement(node.true_statement, i + 1, sub)
        if node.false_statement is not None:
            i = self.statement(node.false_statement, self.m.expect(i, "else"), sub)
        return i

    def case(self, node: Node, i: int, sub: bool, keyword: str) -> int:
        start = self.m.tokens[i].start
        i = self.m.expect(self.m.expect(i, keyword), "(")
        i, selector = self.m.first(node.comp, i, (")",))
        self.ctx.roots.append(Root(selector, "case", sub))
        i += 1
        items = []
        for item in node.caselist:
            item_start = self.m.tokens[i].start
            if item.cond is None:
                i = self.m.expect(i, "default")
                if self.m.text(i) == ":":
                    i += 1
            else:
                for n, label in enumerate(item.cond):
                    i, _label = self.m.first(label, i, (",", ":"))
                    i = self.m.expect(i, ":" if n == len(item.cond) - 1 else ",")
            body_start = self.m.tokens[i].start
            i = self.statement(item.statement, i, sub)
            end = self.m.tokens[i - 1].end
            items.append(CaseItem(item_start, end, Span(body_start, end), item.cond is None))
        i = self.m.expect(i, "endcase")
        self.ctx.cases.append(Case(start, self.m.tokens[i - 1].end, tuple(items)))
        return i

    def block(self, node: Node, i: int, sub: bool) -> int:
        opener, closer = ("begin", "end") if _kind(node) == "Block" else ("fork", "join")
        i = self.m.expect(i, opener)
        if node.scope is not None:
            i = self.m.expect(self.m.expect(i, ":"), node.scope)
        for item in node.statements or ():
            i = self.item(item, i, sub)
        return self.m.expect(i, closer)

    def item(self, node: Node, i: int, sub: bool) -> int:
        """A statement, or a local declaration (skipped up to its ``;``)."""
        if _kind(node) == "Decl":
            return self.m.find(i, ";") + 1
        return self.statement(node, i, sub)


def _generate_items(node: Node) -> list[Node]:
    """The module items inside a generate loop, conditional or block."""
    kind = _kind(node)
    if kind == "ForStatement":
        return [node.statement]
    if kind == "IfStatement":
        return [s for s in (node.true_statement, node.false_statement) if s is not None]
    return list(node.statements or ())
