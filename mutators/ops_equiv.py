"""The ``equivalent`` family: semantics-preserving rewrites (``Site.equivalent`` is True).

They build *equivalent trees*: a mutant that no stimulus can tell from golden.
"""

from __future__ import annotations

from collections.abc import Iterable

from hwtp.mutators.base import CodeOperator, example
from hwtp.mutators.context import PRIMARY_KINDS, Expr, SiteContext
from hwtp.mutators.ops_code import conditions
from hwtp.mutators.site import Site

_COMMUTATIVE = frozenset({"+", "*", "&", "|", "^", "==", "!="})
_DE_MORGAN = {"!": {"&&": "||", "||": "&&"}, "~": {"&": "|", "|": "&"}}


def _operand(ctx: SiteContext, expr: Expr) -> str:
    """The text of an operand, parenthesised unless it is primary or already wrapped."""
    text = ctx.source(expr.outer_start, expr.outer_end)
    if expr.outer_start == expr.start and expr.kind not in PRIMARY_KINDS:
        return f"({text})"
    return text


class Commute(CodeOperator):
    """``equivalent.commute``: ``a op b`` → ``b op a`` for commutative operators."""

    name = "equivalent.commute"
    description = "swap the operands of + * & | ^ == != (equivalent)"
    examples = (example("assign y = a + (b & a);", "assign y = (b & a) + a;"),
                example("assign y = a - b * c;", "assign y = a - c * b;"))

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        for expr, _parent, _root in ctx.walk():
            if expr.kind != "binary" or expr.op not in _COMMUTATIVE:
                continue
            left, right = expr.children
            new = f"{_operand(ctx, right)} {expr.op} {_operand(ctx, left)}"
            span = (expr.start, expr.end)
            yield ctx.site(self.name, span, new, span, equivalent=True)


class DeMorgan(CodeOperator):
    """``equivalent.de_morgan_*``: ``!(a && b)`` → ``(!a || !b)``, ``~(a & b)`` → ``(~a | ~b)``
    (and the dual forms)."""

    def __init__(self, what: str, negation: str, before: str, after: str) -> None:
        self.name = f"equivalent.de_morgan_{what}"
        self.negation = negation
        ops = " ".join(_DE_MORGAN[negation])
        self.description = f"De Morgan on {negation}(a op b), op in {ops} (equivalent)"
        self.examples = (example(before, after),)

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        swaps = _DE_MORGAN[self.negation]
        for expr, _parent, _root in ctx.walk():
            if expr.kind != "unary" or expr.op != self.negation:
                continue
            inner = expr.children[0]
            if inner.kind != "binary" or inner.op not in swaps:
                continue
            left, right = (self.negation + _operand(ctx, side) for side in inner.children)
            span = (expr.start, expr.end)
            yield ctx.site(self.name, span, f"({left} {swaps[inner.op]} {right})", span,
                           equivalent=True)


class DoubleNegation(CodeOperator):
    """``equivalent.double_not``: a condition ``x`` → ``!(!(x))``;
    ``equivalent.double_bitnot``: an assigned value ``x`` → ``~(~(x))``."""

    def __init__(self, what: str, negation: str, before: str, after: str) -> None:
        self.name = f"equivalent.{what}"
        self.negation = negation
        self.logical = negation == "!"
        where = "an if or ?: condition" if self.logical else "an assigned value"
        self.description = f"{negation}({negation}(x)) for {where} (equivalent)"
        self.examples = (example(before, after),)

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        if self.logical:
            targets: Iterable[Expr] = conditions(ctx)
        else:
            targets = (root.expr for root in ctx.roots
                       if root.role == "rhs" and root.expr.kind != "other")
        twice = f"{self.negation}({self.negation}({{orig}}))"
        for expr in targets:
            span = (expr.start, expr.end)
            yield ctx.site(self.name, span, twice, span, equivalent=True)


def equivalent_operators() -> list[CodeOperator]:
    """The ``equivalent`` family."""
    return [
        Commute(),
        DeMorgan("logical", "!", "assign y = !(c && d);", "assign y = (!c || !d);"),
        DeMorgan("bitwise", "~", "assign y = ~(a | b + 4'd1);", "assign y = (~a & ~(b + 4'd1));"),
        DoubleNegation("double_not", "!", "assign y = c ? a : b;", "assign y = !(!(c)) ? a : b;"),
        DoubleNegation("double_bitnot", "~", "assign y = a;", "assign y = ~(~(a));"),
    ]
