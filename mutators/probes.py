"""Activation probes: checks a schemata build may carry, to tell when the selected mutant's code
computed something golden's would not have (``hwtp ci`` diagnoses its survivors with them).

A probe of mutant ``k`` writes the simulation time into a register ``hwtp_act_<k>`` each time it
fires (procedural code), or drives a wire ``hwtp_act_<k>_c<n>`` that is 1 while it holds
(continuous assignments); the monitor in the simulator (:mod:`hwtp.ci.observe`) watches them.
Every probe is guarded by ``hwtp_mutant_sel == k`` and only reads signals, so with another
mutant selected (or golden) the design computes exactly what it computes without probes.

What "activated" means, by guard kind (:class:`hwtp.mutators.site.Site`):

- ``expr`` in procedural code: just before the statement that evaluates the root expression
  holding the edit (the right-hand side of an assignment, an ``if`` condition, a ``case``
  selector) runs, the root with the mutant's edits and the root without them are evaluated and
  differ: a right-hand side at the width and signedness the assignment gives it (before the
  truncation to the target's width), an ``if`` condition in which branch it takes, a ``case``
  selector in its value (four-state ``!==``). The statement is wrapped in ``begin ... end`` with
  the check in front, so the check runs exactly when (and each time) the statement does.
- ``expr`` in a continuous assignment (or net initializer): the same comparison, as a wire that
  is 1 while the two differ; activated when it is 1 at any time of the test.
- ``stmt`` (a deleted or changed assignment, a dropped case item, swapped case bodies): the
  guarded statement ran while the mutant was selected (it is reached; whether it would have
  changed a value is not checked, so this over-approximates).
- not probed (activation unknown): ``edge`` mutants, code inside functions and tasks (their
  arguments and locals), roots that call a system function other than a pure one (evaluating
  ``$random`` twice would change the run), bare generate items without a block of their own,
  roots in a statement holding a macro use or included text (no anchor: their offsets are not
  all the file's own),
  and operators whose guard is not inside a root expression hwtp indexes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyslang

from hwtp.mutators.context import Anchor, SiteContext
from hwtp.mutators.site import Site
from hwtp.mutators.slang_index import index_tree

#: Name prefix of every probe signal: ``hwtp_act_<k>`` (a register) or ``hwtp_act_<k>_c<n>`` (a wire).
PREFIX = "hwtp_act_"

#: System functions that read nothing but their arguments (calling them twice changes nothing).
PURE_SYSTEM_FUNCTIONS = frozenset(
    {
        "signed",
        "unsigned",
        "clog2",
        "bits",
        "countones",
        "countbits",
        "onehot",
        "onehot0",
        "isunknown",
        "size",
        "left",
        "right",
        "low",
        "high",
        "increment",
        "dimensions",
        "itor",
        "rtoi",
        "bitstoreal",
        "realtobits",
        "time",
        "realtime",
        "stime",
    }
)
_SYSTEM_CALL = re.compile(r"(?<![\w$])\$(\w+)")


def flag_name(index: int) -> str:
    """The register a procedural probe of mutant ``index`` writes."""
    return f"{PREFIX}{index}"


@dataclass(frozen=True)
class Coverage:
    """How a mutant's activation is measured: ``value`` (every edit's value is compared),
    ``reached`` (a statement mutant: the statement ran), ``partial`` (some of its edits are not
    probed) or ``none``; ``why``: why (some of) it is not probed."""

    kind: str
    why: str | None = None

    @property
    def complete(self) -> bool:
        """A probe that did not fire proves the mutant was not activated."""
        return self.kind in ("value", "reached")

    def merge(self, other: Coverage) -> Coverage:
        """The coverage of a mutant with edits in two files."""
        kinds = {self.kind, other.kind}
        if kinds <= {"value"}:
            return self
        if kinds <= {"value", "reached"}:
            return Coverage("reached")
        return Coverage("none" if kinds == {"none"} else "partial", self.why or other.why)


@dataclass
class FileProbes:
    """The probes of one source file, ready for :func:`hwtp.mutators.schemata.render`.

    ``statements``: procedural statement span -> the checks that go in front of it;
    ``after``: byte offset just past a continuous assignment -> the probe wires declared there;
    ``flags``: module body offset -> the probe registers that module declares;
    ``coverage``: mutant index -> how its activation is measured.
    """

    statements: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    after: dict[int, list[str]] = field(default_factory=dict)
    flags: dict[int, list[int]] = field(default_factory=dict)
    coverage: dict[int, Coverage] = field(default_factory=dict)

    def declarations(self, body: int) -> str:
        """The probe registers the module whose body starts at ``body`` declares."""
        return "".join(f"\n reg [63:0] {flag_name(i)} /*verilator public_flat_rw*/;" for i in self.flags.get(body, []))


def _impure(text: str) -> str | None:
    for match in _SYSTEM_CALL.finditer(text):
        if match.group(1) not in PURE_SYSTEM_FUNCTIONS:
            return f"${match.group(1)}"
    return None


def _edited(data: bytes, lo: int, hi: int, sites: Sequence[Site]) -> str:
    """The text of ``[lo, hi)`` with ``sites``' edits applied (all inside the span)."""
    out = data[lo:hi]
    for site in sorted(sites, key=lambda s: s.start, reverse=True):
        out = out[: site.start - lo] + site.standalone.encode("utf-8") + out[site.end - lo :]
    return out.decode("utf-8")


def _condition(data: bytes, anchor: Anchor, sites: Sequence[Site]) -> str:
    """Verilog that is true when the root with ``sites``' edits differs from the root without."""
    lo, hi = anchor.root.start, anchor.root.end
    mutated, original = _edited(data, lo, hi, sites), data[lo:hi].decode("utf-8")
    if anchor.role == "if":
        return f"(((|({mutated})) === 1'b1) !== ((|({original})) === 1'b1))"
    if anchor.role == "rhs" and anchor.lhs is not None:
        # a zero of the target's width with the root's own signedness: the assignment's context
        zero = f"$signed(({data[anchor.lhs.start : anchor.lhs.end].decode('utf-8')}) & 1'b0)"
        return f"((({mutated}) + {zero}) !== (({original}) + {zero}))"
    return f"(({mutated}) !== ({original}))"


def _anchor_of(anchors: Sequence[Anchor], site: Site) -> Anchor | None:
    if site.guard == "stmt":
        return next(
            (
                a
                for a in anchors
                if not a.continuous and a.statement.start == site.guard_start and a.statement.end == site.guard_end
            ),
            None,
        )
    inside = [a for a in anchors if a.root.start <= site.guard_start and site.guard_end <= a.root.end]
    return min(inside, key=lambda a: a.root.end - a.root.start, default=None)


def _why_not(anchor: Anchor | None, site: Site, data: bytes) -> str | None:
    if site.guard == "edge":
        return "edge mutants are not probed"
    if anchor is None:
        return "its code is not in a statement or expression hwtp probes"
    if anchor.in_subroutine:
        return "its code is inside a function or task"
    if anchor.continuous and not anchor.scoped:
        return "its assignment is a bare generate item"
    if site.guard == "expr":
        call = _impure(data[anchor.root.start : anchor.root.end].decode("utf-8"))
        if call:
            return f"its expression calls {call}"
    return None


def plan(
    text: str, path: str, mutants: Sequence[tuple[int, Site]], module_bodies: Sequence[int], selector: str
) -> FileProbes:
    """The probes of ``mutants`` (selector value, site) in the Verilog ``text`` of ``path``."""
    out = FileProbes()
    tree = pyslang.syntax.SyntaxTree.fromText(text, pyslang.SourceManager(), path, path)
    if any(d.isError() for d in tree.diagnostics):
        out.coverage.update({i: Coverage("none", "its file does not parse for probing") for i, _ in mutants})
        return out
    kinds: dict[int, set[str]] = {}
    why: dict[int, str] = {}
    ctx = SiteContext(text, path, tree=tree)
    index_tree(ctx, tree)
    data = ctx.data
    bodies = sorted(module_bodies)
    # (mutant, anchor) -> the mutant's sites in that anchor
    grouped: dict[tuple[int, Anchor], list[Site]] = {}
    for index, site in mutants:
        anchor = _anchor_of(ctx.anchors, site)
        reason = _why_not(anchor, site, data)
        if reason is not None or anchor is None:
            kinds.setdefault(index, set()).add("none")
            why.setdefault(index, reason or "not probed")
            continue
        kinds.setdefault(index, set()).add("reached" if site.guard == "stmt" else "value")
        grouped.setdefault((index, anchor), []).append(site)
    wires = 0
    for (index, anchor), sites in grouped.items():
        guard = f"({selector} == 32'd{index})"
        stmt = [s for s in sites if s.guard == "stmt"]
        condition = "" if stmt else f" && {_condition(data, anchor, sites)}"
        if anchor.continuous:
            name = f"{flag_name(index)}_c{wires}"
            wires += 1
            out.after.setdefault(anchor.statement.end, []).append(
                f" wire {name} /*verilator public_flat_rw*/ = {guard}{condition};"
            )
            continue
        body = max((b for b in bodies if b <= anchor.statement.start), default=None)
        if body is None:
            kinds[index].add("none")
            why.setdefault(index, "its code is outside a module")
            continue
        span = (anchor.statement.start, anchor.statement.end)
        out.statements.setdefault(span, []).append(f"if ({guard}{condition}) {flag_name(index)} = $time;")
        flags = out.flags.setdefault(body, [])
        if index not in flags:
            flags.append(index)
    for index, found in kinds.items():
        if "none" in found:
            out.coverage[index] = Coverage("none" if found == {"none"} else "partial", why[index])
        else:
            out.coverage[index] = Coverage("reached" if "reached" in found else "value")
    return out
