"""The record every operator produces: one candidate mutation of the source text.

A :class:`Site` says what to change (``start``/``end`` byte span of the *edit*, and its
``replacement``) and where a mutant-schemata build may guard it (``guard_start``/
``guard_end``: the enclosing expression or statement that is duplicated and selected at run
time, and ``guard``: how). Byte offsets index the UTF-8 encoded source text.

``replacement`` may contain ``{orig}``: the text of the edit span, so wrapping edits
(``!({orig})``, ``({orig}) + 1``) compose with other mutants nested inside the span.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: How a schemata build guards the mutation:
#: ``expr``  — the guard span is an expression: ``((sel == k) ? (mutated) : (original))``;
#: ``stmt``  — the guard span is a procedural statement: ``if (sel == k) mutated else original``;
#: ``edge``  — the guard span is an event expression ``posedge sig``: the edit flips the edge and
#:             the schemata renders ``posedge ((sel == k) ? ~(sig) : (sig))``.
GuardKind = Literal["expr", "stmt", "edge"]


@dataclass(frozen=True, order=True)
class Site:
    """One candidate mutation in one source file."""

    file: str  # source path relative to the design folder
    start: int  # byte offset of the edit span (inclusive)
    end: int  # byte offset of the edit span (exclusive)
    operator: str  # namespaced operator name, e.g. "relational.lt_to_le"
    original: str  # source text of the edit span
    replacement: str  # new text; "{orig}" stands for the (rendered) original span
    guard_start: int  # byte span the schemata duplicates and guards
    guard_end: int
    guard: GuardKind = "expr"
    line: int = 0  # 1-based line of ``start``
    col: int = 0  # 1-based column (bytes) of ``start``
    equivalent: bool = False  # True for semantics-preserving rewrites

    @property
    def standalone(self) -> str:
        """The replacement as it appears in a standalone mutant."""
        return self.replacement.replace("{orig}", self.original)
