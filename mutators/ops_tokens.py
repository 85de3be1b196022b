"""Table-driven operators: swap (or remove) one operator token.

Each row of :data:`TOKEN_TABLE` is data: (family, name, position, from-token, to-token,
description, example). ``position`` says whether the token is a binary operator or a prefix
unary one (``-`` and ``&`` are both). The edit span is the token; the guard span is the whole
binary/unary expression. An empty to-token removes a prefix operator.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from hwtp.mutators.base import Example, example
from hwtp.mutators.context import SiteContext
from hwtp.mutators.site import Site

Position = Literal["binary", "unary"]

#: Spellings of one token that mean the same operator.
TOKEN_ALIASES = {"^~": "~^"}


def _row(family: str, what: str, position: Position, old: str, new: str, description: str,
         before: str, after: str) -> tuple[str, str, Position, str, str, str, Example]:
    return family, what, position, old, new, description, example(before, after)


TOKEN_TABLE = (
    _row("arithmetic", "add_to_sub", "binary", "+", "-", "a + b becomes a - b",
         "assign y = a + b;", "assign y = a - b;"),
    _row("arithmetic", "sub_to_add", "binary", "-", "+", "a - b becomes a + b",
         "assign y = a - b;", "assign y = a + b;"),
    _row("arithmetic", "mul_to_add", "binary", "*", "+", "a * b becomes a + b",
         "assign y = a * b;", "assign y = a + b;"),
    _row("arithmetic", "div_to_mul", "binary", "/", "*", "a / b becomes a * b",
         "assign y = a / b;", "assign y = a * b;"),
    _row("arithmetic", "mod_to_div", "binary", "%", "/", "a % b becomes a / b",
         "assign y = a % b;", "assign y = a / b;"),
    _row("relational", "lt_to_le", "binary", "<", "<=", "a < b becomes a <= b (off by one)",
         "assign y = a < b;", "assign y = a <= b;"),
    _row("relational", "le_to_lt", "binary", "<=", "<", "a <= b becomes a < b (off by one)",
         "assign y = a <= b;", "assign y = a < b;"),
    _row("relational", "gt_to_ge", "binary", ">", ">=", "a > b becomes a >= b (off by one)",
         "assign y = a > b;", "assign y = a >= b;"),
    _row("relational", "ge_to_gt", "binary", ">=", ">", "a >= b becomes a > b (off by one)",
         "assign y = a >= b;", "assign y = a > b;"),
    _row("relational", "lt_to_ge", "binary", "<", ">=", "a < b becomes its negation a >= b",
         "assign y = a < b;", "assign y = a >= b;"),
    _row("relational", "le_to_gt", "binary", "<=", ">", "a <= b becomes its negation a > b",
         "assign y = a <= b;", "assign y = a > b;"),
    _row("relational", "gt_to_le", "binary", ">", "<=", "a > b becomes its negation a <= b",
         "assign y = a > b;", "assign y = a <= b;"),
    _row("relational", "ge_to_lt", "binary", ">=", "<", "a >= b becomes its negation a < b",
         "assign y = a >= b;", "assign y = a < b;"),
    _row("relational", "eq_to_ne", "binary", "==", "!=", "a == b becomes a != b",
         "assign y = a == b;", "assign y = a != b;"),
    _row("relational", "ne_to_eq", "binary", "!=", "==", "a != b becomes a == b",
         "assign y = a != b;", "assign y = a == b;"),
    _row("relational", "ceq_to_cne", "binary", "===", "!==", "a === b becomes a !== b",
         "assign y = a === b;", "assign y = a !== b;"),
    _row("relational", "cne_to_ceq", "binary", "!==", "===", "a !== b becomes a === b",
         "assign y = a !== b;", "assign y = a === b;"),
    _row("logical", "and_to_or", "binary", "&&", "||", "c && d becomes c || d",
         "assign y = c && d;", "assign y = c || d;"),
    _row("logical", "or_to_and", "binary", "||", "&&", "c || d becomes c && d",
         "assign y = c || d;", "assign y = c && d;"),
    _row("logical", "remove_not", "unary", "!", "", "!c becomes c",
         "assign y = !c;", "assign y = c;"),
    _row("bitwise", "and_to_or", "binary", "&", "|", "a & b becomes a | b",
         "assign y = a & b;", "assign y = a | b;"),
    _row("bitwise", "and_to_xor", "binary", "&", "^", "a & b becomes a ^ b",
         "assign y = a & b;", "assign y = a ^ b;"),
    _row("bitwise", "or_to_and", "binary", "|", "&", "a | b becomes a & b",
         "assign y = a | b;", "assign y = a & b;"),
    _row("bitwise", "or_to_xor", "binary", "|", "^", "a | b becomes a ^ b",
         "assign y = a | b;", "assign y = a ^ b;"),
    _row("bitwise", "xor_to_and", "binary", "^", "&", "a ^ b becomes a & b",
         "assign y = a ^ b;", "assign y = a & b;"),
    _row("bitwise", "xor_to_or", "binary", "^", "|", "a ^ b becomes a | b",
         "assign y = a ^ b;", "assign y = a | b;"),
    _row("bitwise", "remove_not", "unary", "~", "", "~a becomes a",
         "assign y = ~a;", "assign y = a;"),
    _row("reduction", "and_to_or", "unary", "&", "|", "&a (all ones) becomes |a (any one)",
         "assign y = &a;", "assign y = |a;"),
    _row("reduction", "or_to_and", "unary", "|", "&", "|a (any one) becomes &a (all ones)",
         "assign y = |a;", "assign y = &a;"),
    _row("reduction", "xor_to_xnor", "unary", "^", "~^", "^a (odd parity) becomes ~^a",
         "assign y = ^a;", "assign y = ~^a;"),
    _row("reduction", "xnor_to_xor", "unary", "~^", "^", "~^a (even parity) becomes ^a",
         "assign y = ~^a;", "assign y = ^a;"),
    _row("reduction", "nand_to_and", "unary", "~&", "&", "~&a becomes &a",
         "assign y = ~&a;", "assign y = &a;"),
    _row("reduction", "nor_to_or", "unary", "~|", "|", "~|a becomes |a",
         "assign y = ~|a;", "assign y = |a;"),
    _row("shift", "shl_to_shr", "binary", "<<", ">>", "a << b becomes a >> b",
         "assign y = a << b;", "assign y = a >> b;"),
    _row("shift", "shr_to_shl", "binary", ">>", "<<", "a >> b becomes a << b",
         "assign y = a >> b;", "assign y = a << b;"),
    _row("shift", "shr_to_ashr", "binary", ">>", ">>>", "logical a >> b becomes a >>> b",
         "assign y = a >> b;", "assign y = a >>> b;"),
    _row("shift", "ashr_to_shr", "binary", ">>>", ">>", "arithmetic a >>> b becomes a >> b",
         "assign y = a >>> b;", "assign y = a >> b;"),
    _row("shift", "ashl_to_ashr", "binary", "<<<", ">>>", "a <<< b becomes a >>> b",
         "assign y = a <<< b;", "assign y = a >>> b;"),
    _row("unary", "remove_neg", "unary", "-", "", "-a becomes a",
         "assign y = -a;", "assign y = a;"),
)


@dataclass(frozen=True)
class TokenSwap:
    """Replace the operator token ``old`` of every binary/unary expression by ``new``."""

    name: str
    position: Position
    old: str
    new: str
    description: str
    examples: tuple[Example, ...]

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        for expr, _parent, _root in ctx.walk():
            if expr.kind == self.position and TOKEN_ALIASES.get(expr.op, expr.op) == self.old:
                yield ctx.site(self.name, (expr.op_start, expr.op_end), self.new,
                               (expr.start, expr.end))


def token_operators() -> list[TokenSwap]:
    """One :class:`TokenSwap` per row of :data:`TOKEN_TABLE`."""
    return [TokenSwap(f"{family}.{what}", position, old, new, description, (ex,))
            for family, what, position, old, new, description, ex in TOKEN_TABLE]
