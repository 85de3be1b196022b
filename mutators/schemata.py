"""Standalone mutants and mutant schemata, spliced into the original source text.

A standalone mutant is golden with one edit span replaced: every other byte is untouched,
so it carries no trace of being a mutant. A schemata source holds golden and every mutant
of a file at once: each guard span is rendered as a choice on the selector register
(``hwtp_mutant_sel``), so one build serves all mutants. Guard spans come from syntax-tree
nodes, so they nest or are disjoint; a mutant whose edit span cuts across another mutant's
guard span cannot share the build and is reported, never silently dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hwtp.mutators.site import Site

if TYPE_CHECKING:
    from hwtp.mutators.probes import FileProbes

SELECTOR = "hwtp_mutant_sel"
PLUSARG = "hwtp_mutant"


def standalone(text: str, sites: Sequence[Site]) -> str:
    """``text`` with every site's edit applied (one site for a first-order mutant)."""
    data = text.encode("utf-8")
    for site in sorted(sites, key=lambda s: s.start, reverse=True):
        data = data[: site.start] + site.standalone.encode("utf-8") + data[site.end :]
    return data.decode("utf-8")


def selector_declaration() -> str:
    """The selector register: a public register the harness writes, set from the plusarg."""
    return (
        f" reg [31:0] {SELECTOR} /*verilator public_flat_rw*/;"
        f' initial begin if (!$value$plusargs("{PLUSARG}=%d", {SELECTOR})) {SELECTOR} = 32\'d0; end'
    )


@dataclass
class _Region:
    lo: int
    hi: int
    guard: str
    mutants: list[tuple[int, Site]]
    children: list[_Region]
    checks: str = field(default="")  # a "probe" region: the activation checks in front of it


class SchemataError(ValueError):
    """Mutants that cannot share one schemata build (the message names them)."""

    def __init__(self, message: str, indices: Sequence[int]) -> None:
        super().__init__(message)
        self.indices = list(indices)


def _regions(mutants: Sequence[tuple[int, Site]], probes: FileProbes | None = None) -> list[_Region]:
    """Group mutants by guard span and nest the spans into a forest (with ``probes``, each
    probed statement is a region too, around any guard of the same span)."""
    by_span: dict[tuple[int, int, str], _Region] = {}
    for index, site in mutants:
        key = (site.guard_start, site.guard_end, site.guard)
        region = by_span.setdefault(key, _Region(site.guard_start, site.guard_end, site.guard, [], []))
        region.mutants.append((index, site))
    for (lo, hi), checks in probes.statements.items() if probes else ():
        by_span[(lo, hi, "probe")] = _Region(lo, hi, "probe", [], [], "\n".join(checks))
    ordered = sorted(by_span.values(), key=lambda r: (r.lo, -r.hi, r.guard != "probe"))
    roots: list[_Region] = []
    stack: list[_Region] = []
    for region in ordered:
        while stack and region.lo >= stack[-1].hi:
            stack.pop()
        if stack and region.hi > stack[-1].hi:
            raise SchemataError(f"guard spans cross at byte {region.lo}", [i for i, _ in region.mutants])
        (stack[-1].children if stack else roots).append(region)
        stack.append(region)
    return roots


class _Renderer:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def span(self, lo: int, hi: int, children: Sequence[_Region]) -> str:
        """Text of [lo, hi) with every child region inside it rendered as schemata."""
        out, pos = [], lo
        for child in children:
            if child.lo < lo or child.hi > hi:
                continue
            out.append(self.data[pos : child.lo].decode("utf-8"))
            out.append(self.region(child))
            pos = child.hi
        out.append(self.data[pos:hi].decode("utf-8"))
        return "".join(out)

    def mutated(self, region: _Region, site: Site) -> str:
        for child in region.children:
            inside = child.lo >= site.start and child.hi <= site.end
            outside = child.hi <= site.start or child.lo >= site.end
            if not (inside or outside):
                raise SchemataError(
                    f"{site.operator} at {site.file}:{site.line}:{site.col} cuts across another mutant's guard",
                    [i for i, s in region.mutants if s is site],
                )
        # With this mutant selected every guard inside its region is off (a mutant's own sites
        # have disjoint guards): the copy holds the region's original text, not the schemata of
        # the regions inside it, so the text grows linearly with the mutants, never as a product.
        return (
            self.data[region.lo : site.start].decode("utf-8")
            + site.replacement.replace("{orig}", self.data[site.start : site.end].decode("utf-8"))
            + self.data[site.end : region.hi].decode("utf-8")
        )

    def region(self, region: _Region) -> str:
        original = self.span(region.lo, region.hi, region.children)
        if region.guard == "probe":
            return f"begin {region.checks}\n{original} end"
        if region.guard == "edge":
            return self._edge(region, original)
        text = original
        if region.guard == "stmt":
            text = f"begin {text} end"
        for index, site in reversed(region.mutants):
            mutated = self.mutated(region, site)
            # one line per mutant: a line of a region with many mutants never holds them all
            if region.guard == "stmt":
                text = f"begin if ({SELECTOR} == 32'd{index}) begin {mutated} end else\n{text} end"
            else:
                text = f"(({SELECTOR} == 32'd{index}) ? ({mutated}) :\n({text}))"
        return text

    def _edge(self, region: _Region, original: str) -> str:
        keyword, _, signal = original.strip().partition(" ")
        if keyword not in ("posedge", "negedge") or not signal.strip():
            raise SchemataError(f"cannot guard event expression {original!r}", [i for i, _ in region.mutants])
        flips = " ||\n".join(f"({SELECTOR} == 32'd{i})" for i, _ in region.mutants)
        sig = signal.strip()
        return f"{keyword} (({flips}) ? ~({sig}) : ({sig}))"


def render(
    text: str, mutants: Sequence[tuple[int, Site]], module_bodies: Sequence[int], probes: FileProbes | None = None
) -> str:
    """The schemata source of one file.

    ``mutants`` pairs each site with its selector value (1..N; 0 is golden);
    ``module_bodies`` are the byte offsets just after each module header's ``;`` where the
    selector declaration goes (every module of the file, so nested instances see one too).
    ``probes`` (:func:`hwtp.mutators.probes.plan`) adds the activation probes; without them the
    text is the plain schemata.
    """
    data = text.encode("utf-8")
    roots = _regions(mutants, probes)
    renderer = _Renderer(data)
    inserts = [
        (cut, selector_declaration() + (probes.declarations(cut) if probes else ""))
        for cut in sorted(set(module_bodies))
    ]
    if probes:
        inserts = sorted(
            [*inserts, *((at, "\n".join(wires)) for at, wires in probes.after.items())], key=lambda item: item[0]
        )
    pieces, pos = [], 0
    for region in roots:
        while inserts and inserts[0][0] <= region.lo:
            cut, extra = inserts.pop(0)
            pieces.append(data[pos:cut].decode("utf-8") + extra)
            pos = cut
        if any(region.lo < cut < region.hi for cut, _ in inserts):
            raise SchemataError(f"a probe would go inside the guard at byte {region.lo}", [])
        pieces.append(data[pos : region.lo].decode("utf-8"))
        pieces.append(renderer.region(region))
        pos = region.hi
    for cut, extra in inserts:
        pieces.append(data[pos:cut].decode("utf-8") + extra)
        pos = cut
    pieces.append(data[pos:].decode("utf-8"))
    return "".join(pieces)
