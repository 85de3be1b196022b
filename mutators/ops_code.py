"""Operators written as code: ``unary`` insertions, ``condition``, ``case``, ``assignment``
and ``edge``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from hwtp.mutators.base import CodeOperator, example
from hwtp.mutators.context import Expr, Root, SiteContext
from hwtp.mutators.site import Site

_BOOLEAN_OPS = frozenset({"&&", "||"})
_NUMERIC_OPS = frozenset({"+", "-", "*", "/", "%", "<", "<=", ">", ">="})
_OPERANDS = frozenset({"name", "select"})


def conditions(ctx: SiteContext) -> Iterator[Expr]:
    """Conditions of ``if`` statements and ``?:`` expressions."""
    for expr, parent, root in ctx.walk():
        if (parent is None and root.role == "if") or (
                parent is not None and parent.kind == "cond" and parent.children[0] is expr):
            yield expr


def _insertable(expr: Expr, parent: Expr | None, root: Root) -> str:
    """Which unary operator may be inserted before an operand: "!", "-", "~" or ""."""
    if expr.kind not in _OPERANDS:
        return ""
    if parent is None:
        return "" if root.role == "if" else "~"
    if parent.kind == "unary" or any(sel.index is expr for sel in parent.selectors):
        return ""
    if parent.kind == "binary" and parent.op in _BOOLEAN_OPS:
        return "!"
    if parent.kind == "cond" and parent.children[0] is expr:
        return ""
    if parent.kind == "binary" and parent.op in _NUMERIC_OPS:
        return "-"
    return "~"


class InsertUnary(CodeOperator):
    """``unary.insert_*``: put ``!`` before an operand of ``&&``/``||``, ``-`` before an
    operand of an arithmetic or ordering operator, ``~`` before other operands."""

    def __init__(self, what: str, token: str, where: str, before: str, after: str) -> None:
        self.name = f"unary.{what}"
        self.token = token
        self.description = f"insert {token} before {where}"
        self.examples = (example(before, after),)

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        for expr, parent, root in ctx.walk():
            if _insertable(expr, parent, root) == self.token:
                span = (expr.start, expr.end)
                yield ctx.site(self.name, span, self.token + "{orig}", span)


class ConditionOperator(CodeOperator):
    """``condition.*``: negate an ``if``/``?:`` condition or force it to a constant."""

    def __init__(self, what: str, replacement: str, description: str) -> None:
        self.name = f"condition.{what}"
        self.replacement = replacement
        self.description = description
        new = replacement.replace("{orig}", "c")
        self.examples = (
            example("always @* if (c) r = d; else r = 1'b0;",
                    f"always @* if ({new}) r = d; else r = 1'b0;"),
            example("assign y = c ? a : b;", f"assign y = {new} ? a : b;"),
        )

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        for expr in conditions(ctx):
            span = (expr.start, expr.end)
            yield ctx.site(self.name, span, self.replacement, span)


class DropCaseItem(CodeOperator):
    """``case.drop_item``: delete one labelled item of a case statement (not ``default``)."""

    name = "case.drop_item"
    description = "delete one labelled case item; its values fall to default (or do nothing)"
    examples = (example(
        "always @* case (a)\n  4'd0: r = c;\n  4'd1: r = d;\n  default: r = 1'b0;\nendcase",
        "always @* case (a)\n  \n  4'd1: r = d;\n  default: r = 1'b0;\nendcase"),)

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        for case in ctx.cases:
            if len(case.items) < 2:
                continue
            for item in case.items:
                if not item.default:
                    yield ctx.site(self.name, (item.start, item.end), "",
                                   (case.start, case.end), "stmt")


class SwapCaseBodies(CodeOperator):
    """``case.swap_bodies``: exchange the statements of two adjacent case items (one edit
    spanning both items; labels stay in place)."""

    name = "case.swap_bodies"
    description = "exchange the statements of two adjacent case items"
    examples = (example(
        "always @* case (a)\n  4'd0: r = c;\n  4'd1: r = d;\n  default: r = 1'b0;\nendcase",
        "always @* case (a)\n  4'd0: r = d;\n  4'd1: r = c;\n  default: r = 1'b0;\nendcase"),)

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        for case in ctx.cases:
            for first, second in zip(case.items, case.items[1:], strict=False):
                body_a = ctx.source(first.body.start, first.body.end)
                body_b = ctx.source(second.body.start, second.body.end)
                if body_a == body_b:
                    continue
                new = (ctx.source(first.start, first.body.start) + body_b
                       + ctx.source(first.body.end, second.body.start) + body_a)
                yield ctx.site(self.name, (first.start, second.end), new,
                               (case.start, case.end), "stmt")


class DeleteAssignment(CodeOperator):
    """``assignment.delete``: replace a procedural assignment by the empty statement."""

    name = "assignment.delete"
    description = "delete a procedural assignment (it becomes the empty statement ;)"
    examples = (example("always @(posedge clk) begin q <= a; r <= c; end",
                        "always @(posedge clk) begin ; r <= c; end"),)

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        for assign in ctx.assigns:
            span = (assign.start, assign.end)
            yield ctx.site(self.name, span, ";", span, "stmt")


class AssignmentKind(CodeOperator):
    """``assignment.*_to_*``: blocking ``=`` ↔ non-blocking ``<=`` (no ``<=`` in functions)."""

    def __init__(self, what: str, old: str, new: str, before: str, after: str) -> None:
        self.name = f"assignment.{what}"
        self.old = old
        self.new = new
        self.description = f"a procedural assignment with {old} uses {new} instead"
        self.examples = (example(before, after),)

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        for assign in ctx.assigns:
            if assign.op != self.old or (self.new == "<=" and assign.in_subroutine):
                continue
            yield ctx.site(self.name, (assign.op_start, assign.op_end), self.new,
                           (assign.start, assign.end), "stmt")


class EdgeFlip(CodeOperator):
    """``edge.*``: ``posedge`` ↔ ``negedge`` in an event control."""

    def __init__(self, what: str, old: str, new: str) -> None:
        self.name = f"edge.{what}"
        self.old = old
        self.new = new
        self.description = f"{old} sig becomes {new} sig in an event control"
        self.examples = (example(f"always @({old} clk) q <= a;", f"always @({new} clk) q <= a;"),)

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        for event in ctx.events:
            if event.edge == self.old:
                yield ctx.site(self.name, (event.edge_start, event.edge_end), self.new,
                               (event.start, event.end), "edge")


def code_operators() -> list[CodeOperator]:
    """The ``unary`` insertions and the ``condition``, ``case``, ``assignment``, ``edge``
    families."""
    return [
        InsertUnary("insert_not", "!", "an operand of && or ||",
                    "assign y = c && d;", "assign y = !c && d;"),
        InsertUnary("insert_neg", "-", "an operand of an arithmetic or ordering operator",
                    "assign y = a + b;", "assign y = -a + b;"),
        InsertUnary("insert_bitnot", "~", "any other operand",
                    "assign y = a & b;", "assign y = ~a & b;"),
        ConditionOperator("negate", "!({orig})", "negate an if or ?: condition"),
        ConditionOperator("force_true", "1'b1", "an if or ?: condition becomes always true"),
        ConditionOperator("force_false", "1'b0", "an if or ?: condition becomes always false"),
        DropCaseItem(),
        SwapCaseBodies(),
        DeleteAssignment(),
        AssignmentKind("blocking_to_nonblocking", "=", "<=",
                       "always @(posedge clk) q = a;", "always @(posedge clk) q <= a;"),
        AssignmentKind("nonblocking_to_blocking", "<=", "=",
                       "always @(posedge clk) q <= a;", "always @(posedge clk) q = a;"),
        EdgeFlip("pos_to_neg", "posedge", "negedge"),
        EdgeFlip("neg_to_pos", "negedge", "posedge"),
    ]
