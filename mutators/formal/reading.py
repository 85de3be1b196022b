"""Mutants the simulator reads exactly as golden: a proof under Verilator's own reading.

hwtp scores against Verilator, so Verilator's reading of the code is the reference. Yosys
reads some code differently, and its counterexamples on such code do not replay:

- a constant bit select out of range, ``a[-WIDTH-1]`` for ``a[WIDTH-1]``: Yosys reads x
  (then 0); Verilator sizes the index to the select (``-9`` as 3 bits is 7) and reads
  ``a[7]``, golden's bit;
- ``<=`` in an ``always @*`` (or ``always_comb``) block: Verilator runs every non-blocking
  assignment of a combinational process as a blocking one (its ``COMBDLY`` warning, "This
  will be executed as a blocking assignment"), so ``=`` made ``<=`` there, or ``<=`` made
  ``=``, changes nothing; Yosys' ``proc`` applies the ``<=`` at the end of the block.

The proof: Verilator's elaborated tree of the mutant (``--json-only``, with the build's own
flags, parameters and defines) equals golden's, source locations aside, after the one
rewrite Verilator itself makes next (``V3Active``: a non-blocking assignment in a process
with no sensitivity list and no timing control becomes a blocking one), node numbers
renumbered in tree order. Equal trees are one model: every later pass of Verilator sees the
same input, so no stimulus, a plan's or a project's own testbench, tells them apart in that
simulator. Verilator has already folded an ``if`` chain of ``=`` into one ``?:`` by then, and
leaves one with a ``<=`` in it, so a swap there has a tree of its own:
:func:`runs_as_blocking` proves it from where the one ``<=`` sits instead (the texts differ by
the swap alone). Anything else (another simulator, a tree that differs anywhere) stays with
the checker's verdict.

The other way round, a non-blocking assignment in a level-sensitive process (``always @*``,
or a sensitivity list without edges) is where the two readings part: Verilator runs ``<=``
in ``always @*`` as ``=``, and keeps it in ``always @(a or b)``, whose reads then see the old
value, while Yosys' ``proc`` reads both as one combinational circuit. Yosys' proofs do not
hold for the simulator there (:attr:`Reading.level_nonblocking`), so the classifier does not
take them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hwtp.rtl.design import Design, SourceFile
from hwtp.sim import toolchain
from hwtp.sim.backends import BuildOptions, VerilatorBackend, get_backend

#: Keys left out of the comparison: where in the source a node came from.
_LOCATION = frozenset({"loc", "filesp"})
#: Node types that make a process wait (V3Active: such a process is not combinational).
_TIMING = frozenset({"DELAY", "EVENTCONTROL", "WAIT", "WAITFORK", "FORK", "FIREEVENT", "CAWAIT"})
#: Process keywords V3Active makes combinational when they have no sensitivity list.
_COMBINATIONAL = frozenset({"always", "always_comb"})


def applies(simulator: str) -> bool:
    """Whether ``simulator`` (a backend name) is the one whose reading this proves."""
    return isinstance(get_backend(simulator), VerilatorBackend)


def version() -> str:
    """``verilator 5.049``-style: the simulator whose reading a proof is under."""
    return f"verilator {toolchain.find_verilator().version_text}"


@dataclass(frozen=True)
class Reading:
    """Verilator's reading of some sources: its canonical tree (None when Verilator wrote
    none), whether a level-sensitive process holds a non-blocking assignment, and the CPU
    seconds Verilator took."""

    model: Any
    level_nonblocking: bool
    seconds: float
    # every non-blocking assignment: (line, column) of its `<=`, and whether its process is
    # one Verilator makes combinational (and so runs the `<=` as `=`)
    nonblocking: frozenset[tuple[int, int, bool]] = frozenset()


def read(design: Design, sources: Sequence[SourceFile], build: BuildOptions) -> Reading:
    """Verilator's :class:`Reading` of ``sources`` with the build's options."""
    before = os.times()
    text = VerilatorBackend().elaborated(sources, design.top, build)
    after = os.times()
    used = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    try:
        raw = json.loads(text) if text is not None else None
    except ValueError:
        raw = None
    if raw is None:
        return Reading(None, False, used)
    return Reading(_numbered(canonical(raw)), _level_nonblocking(raw), used, frozenset(_nonblocking(raw)))


def runs_as_blocking(golden: Reading, mutant: Reading, line: int, col: int, adds: bool) -> bool:
    """Whether the one blocking/non-blocking swap at ``line``:``col`` (``adds``: ``=`` made
    ``<=``, else ``<=`` made ``=``) is no change for Verilator: the side that has the ``<=``
    has it, there, in a process Verilator makes combinational (so it runs it as ``=``, the
    other side's text), and the other side has no ``<=`` there. Where Verilator folded
    golden's assignments differently (an ``if`` chain of ``=`` becomes one ``?:``) the trees
    differ, but the text differs only by the swap, so this is the whole difference."""
    with_it, without = (mutant, golden) if adds else (golden, mutant)
    if with_it.model is None or without.model is None:
        return False
    return (line, col, True) in with_it.nonblocking and not any(
        (line, col) == (n[0], n[1]) for n in without.nonblocking
    )


def canonical(node: Any, combinational: bool = False) -> Any:
    """``node`` (Verilator's JSON tree) without source locations, every non-blocking
    assignment of a combinational process made blocking, as Verilator's ``V3Active`` does."""
    if isinstance(node, list):
        return [canonical(n, combinational) for n in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind == "ALWAYS":
        combinational = _combinational(node)
    out = {k: canonical(v, combinational) for k, v in node.items() if k not in _LOCATION}
    if combinational and kind == "ASSIGNDLY":
        out["type"] = "ASSIGN"
    return out


def _nonblocking(node: Any, combinational: bool = False) -> list[tuple[int, int, bool]]:
    """(line, column, in a combinational process) of every ``ASSIGNDLY`` under ``node``."""
    if isinstance(node, list):
        return [found for n in node for found in _nonblocking(n, combinational)]
    if not isinstance(node, dict):
        return []
    if node.get("type") == "ALWAYS":
        combinational = _combinational(node)
    out = []
    if node.get("type") == "ASSIGNDLY":
        where = str(node.get("loc", "")).split(",")
        if len(where) == 3 and ":" in where[1]:
            line, col = where[1].split(":", 1)
            out.append((int(line), int(col), combinational))
    for v in node.values():
        if isinstance(v, (list, dict)):
            out += _nonblocking(v, combinational)
    return out


def _combinational(process: dict[str, Any]) -> bool:
    """Whether Verilator's ``V3Active`` makes ``process`` (an ``ALWAYS``) combinational, so
    that it runs its ``<=`` as ``=``: no sensitivity list (``@*``), no timing control."""
    return (
        process.get("keyword") in _COMBINATIONAL and not process.get("sentreep") and not _waits(process.get("stmtsp"))
    )


def _numbered(tree: Any) -> Any:
    """``tree`` with every node's ``addr`` (``(OC)``: Verilator numbers nodes as it makes them,
    the ones it dropped included) renumbered in the order the tree lists them, and every
    reference to a node (a field holding its ``addr``) renamed alike: equal structure, equal
    text, and no two different trees made equal (a one-to-one renaming)."""
    order: dict[str, str] = {}

    def collect(node: Any) -> None:
        if isinstance(node, list):
            for n in node:
                collect(n)
        elif isinstance(node, dict):
            addr = node.get("addr")
            if isinstance(addr, str) and addr not in order:
                order[addr] = f"#{len(order)}"
            for v in node.values():
                collect(v)

    def rename(node: Any) -> Any:
        if isinstance(node, list):
            return [rename(n) for n in node]
        if isinstance(node, dict):
            return {k: rename(v) for k, v in node.items()}
        return order.get(node, node) if isinstance(node, str) else node

    collect(tree)
    return rename(tree)


def _level_nonblocking(node: Any) -> bool:
    """Whether a process without an edge in its sensitivity holds a non-blocking assignment."""
    return _has(
        node,
        lambda n: (
            n.get("type") == "ALWAYS"
            and not _has(n.get("sentreep"), lambda s: s.get("edgeType") in ("POS", "NEG"))
            and _has(n.get("stmtsp"), lambda s: s.get("type") == "ASSIGNDLY")
        ),
    )


def _has(node: Any, test: Callable[[dict[str, Any]], bool]) -> bool:
    """Whether a node of ``node``'s tree passes ``test``."""
    if isinstance(node, list):
        return any(_has(n, test) for n in node)
    if not isinstance(node, dict):
        return False
    return test(node) or any(_has(v, test) for v in node.values() if isinstance(v, (list, dict)))


def _waits(node: Any) -> bool:
    """Whether a timing control occurs anywhere in ``node``."""
    return _has(node, lambda n: n.get("type") in _TIMING or bool(n.get("timingControlp")))
