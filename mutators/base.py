"""The one interface every mutation operator implements, and helpers to declare examples.

An operator is any object with a namespaced ``name`` (``family.what``), a one-line
``description``, ``examples`` (pairs of full module texts: before, and after applying the
operator at its first site), and ``sites(ctx)`` yielding :class:`~hwtp.mutators.site.Site`
records for a :class:`~hwtp.mutators.context.SiteContext`. Plug-ins implement the same
protocol (entry-point group ``hwtp.operators``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from hwtp.mutators.context import SiteContext
    from hwtp.mutators.site import Site

Example = tuple[str, str]

#: The module every built-in example is written in: its ports cover the names examples use.
EXAMPLE_MODULE = (
    "module ex(input clk, input rst, input c, input d, input [3:0] a, input [3:0] b,\n"
    "          output [3:0] y, output reg [3:0] q, output reg r);\n"
    "{body}\n"
    "endmodule\n"
)


@runtime_checkable
class Operator(Protocol):
    """A mutation operator: finds the sites where it applies (read-only attributes, so frozen
    dataclasses implement it)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def examples(self) -> Sequence[Example]: ...

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        """Every site of this operator in ``ctx``."""
        ...


def family_of(name: str) -> str:
    """The family of a namespaced operator name (``relational.lt_to_le`` → ``relational``)."""
    return name.split(".", 1)[0]


def example(before: str, after: str) -> Example:
    """A (before, after) pair of full modules from two module bodies."""
    return EXAMPLE_MODULE.format(body=before), EXAMPLE_MODULE.format(body=after)


class CodeOperator:
    """Base of the operators written as code: subclasses set the three class attributes and
    implement :meth:`sites`."""

    name: str = ""
    description: str = ""
    examples: Sequence[Example] = ()

    def sites(self, ctx: SiteContext) -> Iterable[Site]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<operator {self.name}>"
