"""The neutral view of one source file that operators read: :class:`SiteContext`.

A frontend (pyslang in :mod:`hwtp.mutators.sites`, pyverilog in
:mod:`hwtp.mutators.pyverilog_frontend`) parses the text and records only the places that may
be mutated, with exact byte spans:

- ``roots``: expressions whose value is computed at run time (right-hand sides of continuous
  and procedural assignments, ``if`` conditions, ``case`` selectors). Constant contexts
  (parameters, declaration ranges, replication counts, case labels, loop headers) and left-hand
  sides never appear here, so every :class:`Expr` reachable from a root is a legal place for an
  ``expr`` guard.
- ``assigns``, ``cases``: procedural statements (inside ``always``/``initial`` blocks and
  subroutine bodies) that a ``stmt`` guard may wrap.
- ``events``: ``posedge``/``negedge`` event expressions of timing controls.
- ``anchors``: for each root, where code that evaluates it may go (the statement that
  evaluates it, or the continuous assignment that holds it) and the target it is assigned to;
  only the pyslang frontend records them (for activation probes, :mod:`hwtp.mutators.probes`).
- ``width_literals``: integer literals in parameter values and declaration ranges, used only
  when ``include_widths`` is set (sites there are for standalone mutants: no schemata can
  guard a width).

Operators turn these records into :class:`Site` objects through :meth:`SiteContext.site`,
which fills in the original text, the line and column, and keeps token edits from fusing with
their neighbours.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from hwtp.mutators.site import GuardKind, Site

ExprKind = Literal[
    "binary", "unary", "cond", "name", "select", "literal", "concat", "repeat", "call", "other"
]
RootRole = Literal["rhs", "if", "case"]
SelectorKind = Literal["bit", "range", "indexed"]

#: Expression kinds that bind tighter than any binary operator (no parentheses needed).
PRIMARY_KINDS = frozenset({"name", "select", "literal", "concat", "repeat", "call"})

_OPERATOR_CHARS = frozenset("+-*/%<>=!~&|^?:@#")
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$'`")


@dataclass(frozen=True)
class Span:
    """A byte span ``[start, end)`` of the source."""

    start: int
    end: int


@dataclass(frozen=True)
class Selector:
    """One ``[...]`` of a select: a bit index, a constant range, or an indexed part-select.

    ``index`` is the bit index (``bit``) or the base (``indexed``); ``bounds`` are the two
    constant bounds of a ``range`` (never mutated except by the ``index`` family).
    """

    kind: SelectorKind
    index: Expr | None = None
    bounds: tuple[Span, Span] | None = None


@dataclass(frozen=True)
class Expr:
    """A run-time expression. ``start``/``end`` exclude the parentheses that wrap exactly
    this expression; ``outer_start``/``outer_end`` include them."""

    kind: ExprKind
    start: int
    end: int
    outer_start: int
    outer_end: int
    op: str = ""            # operator text of a binary/unary expression
    op_start: int = -1
    op_end: int = -1
    children: tuple[Expr, ...] = ()
    selectors: tuple[Selector, ...] = ()

    def wrapped(self, start: int, end: int) -> Expr:
        """This expression seen through one more pair of parentheses spanning ``[start, end)``."""
        return Expr(self.kind, self.start, self.end, start, end, self.op, self.op_start,
                    self.op_end, self.children, self.selectors)


@dataclass(frozen=True)
class Root:
    """A run-time expression tree and where it sits."""

    expr: Expr
    role: RootRole
    in_subroutine: bool = False


@dataclass(frozen=True)
class Anchor:
    """Where a root is evaluated. ``statement`` is the procedural statement that evaluates
    ``root`` (an assignment, an ``if``, a ``case``), or for a continuous root the module item
    that holds it (``continuous``); ``lhs`` is the target of an ``rhs`` root. ``scoped``: the
    item sits in a generate block of its own (a bare generate-if/case/loop item has none)."""

    root: Span
    role: RootRole
    statement: Span
    continuous: bool
    lhs: Span | None = None
    in_subroutine: bool = False
    scoped: bool = True


@dataclass(frozen=True)
class Assign:
    """A procedural ``=`` or ``<=`` assignment statement (``end`` includes the ``;``)."""

    start: int
    end: int
    op: str
    op_start: int
    op_end: int
    in_subroutine: bool = False


@dataclass(frozen=True)
class CaseItem:
    """One item of a case statement; ``body`` is its statement (the item ends with it)."""

    start: int
    end: int
    body: Span
    default: bool


@dataclass(frozen=True)
class Case:
    """A procedural case statement (``end`` is past ``endcase``)."""

    start: int
    end: int
    items: tuple[CaseItem, ...]


@dataclass(frozen=True)
class Event:
    """An edge event ``posedge sig``: ``edge`` is the keyword's span and text."""

    start: int
    end: int
    edge: str
    edge_start: int
    edge_end: int


@dataclass
class SiteContext:
    """Everything an operator may mutate in one source file (see the module docstring)."""

    text: str
    file: str
    include_widths: bool = False
    tree: Any = None                         # the frontend's own tree, for plug-in operators
    roots: list[Root] = field(default_factory=list)
    assigns: list[Assign] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    anchors: list[Anchor] = field(default_factory=list)
    width_literals: list[Expr] = field(default_factory=list)
    data: bytes = field(init=False, repr=False)          # the UTF-8 text spans index into
    _line_starts: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.data = self.text.encode()
        self._line_starts = [0] + [i + 1 for i, b in enumerate(self.data) if b == 0x0A]

    def source(self, start: int, end: int) -> str:
        """The source text of a byte span."""
        return self.data[start:end].decode()

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column in bytes) of a byte offset."""
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def walk(self) -> Iterator[tuple[Expr, Expr | None, Root]]:
        """Every run-time expression as (expression, parent or None, root), parents first."""
        for root in self.roots:
            stack: list[tuple[Expr, Expr | None]] = [(root.expr, None)]
            while stack:
                expr, parent = stack.pop()
                yield expr, parent, root
                stack.extend((child, expr) for child in reversed(expr.children))

    def site(self, operator: str, edit: tuple[int, int], replacement: str,
             guard: tuple[int, int], kind: GuardKind = "expr", equivalent: bool = False) -> Site:
        """A :class:`Site` replacing ``edit`` by ``replacement``, guarded over ``guard``."""
        start, end = edit
        if not guard[0] <= start <= end <= guard[1]:
            raise ValueError(f"{operator}: guard span {guard} does not contain edit {edit}")
        line, col = self.position(start)
        return Site(file=self.file, start=start, end=end, operator=operator,
                    original=self.source(start, end),
                    replacement=self._separated(start, end, replacement),
                    guard_start=guard[0], guard_end=guard[1], guard=kind, line=line, col=col,
                    equivalent=equivalent)

    def _separated(self, start: int, end: int, replacement: str) -> str:
        """Pad ``replacement`` with a space where it would fuse with a neighbouring token
        (``a - b`` → ``a --b`` would lex as a decrement)."""
        before = chr(self.data[start - 1]) if start > 0 else " "
        after = chr(self.data[end]) if end < len(self.data) else " "
        head = replacement[:1] or after
        tail = replacement[-1:] or before
        if _fuses(before, head):
            replacement = " " + replacement
        if replacement and _fuses(tail, after):
            replacement += " "
        return replacement


def _fuses(left: str, right: str) -> bool:
    return (left in _OPERATOR_CHARS and right in _OPERATOR_CHARS) or (
        left in _WORD_CHARS and right in _WORD_CHARS)
