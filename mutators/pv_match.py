"""Byte spans for pyverilog's AST: a Verilog tokenizer and an AST-guided token matcher.

pyverilog keeps only line numbers. :class:`Matcher` recovers exact spans by walking an AST
node and the token stream together (the AST says what comes next; the tokens say where).
Parentheses are not in the AST, so every expression may be wrapped in any number of them;
the matcher backtracks over the few ways a parenthesis can be shared between an operand and
its parent. Spans follow the conventions of :class:`~hwtp.mutators.context.Expr`.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from hwtp.mutators.context import Expr, ExprKind, Selector, Span
from hwtp.mutators.ops_tokens import TOKEN_ALIASES

_TOKEN = re.compile(r"""
    (?P<skip>\s+|//[^\n]*|/\*.*?\*/|`[A-Za-z_]\w*[^\n]*)
  | (?P<tok>
        "(?:\\.|[^"\\])*"
      | (?:\d[\d_]*\s*)?'[sS]?[bBoOdDhH]\s*[0-9a-fA-FxXzZ?_]+
      | \d[\d_]*\.\d[\d_]*(?:[eE][+-]?\d+)? | \d[\d_]*[eE][+-]?\d+ | \d[\d_]*
      | \$[A-Za-z_][\w$]* | [A-Za-z_][\w$]* | \\\S+
      | <<< | >>> | === | !== | == | != | <= | >= | && | \|\| | << | >> | \*\* | ~& | ~\|
      | ~\^ | \^~ | \+: | -: | -> | [-+*/%<>=!~&|^?:;,.()\[\]{}@\#']
    )
""", re.VERBOSE | re.DOTALL)

BINARY = {"Plus": "+", "Minus": "-", "Times": "*", "Divide": "/", "Mod": "%", "Power": "**",
          "Sll": "<<", "Srl": ">>", "Sla": "<<<", "Sra": ">>>", "LessThan": "<",
          "GreaterThan": ">", "LessEq": "<=", "GreaterEq": ">=", "Eq": "==", "NotEq": "!=",
          "Eql": "===", "NotEql": "!==", "And": "&", "Xor": "^", "Xnor": "~^", "Or": "|",
          "Land": "&&", "Lor": "||"}
UNARY = {"Uplus": "+", "Uminus": "-", "Ulnot": "!", "Unot": "~", "Uand": "&", "Unand": "~&",
         "Uor": "|", "Unor": "~|", "Uxor": "^", "Uxnor": "~^"}

Node = Any  # pyverilog AST nodes
Matches = Iterator[tuple[int, Expr]]


class MatchError(Exception):
    """The tokens do not follow the AST (a construct this frontend does not map)."""


@dataclass(frozen=True)
class Token:
    text: str
    start: int
    end: int
    line: int


def tokenize(data: bytes) -> list[Token]:
    """The tokens of a Verilog source (comments, whitespace and directives dropped)."""
    text = data.decode("latin-1")  # one character per byte: offsets are byte offsets
    tokens = []
    line, seen = 1, 0
    for match in _TOKEN.finditer(text):
        if match.lastgroup == "tok":
            line += text.count("\n", seen, match.start())
            seen = match.start()
            tokens.append(Token(match.group(), match.start(), match.end(), line))
    return tokens


def _kind(node: Node) -> str:
    return type(node).__name__


def _same(token: str, op: str) -> bool:
    return TOKEN_ALIASES.get(token, token) == op


class Matcher:
    """Walks pyverilog AST nodes over the token stream of the same source."""

    def __init__(self, data: bytes) -> None:
        self.tokens = tokenize(data)
        self._lines = [t.line for t in self.tokens]

    # -- token helpers --------------------------------------------------------------------
    def text(self, i: int) -> str:
        return self.tokens[i].text if i < len(self.tokens) else ""

    def expect(self, i: int, *texts: str) -> int:
        """The index after token ``i`` when its text is one of ``texts``; else MatchError."""
        if self.text(i) not in texts:
            where = f"line {self.tokens[i].line}" if i < len(self.tokens) else "end of file"
            raise MatchError(f"{where}: expected {' or '.join(texts)}, found {self.text(i)!r}")
        return i + 1

    def line_start(self, line: int) -> int:
        """Index of the first token on or after ``line``."""
        return bisect.bisect_left(self._lines, line)

    def find(self, start: int, text: str) -> int:
        """Index of the first token ``text`` at or after ``start``."""
        for i in range(start, len(self.tokens)):
            if self.tokens[i].text == text:
                return i
        raise MatchError(f"no {text!r} after token {start}")

    # -- expressions ----------------------------------------------------------------------
    def first(self, node: Node, i: int, follow: Sequence[str]) -> tuple[int, Expr]:
        """The first way to match ``node`` at ``i`` that is followed by one of ``follow``."""
        for j, expr in self.expr(node, i):
            if self.text(j) in follow:
                return j, expr
        line = self.tokens[i].line if i < len(self.tokens) else "end"
        raise MatchError(f"line {line}: cannot map {_kind(node)} followed by {follow}")

    def expr(self, node: Node, i: int) -> Matches:
        """Every way ``node`` matches the tokens from ``i``: (next index, Expr)."""
        if _kind(node) in ("Rvalue", "Lvalue"):
            yield from self.expr(node.var, i)
            return
        yield from self._bare(node, i)
        if self.text(i) == "(":
            for j, expr in self.expr(node, i + 1):
                if self.text(j) == ")":
                    yield j + 1, expr.wrapped(self.tokens[i].start, self.tokens[j].end)

    def _leaf(self, kind: ExprKind, i: int) -> tuple[int, Expr]:
        tok = self.tokens[i]
        return i + 1, Expr(kind, tok.start, tok.end, tok.start, tok.end)

    def _bare(self, node: Node, i: int) -> Matches:
        kind = _kind(node)
        if i >= len(self.tokens):
            return
        tok = self.tokens[i].text
        if kind == "Identifier":
            if node.scope is None and tok == node.name:
                yield self._leaf("name", i)
        elif kind == "IntConst":
            if re.sub(r"\s", "", tok) == re.sub(r"\s", "", str(node.value)):
                yield self._leaf("literal", i)
        elif kind in ("FloatConst", "StringConst"):
            if tok == str(node.value) or tok.startswith('"'):
                yield self._leaf("other", i)
        elif kind in BINARY:
            yield from self._binary(node, i, BINARY[kind])
        elif kind in UNARY:
            yield from self._unary(node, i, UNARY[kind])
        elif kind == "Cond":
            yield from self._cond(node, i)
        elif kind in ("Concat", "LConcat"):
            yield from self._concat(node, i)
        elif kind == "Repeat":
            yield from self._repeat(node, i)
        elif kind in ("Pointer", "Partselect"):
            yield from self._select(node, i)
        elif kind == "FunctionCall":
            if tok == node.name.name:
                yield from self._call(node.args, i)
        elif kind == "SystemCall" and tok == "$" + node.syscall:
            if node.args or self.text(i + 1) == "(":
                yield from self._call(node.args, i)
            else:
                yield self._leaf("name", i)

    def _binary(self, node: Node, i: int, op: str) -> Matches:
        for j, left in self.expr(node.left, i):
            if not _same(self.text(j), op):
                continue
            tok = self.tokens[j]
            for k, right in self.expr(node.right, j + 1):
                yield k, Expr("binary", left.outer_start, right.outer_end, left.outer_start,
                              right.outer_end, tok.text, tok.start, tok.end, (left, right))

    def _unary(self, node: Node, i: int, op: str) -> Matches:
        if not _same(self.text(i), op):
            return
        tok = self.tokens[i]
        for j, operand in self.expr(node.right, i + 1):
            yield j, Expr("unary", tok.start, operand.outer_end, tok.start, operand.outer_end,
                          tok.text, tok.start, tok.end, (operand,))

    def _cond(self, node: Node, i: int) -> Matches:
        for j, cond in self.expr(node.cond, i):
            if self.text(j) != "?":
                continue
            for k, then in self.expr(node.true_value, j + 1):
                if self.text(k) != ":":
                    continue
                for m, other in self.expr(node.false_value, k + 1):
                    yield m, Expr("cond", cond.outer_start, other.outer_end, cond.outer_start,
                                  other.outer_end, children=(cond, then, other))

    def _list(self, items: Sequence[Node], i: int, close: str) -> Iterator[tuple[int, list[Expr]]]:
        """Comma-separated ``items`` from ``i`` up to and including ``close``."""
        if not items:
            if self.text(i) == close:
                yield i + 1, []
            return
        for j, first in self.expr(items[0], i):
            if len(items) == 1 and self.text(j) == close:
                yield j + 1, [first]
            elif len(items) > 1 and self.text(j) == ",":
                for k, rest in self._list(items[1:], j + 1, close):
                    yield k, [first, *rest]

    def _concat(self, node: Node, i: int) -> Matches:
        if self.text(i) != "{":
            return
        for j, parts in self._list(node.list, i + 1, "}"):
            start, end = self.tokens[i].start, self.tokens[j - 1].end
            yield j, Expr("concat", start, end, start, end, children=tuple(parts))

    def _repeat(self, node: Node, i: int) -> Matches:
        if self.text(i) != "{":
            return
        for j, _count in self.expr(node.times, i + 1):
            for k, inner in self.expr(node.value, j):
                if self.text(k) == "}":
                    start, end = self.tokens[i].start, self.tokens[k].end
                    yield k + 1, Expr("repeat", start, end, start, end, children=(inner,))

    def _call(self, args: Sequence[Node] | None, i: int) -> Matches:
        if self.text(i + 1) != "(":
            return
        for j, parts in self._list(list(args or ()), i + 2, ")"):
            start, end = self.tokens[i].start, self.tokens[j - 1].end
            yield j, Expr("call", start, end, start, end, children=tuple(parts))

    # -- selects --------------------------------------------------------------------------
    def _select(self, node: Node, i: int) -> Matches:
        chain: list[Node] = []
        while _kind(node) in ("Pointer", "Partselect"):
            chain.append(node)
            node = node.var
        if _kind(node) != "Identifier" or node.scope is not None or self.text(i) != node.name:
            return
        start = self.tokens[i].start
        for j, selectors in self._selectors(chain[::-1], i + 1):
            end = self.tokens[j - 1].end
            indices = tuple(s.index for s in selectors if s.index is not None)
            yield j, Expr("select", start, end, start, end, children=indices,
                          selectors=tuple(selectors))

    def _selectors(self, chain: list[Node], i: int) -> Iterator[tuple[int, list[Selector]]]:
        if not chain:
            yield i, []
            return
        if self.text(i) != "[":
            return
        for j, selector in self._selector(chain[0], i + 1):
            if self.text(j) == "]":
                for k, rest in self._selectors(chain[1:], j + 1):
                    yield k, [selector, *rest]

    def _selector(self, node: Node, i: int) -> Iterator[tuple[int, Selector]]:
        if _kind(node) == "Pointer":
            for j, index in self.expr(node.ptr, i):
                yield j, Selector("bit", index=index)
            return
        lsb = node.lsb
        if _kind(lsb) in ("Plus", "Minus") and lsb.left is node.msb:
            op = "+:" if _kind(lsb) == "Plus" else "-:"
            for j, base in self.expr(node.msb, i):
                if self.text(j) == op:
                    for k, _width in self.expr(lsb.right, j + 1):
                        yield k, Selector("indexed", index=base)
            return
        for j, msb in self.expr(node.msb, i):
            if self.text(j) == ":":
                for k, low in self.expr(lsb, j + 1):
                    bounds = (Span(msb.outer_start, msb.outer_end),
                              Span(low.outer_start, low.outer_end))
                    yield k, Selector("range", bounds=bounds)
