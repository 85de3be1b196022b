"""Operators on numbers: the ``constant`` family (integer literals) and the ``index`` family
(bit-select indices and constant part-select ranges)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from hwtp.mutators.base import CodeOperator, example
from hwtp.mutators.context import Expr, Selector, SiteContext
from hwtp.mutators.site import Site

_BASED = re.compile(
    r"(?P<size>\d[\d_]*)?\s*'(?P<signed>[sS]?)(?P<base>[bBoOdDhH])\s*(?P<digits>[0-9a-fA-F_]+)")
_DECIMAL = re.compile(r"\d[\d_]*")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_RADIX = {"b": (2, "b"), "o": (8, "o"), "d": (10, "d"), "h": (16, "x")}
_UNSIZED_BITS = 32


@dataclass(frozen=True)
class Literal:
    """An integer literal split into the parts a mutation keeps (size, signedness, base)."""

    prefix: str          # "4'd", "8'sh", "'b" or "" for a plain decimal
    base: str            # "b", "o", "d", "h" (lower case)
    digits: str          # digit text without underscores
    size: int | None
    value: int

    @classmethod
    def parse(cls, text: str) -> Literal | None:
        """The literal ``text``, or None when it has x/z digits or is not an integer."""
        text = text.strip()
        if _DECIMAL.fullmatch(text):
            digits = text.replace("_", "")
            return cls("", "d", digits, None, int(digits))
        match = _BASED.fullmatch(text)
        if match is None:
            return None
        size_text = match["size"]
        base = match["base"].lower()
        digits = match["digits"].replace("_", "")
        try:
            value = int(digits, _RADIX[base][0])
        except ValueError:
            return None
        size = int(size_text.replace("_", "")) if size_text else None
        prefix = f"{size_text or ''}'{match['signed']}{match['base']}"
        return cls(prefix, base, digits, size, value)

    @property
    def bits(self) -> int:
        return self.size if self.size is not None else _UNSIZED_BITS

    def format(self, value: int | None) -> str | None:
        """The same literal holding ``value``; None when the value does not fit its size."""
        if value is None or value < 0 or value >= 2 ** self.bits:
            return None
        digits = format(value, _RADIX[self.base][1])
        if any(ch.isupper() for ch in self.digits):
            digits = digits.upper()
        return self.prefix + digits.zfill(len(self.digits))


@dataclass(frozen=True)
class _ConstantRule:
    what: str
    description: str
    value: Callable[[Literal], int | None]
    before: str
    after: str


_CONSTANT_RULES = (
    _ConstantRule("plus_one", "an integer literal plus one (kept within its size)",
                  lambda lit: lit.value + 1, "assign y = a + 4'd5;", "assign y = a + 4'd6;"),
    _ConstantRule("minus_one", "an integer literal minus one (never below zero)",
                  lambda lit: lit.value - 1, "assign y = a + 4'd5;", "assign y = a + 4'd4;"),
    _ConstantRule("flip_lsb", "an integer literal with its lowest bit flipped",
                  lambda lit: lit.value ^ 1, "assign y = a & 4'b0110;",
                  "assign y = a & 4'b0111;"),
    _ConstantRule("zeros", "an integer literal replaced by zero", lambda lit: 0,
                  "assign y = a | 4'hc;", "assign y = a | 4'h0;"),
    _ConstantRule("ones", "a sized literal replaced by all ones",
                  lambda lit: None if lit.size is None else 2 ** lit.size - 1,
                  "assign y = a & 4'h3;", "assign y = a & 4'hf;"),
)


def _is_index(expr: Expr, parent: Expr | None) -> bool:
    """True for the whole index of a bit-select or base of an indexed part-select."""
    return parent is not None and any(sel.index is expr for sel in parent.selectors)


def literals(ctx: SiteContext) -> Iterator[tuple[Expr, bool]]:
    """(literal, is a width) for the literals the ``constant`` family may change: run-time
    ones, plus parameter values and declaration ranges if ``ctx.include_widths``."""
    for expr, parent, _root in ctx.walk():
        if expr.kind == "literal" and not _is_index(expr, parent):
            yield expr, False
    if ctx.include_widths:
        yield from ((expr, True) for expr in ctx.width_literals)


class ConstantOperator(CodeOperator):
    """``constant.*``: replace an integer literal by a nearby or extreme value."""

    def __init__(self, rule: _ConstantRule) -> None:
        self.rule = rule
        self.name = f"constant.{rule.what}"
        self.description = rule.description
        self.examples = (example(rule.before, rule.after),)

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        for expr, width in literals(ctx):
            if width and self.rule.what == "zeros":
                continue  # a zero width or parameter rarely elaborates
            lit = Literal.parse(ctx.source(expr.start, expr.end))
            new = lit.format(self.rule.value(lit)) if lit is not None else None
            if new is not None:
                yield ctx.site(self.name, (expr.start, expr.end), new, (expr.start, expr.end))


def _selects(ctx: SiteContext) -> Iterator[tuple[Expr, Selector]]:
    for expr, _parent, _root in ctx.walk():
        for selector in expr.selectors:
            yield expr, selector


class IndexStep(CodeOperator):
    """``index.plus_one`` / ``index.minus_one``: move a bit-select index (or the base of an
    indexed part-select) by one; the guard is the whole select."""

    def __init__(self, what: str, sign: str, before: str, after: str) -> None:
        self.name = f"index.{what}"
        self.sign = sign
        self.description = f"a bit-select index i becomes (i) {sign} 1"
        self.examples = (example(before, after),)

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        for expr, selector in _selects(ctx):
            index = selector.index
            if index is None or (self.sign == "-" and ctx.source(index.start, index.end) == "0"):
                continue
            yield ctx.site(self.name, (index.outer_start, index.outer_end),
                           f"({{orig}}) {self.sign} 1", (expr.start, expr.end))


def _shift_bound(text: str, step: int) -> str | None:
    if _DECIMAL.fullmatch(text):
        value = int(text.replace("_", "")) + step
        return str(value) if value >= 0 else None
    operand = text if _IDENTIFIER.fullmatch(text) else f"({text})"
    return f"{operand} {'+' if step > 0 else '-'} 1"


class RangeShift(CodeOperator):
    """``index.shift_range_up`` / ``index.shift_range_down``: a constant part-select
    ``a[3:0]`` becomes ``a[4:1]`` / ``a[2:-1]`` (bounds that would go negative are skipped)."""

    def __init__(self, what: str, step: int, before: str, after: str) -> None:
        self.name = f"index.{what}"
        self.step = step
        direction = "up" if step > 0 else "down"
        self.description = f"a constant part-select [m:l] shifted one bit {direction}"
        self.examples = (example(before, after),)

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        for expr, selector in _selects(ctx):
            if selector.bounds is None:
                continue
            left, right = selector.bounds
            new_left = _shift_bound(ctx.source(left.start, left.end), self.step)
            new_right = _shift_bound(ctx.source(right.start, right.end), self.step)
            if new_left is None or new_right is None:
                continue
            middle = ctx.source(left.end, right.start)
            yield ctx.site(self.name, (left.start, right.end), new_left + middle + new_right,
                           (expr.start, expr.end))


def value_operators() -> list[CodeOperator]:
    """The ``constant`` and ``index`` families."""
    ops: list[CodeOperator] = [ConstantOperator(rule) for rule in _CONSTANT_RULES]
    ops += [
        IndexStep("plus_one", "+", "assign y = {3'b0, a[c]};", "assign y = {3'b0, a[(c) + 1]};"),
        IndexStep("minus_one", "-", "assign y = {3'b0, a[c]};",
                  "assign y = {3'b0, a[(c) - 1]};"),
        RangeShift("shift_range_up", 1, "assign y = {a[2:0], c};", "assign y = {a[3:1], c};"),
        RangeShift("shift_range_down", -1, "assign y = {a[3:1], c};",
                   "assign y = {a[2:0], c};"),
    ]
    return ops
