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
with no sensitivity list and no timing control becomes a blocking one). Equal trees are one
model: every later pass of Verilator sees the same input, so no stimulus, a plan's or a
project's own testbench, tells them apart in that simulator. Anything else (another
simulator, a tree that differs anywhere) stays with the checker's verdict.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from hwtp.design import Design, SourceFile
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


def tree(design: Design, sources: Sequence[SourceFile], build: BuildOptions) -> tuple[Any | None, float]:
    """(Verilator's canonical tree of ``sources``, or None when it cannot write one; the CPU
    seconds Verilator took)."""
    before = os.times()
    text = VerilatorBackend().elaborated(sources, design.top, build)
    after = os.times()
    used = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    if text is None:
        return None, used
    try:
        return canonical(json.loads(text)), used
    except ValueError:
        return None, used


def canonical(node: Any, combinational: bool = False) -> Any:
    """``node`` (Verilator's JSON tree) without source locations, every non-blocking
    assignment of a combinational process made blocking, as Verilator's ``V3Active`` does."""
    if isinstance(node, list):
        return [canonical(n, combinational) for n in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind == "ALWAYS":
        combinational = (
            node.get("keyword") in _COMBINATIONAL and not node.get("sentreep") and not _waits(node.get("stmtsp"))
        )
    out = {k: canonical(v, combinational) for k, v in node.items() if k not in _LOCATION}
    if combinational and kind == "ASSIGNDLY":
        out["type"] = "ASSIGN"
    return out


def _waits(node: Any) -> bool:
    """Whether a timing control occurs anywhere in ``node``."""
    if isinstance(node, list):
        return any(_waits(n) for n in node)
    if not isinstance(node, dict):
        return False
    if node.get("type") in _TIMING or node.get("timingControlp"):
        return True
    return any(_waits(v) for v in node.values() if isinstance(v, (list, dict)))
