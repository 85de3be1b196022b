"""``hwtp mutate``: pick mutation sites, validate the mutants, classify them.

Selection spreads over operator families and source lines (seeded); tree mutation mutates
valid mutants again; equivalent variants come from semantics-preserving operators; every
candidate is linted by the simulator backend and duplicates are rejected; killability comes from the
witness search (:mod:`hwtp.mutators.witness`). The records and the mutant directory live in
:mod:`hwtp.mutators.mutantset` (re-exported here).
"""

from __future__ import annotations

import logging
import random
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyslang

from hwtp.errors import MutantError
from hwtp.mutators.formal import yosys as formal_yosys
from hwtp.mutators.formal.classify import FormalConfig
from hwtp.mutators.formal.classify import check as formal_check
from hwtp.mutators.formal.miter import Bounds
from hwtp.mutators.gitlines import changed_lines
from hwtp.mutators.mutantset import (
    NONTERMINATING,
    Mutant,
    MutantClass,
    MutantSet,
    MutantStatus,
    schemata_parts,
    schemata_sources,
)
from hwtp.mutators.operators import select
from hwtp.mutators.schemata import standalone
from hwtp.mutators.site import Site
from hwtp.mutators.sites import FRONTENDS, site_finder
from hwtp.mutators.witness import Search, WitnessConfig, find_witnesses
from hwtp.plans.format import Plan
from hwtp.rtl.design import Design, SourceFile
from hwtp.rtl.frontend import parse
from hwtp.sim import procs
from hwtp.sim.backends import DEFAULT_BACKEND, NO_OPTIONS, BuildOptions, get_backend
from hwtp.sim.executors.base import schemata_targets

log = logging.getLogger("hwtp.mutators.engine")

#: ``--formal``: off; auto (the witness search's unknowns, when Yosys is installed); unknown
#: (the same, Yosys required); all (every valid mutant, killable ones included).
FORMAL_MODES = ("off", "auto", "unknown", "all")


@dataclass(frozen=True)
class MutationConfig:
    """What ``hwtp mutate`` does; every field is a CLI option."""

    n: int | None = 32  # how many mutants (None: every site)
    operators: tuple[str, ...] = ()  # families or names; empty: all bug-injecting ones
    seed: int = 0
    lines: tuple[int, int] | None = None  # only sites on these lines (inclusive)
    since: str | None = None  # only sites on lines changed since this git revision
    include_widths: bool = False
    frontend: str = FRONTENDS[0]  # the parser that finds sites: pyslang, or pyverilog (hwtp[pyverilog])
    jobs: int = 2
    depth: int = 1  # >1: higher-order mutants, mutating mutants
    branching: int = 2  # children per mutant at each extra level
    equivalents: int = 0  # semantics-preserving variants of golden to add
    witness_cycles: int = 2000  # witness-search budget per mutant (0: skip)
    eval_timeout: float = 3.0  # wall-clock s per witness evaluation; over it: non-terminating
    witness_timeout: float = 300.0  # wall-clock s for a whole witness search
    prefer_killable: bool = True  # over-sample 2x and keep provably killable mutants first
    simulator: str = DEFAULT_BACKEND  # the backend that lints every candidate (the one that will build them)
    build: BuildOptions = NO_OPTIONS  # the design's own include folders, defines, parameters: for parse and lint
    formal: str = "off"  # Yosys miter: off | auto (unknowns, when Yosys is installed) | unknown | all (--formal)
    formal_depth: int = 20  # bounded-check cycles after reset (--formal-depth)
    formal_timeout: float = 10.0  # CPU s per mutant for the formal check (--formal-timeout)

    def __post_init__(self) -> None:
        if self.n is not None and self.n < 1:
            raise MutantError("-n must be at least 1 (or 0 for every site)")
        if not 1 <= self.depth <= 4:
            raise MutantError("--depth must be from 1 to 4")
        if self.branching < 1 or self.equivalents < 0 or self.witness_cycles < 0:
            raise MutantError("--branching must be >= 1; --equivalents and --witness-cycles >= 0")
        if not (self.eval_timeout > 0 and self.witness_timeout > 0):
            raise MutantError("--eval-timeout and --witness-timeout must be positive numbers of seconds")
        if self.formal not in FORMAL_MODES:
            raise MutantError(f"--formal {self.formal!r}: expected one of {', '.join(FORMAL_MODES)}")
        if self.formal_depth < 1 or not self.formal_timeout > 0:
            raise MutantError("--formal-depth must be >= 1 and --formal-timeout a positive number of seconds")
        if self.frontend not in FRONTENDS:
            raise MutantError(f"--frontend {self.frontend!r}: expected one of {', '.join(FRONTENDS)}")


def _find(design: Design, config: MutationConfig, operators: tuple[str, ...] | None = None) -> list[Site]:
    find_sites = site_finder(config.frontend)
    names = config.operators if operators is None else operators
    chosen = select(names) if names else None
    sites: list[Site] = []
    for src in design.sources:
        found = find_sites(src.text, src.path, operators=chosen, include_widths=config.include_widths,
                           options=config.build)
        if not names:
            found = [s for s in found if not s.equivalent]
        if config.lines:
            lo, hi = config.lines
            found = [s for s in found if lo <= s.line <= hi]
        if config.since:
            keep = changed_lines(design.root / src.path, config.since)
            found = [s for s in found if s.line in keep]
        sites.extend(found)
    return sites


def select_sites(sites: Sequence[Site], n: int | None, seed: int) -> list[Site]:
    """Pick ``n`` sites spread across operator families and source lines (seeded).

    Round-robin over families; inside a family, round-robin over lines; the order inside
    each bucket is shuffled with ``seed``.
    """
    if n is None or n >= len(sites):
        return sorted(sites)
    rng = random.Random(seed)
    by_family: dict[str, dict[tuple[str, int], list[Site]]] = defaultdict(lambda: defaultdict(list))
    for site in sorted(sites):
        by_family[site.operator.split(".")[0]][(site.file, site.line)].append(site)
    queues = []
    for family in sorted(by_family):
        lines = list(by_family[family].values())
        for bucket in lines:
            rng.shuffle(bucket)
        rng.shuffle(lines)
        order = [bucket[i] for i in range(max(map(len, lines))) for bucket in lines if i < len(bucket)]
        queues.append(order)
    rng.shuffle(queues)
    picked: list[Site] = []
    while len(picked) < n:
        for queue in queues:
            if queue and len(picked) < n:
                picked.append(queue.pop(0))
    return sorted(picked)


def _lint(design: Design, sources: Sequence[SourceFile], config: MutationConfig) -> str | None:
    """None when the simulator accepts the sources (width warnings not fatal), else the reason."""
    return get_backend(config.simulator).lint(sources, design.top, config.build)


def _lint_together(design: Design, candidates: list[Mutant], config: MutationConfig) -> list[Mutant]:
    """The candidates the simulator may refuse: every candidate is linted through the schemata
    builds it would share (one lint per build, ``config.jobs`` at once), and those of a build
    that fails (or all, when they cannot share the builds) are the ones returned.

    The schemata holds each candidate's code exactly as its standalone source has it, so one
    lint vouches for all the candidates of its build; :func:`_validate` lints each candidate
    returned here on its own to find which ones fail and why.
    """
    numbered = [replace(m, index=i, status=MutantStatus.VALID) for i, m in enumerate(candidates, start=1)]
    staged = MutantSet(design, 0, tuple(numbered))
    try:
        _, excluded = schemata_sources(staged)
        parts = schemata_parts(staged)
    except ValueError:
        return candidates
    if excluded:
        return candidates
    reasons = procs.map_threads(lambda part: _lint(design, part.sources, config), list(parts), config.jobs)
    refused = {i for part, reason in zip(parts, reasons, strict=True) if reason for i in part.indices}
    return [m for m, n in zip(candidates, numbered, strict=True) if n.index in refused]


def _keeps_shape(design: Design, site: Site, options: BuildOptions) -> bool:
    """True when the standalone text still parses as an expression exactly over the mutated
    guard span. A token swap across precedence levels (``a ^ b ^ c`` -> ``a | b ^ c``)
    re-parses as a different tree: the schemata would then simulate another mutant than the
    source a policy is shown, so such a candidate is rejected."""
    if site.guard != "expr":
        return True
    text = standalone(design.source(site.file).text, [site])
    delta = len(site.standalone.encode()) - len(site.original.encode())
    want = (site.guard_start, site.guard_end + delta)
    _manager, (tree,) = parse([SourceFile(site.file, text)], options)
    found = False

    inner = want[0] < site.start and site.end + delta < want[1]  # an operator token inside the guard

    def visit(node: Any) -> None:
        nonlocal found
        if found or not isinstance(node, pyslang.syntax.ExpressionSyntax):
            return
        r = node.sourceRange
        if (r.start.offset, r.end.offset) != want:
            return
        if inner and isinstance(node, pyslang.syntax.BinaryExpressionSyntax):
            # the edited token must be this expression's operator, not one of its operands'
            found = node.operatorToken.location.offset == site.start
        else:
            found = True

    tree.root.visit(visit)
    return found


def _validate(design: Design, candidates: list[Mutant], config: MutationConfig) -> list[Mutant]:
    """Reject duplicates (same text as golden or an earlier mutant) and what does not compile."""
    texts: dict[tuple[str, ...], str] = {tuple(s.text for s in design.sources): "golden"}
    staged = MutantSet(design, 0, tuple(candidates))
    to_lint: list[Mutant] = []
    out: dict[str, Mutant] = {}
    for m in candidates:
        key = tuple(s.text for s in staged.sources_of(m))
        if not all(_keeps_shape(design, s, config.build) for s in m.sites):
            out[m.id] = replace(
                m,
                status=MutantStatus.REJECTED,
                reason="operator precedence: the standalone text parses as a different expression than the mutation",
            )
        elif key in texts:
            out[m.id] = replace(m, status=MutantStatus.REJECTED, reason=f"duplicate of {texts[key]}")
        else:
            texts[key] = m.id
            to_lint.append(m)
    suspects = _lint_together(design, to_lint, config) if to_lint else []
    reasons = procs.map_threads(lambda m: _lint(design, staged.sources_of(m), config), suspects, config.jobs)
    refused = {m.id: reason for m, reason in zip(suspects, reasons, strict=True) if reason}
    for m in to_lint:
        reason = refused.get(m.id)
        out[m.id] = replace(m, status=MutantStatus.REJECTED, reason=f"does not compile: {reason}") if reason else m
    return [out[m.id] for m in candidates]


def _record(
    number: int, sites: tuple[Site, ...], parents: tuple[str, ...] = (), klass: MutantClass = MutantClass.UNKNOWN
) -> Mutant:
    last = sites[-1]
    return Mutant(
        id=f"m{number:04d}",
        operator=last.operator,
        file=last.file,
        line=last.line,
        col=last.col,
        original=last.original,
        replacement=last.standalone,
        parents=parents,
        klass=klass,
        start=last.start,
        end=last.end,
        sites=sites,
    )


def _disjoint(site: Site, others: tuple[Site, ...]) -> bool:
    return all(
        site.file != o.file or site.guard_start >= o.guard_end or site.guard_end <= o.guard_start for o in others
    )


def _children(parents: list[Mutant], pool: list[Site], config: MutationConfig, next_number: int) -> list[Mutant]:
    """Higher-order mutants: each parent mutated again at ``branching`` other places."""
    rng = random.Random(config.seed * 7919 + next_number)
    out = []
    for parent in parents:
        options = [s for s in pool if _disjoint(s, parent.sites)]
        rng.shuffle(options)
        for site in sorted(options[: config.branching]):
            out.append(_record(next_number, (*parent.sites, site), parents=(parent.id,)))
            next_number += 1
    return out


def mutate(design: Design, config: MutationConfig) -> MutantSet:
    """Find, select, validate and classify mutants of ``design`` (no files written).

    With a witness search and ``-n``, twice as many first-order candidates are validated and
    classified, and N of them are kept, spread over families and lines as usual but
    provably killable ones first: a mutant no plan can tell from golden is a wasted state
    for training and noise for CI. ``unknown`` ones only fill up when killable ones run out.
    """
    pool = _find(design, config)
    oversample = bool(config.witness_cycles and config.n is not None and config.prefer_killable)
    first = select_sites(pool, config.n * 2 if oversample and config.n else config.n, config.seed)
    checked = _validate(design, [_record(i, (s,)) for i, s in enumerate(first, start=1)], config)
    witnesses: dict[str, Plan] = {}
    spares: tuple[Mutant, ...] = ()
    searched: set[str] = set()
    if oversample and _chooses(checked, config):  # the chosen keep the candidates' selector values
        checked, spares, witnesses = _keep_killable_first(design, config, checked)
        searched = {m.id for m in checked if m.status == MutantStatus.VALID}
    level = [m for m in checked if m.status == MutantStatus.VALID]
    for _ in range(config.depth - 1):
        children = _validate(design, _children(level, pool, config, len(checked) + 1), config)
        checked += children
        level = [m for m in children if m.status == MutantStatus.VALID]
    if config.equivalents:
        eq_sites = select_sites(_find(design, config, ("equivalent",)), config.equivalents, config.seed)
        eq = [_record(len(checked) + i, (s,), klass=MutantClass.EQUIVALENT) for i, s in enumerate(eq_sites, start=1)]
        checked += _validate(design, eq, config)
    if config.include_widths:
        checked = _reject_width_sites(design, config, checked)
    result = _number(design, config.seed, checked, spares)
    _, excluded = schemata_sources(result)
    if excluded:
        result = _number(
            design,
            config.seed,
            [
                replace(m, status=MutantStatus.REJECTED, index=0, reason="cannot share the schemata build")
                if m.id in excluded
                else m
                for m in result.mutants
            ],
            spares,
        )
    if config.witness_cycles or config.formal != "off":
        result = classify(result, config, witnesses, searched)
    return result


def _chooses(candidates: list[Mutant], config: MutationConfig) -> bool:
    """Whether killable-first selection has a choice to make: more valid candidates than ``-n``.
    When every valid candidate is kept anyway (``-n 512`` of a design with 170 sites), classifying
    them on their own would only build and search them twice: the classification of the final
    set (its builds, one witness search, the formal check of its unknowns) classifies them alike."""
    assert config.n is not None
    return sum(1 for m in candidates if m.status == MutantStatus.VALID) > config.n


def _keep_killable_first(
    design: Design, config: MutationConfig, candidates: list[Mutant]
) -> tuple[list[Mutant], tuple[Mutant, ...], dict[str, Plan]]:
    """Classify the over-sampled candidates in one schemata build; keep N valid ones,
    killable first, renamed ``m0001``... with the selector values they have in that build.
    Returns them (and the rejected candidates), the spares (valid candidates not chosen,
    which stay in the schemata so the build is the same) and the chosen ones' witnesses.

    The formal check (seconds per mutant, up to its time limit) runs on the candidates only
    when the witness search found fewer than N killable ones: otherwise the unknowns would
    only become spares, and checking them is wasted time (on fifo_sync: 8 unknown spares,
    80 of the 90 s of ``hwtp mutate -n 32``). ``--formal all`` then checks the N chosen."""
    assert config.n is not None
    staged = classify(_number(design, config.seed, candidates), replace(config, formal="off"))
    killable = [m.sites[0] for m in staged.valid if m.klass == MutantClass.KILLABLE]
    if config.formal != "off" and len(killable) < config.n:
        staged = _with_formal_verdicts(staged, config)
        killable = [m.sites[0] for m in staged.valid if m.klass == MutantClass.KILLABLE]
    by_site = {m.sites[0]: m for m in staged.mutants}
    proved = {m.sites[0] for m in staged.valid if m.proved_equivalent}
    others = [m.sites[0] for m in staged.valid
              if m.klass not in (MutantClass.KILLABLE, NONTERMINATING) and m.sites[0] not in proved]
    hung = [m.sites[0] for m in staged.valid if m.klass == NONTERMINATING]
    chosen = select_sites(killable, config.n, config.seed)
    for rest in (others, hung, sorted(proved)):  # unknown ones fill up first; then non-terminating, proved equivalent
        chosen += select_sites(rest, config.n - len(chosen), config.seed) if len(chosen) < config.n else []
    rejected = [m.sites[0] for m in staged.mutants if m.status != MutantStatus.VALID]
    kept: list[Mutant] = []
    witnesses: dict[str, Plan] = {}
    for number, site in enumerate(sorted([*chosen, *rejected]), start=1):
        old = by_site[site]
        new = replace(old, id=f"m{number:04d}")
        kept.append(new)
        if old.id in staged.witnesses:
            witnesses[new.id] = rename_witness(staged.witnesses[old.id], new.id)
    taken = set(chosen)
    spares = tuple(
        replace(m, id=f"spare{m.index:04d}", status=MutantStatus.SPARE) for m in staged.valid if m.sites[0] not in taken
    )
    return kept, spares, witnesses


def _reject_width_sites(design: Design, config: MutationConfig, mutants: list[Mutant]) -> list[Mutant]:
    """Sites that size declarations cannot be selected at run time: keep them out of the build."""
    plain = replace(config, include_widths=False)
    runtime = set(_find(design, plain)) | set(_find(design, plain, ("equivalent",)))
    return [
        replace(
            m, status=MutantStatus.REJECTED, reason="sizes a declaration: a schemata build cannot select it at run time"
        )
        if m.status == MutantStatus.VALID and any(s not in runtime for s in m.sites)
        else m
        for m in mutants
    ]


def _number(
    design: Design, seed: int, mutants: list[Mutant] | tuple[Mutant, ...], spares: tuple[Mutant, ...] = ()
) -> MutantSet:
    """Give valid mutants selector values 1..N in id order (rejected ones 0).

    With ``spares`` (a set made by killable-first selection) the values of that selection's
    build are kept: a valid mutant that has one keeps it, and the others (higher-order
    mutants, equivalents) get values after the largest in use."""
    if not spares:
        numbered, index = [], 0
        for m in mutants:
            if m.status == MutantStatus.VALID:
                index += 1
            numbered.append(replace(m, index=index if m.status == MutantStatus.VALID else 0))
        return MutantSet(design, seed, tuple(numbered))
    index = max((m.index for m in (*mutants, *spares)), default=0)
    out = []
    for m in mutants:
        if m.status != MutantStatus.VALID:
            m = replace(m, index=0)
        elif not m.index:
            index += 1
            m = replace(m, index=index)
        out.append(m)
    return MutantSet(design, seed, tuple(out), spares=spares)


def classify(
    mutant_set: MutantSet,
    config: MutationConfig,
    known: dict[str, Plan] | None = None,
    searched: Collection[str] = (),
) -> MutantSet:
    """Search witnesses: killable mutants get one; an 'equivalent' with a witness is rejected;
    a mutant whose evaluation exceeds ``config.eval_timeout`` is ``nonterminating`` (with the
    reason; kept out of training states by default).

    ``known`` witnesses (by mutant id) are kept, and their mutants, like those already
    classified non-terminating and the ``searched`` ones (classified in an earlier search of
    the same build), are not searched again. With ``config.formal`` the Yosys miter then
    classifies what the search left unknown (:func:`_classify_formally`); with
    ``witness_cycles`` 0 it is the only search.
    """
    known = dict(known or {})
    targets = [
        (m.id, m.index)
        for m in mutant_set.valid
        if m.id not in known and m.id not in searched and m.klass != NONTERMINATING
    ]
    witness_config = WitnessConfig(
        cycles=config.witness_cycles,
        seed=config.seed,
        jobs=config.jobs,
        eval_s=config.eval_timeout,
        total_s=config.witness_timeout,
    )
    found = dict(known)
    hung: dict[str, str] = {}
    if targets and config.witness_cycles:
        search = _search(mutant_set, targets, witness_config)
        found.update(search.witnesses)
        hung = search.hung
        if search.unsearched:
            log.warning(
                "witness search stopped after its budget of %g s: %d mutant(s) not searched (they stay unknown)",
                config.witness_timeout,
                search.unsearched,
            )
    out = []
    for m in mutant_set.mutants:
        if m.id in hung and m.klass == MutantClass.EQUIVALENT:
            m = replace(m, status=MutantStatus.REJECTED, reason=f"not equivalent: it does not terminate ({hung[m.id]})")
        elif m.id in hung:
            m = replace(m, klass=NONTERMINATING, reason=hung[m.id])
        elif m.id in found and m.klass == MutantClass.EQUIVALENT:
            m = replace(m, status=MutantStatus.REJECTED, reason="not equivalent: a witness tells it from golden")
        elif m.id in found:
            m = replace(m, klass=MutantClass.KILLABLE)
        out.append(m)
    numbered = replace(_number(mutant_set.design, mutant_set.seed, out, mutant_set.spares), witnesses=found)
    if config.formal != "off":
        return _with_formal_verdicts(numbered, config)
    return _keep_valid_witnesses(numbered)


def _search(mutant_set: MutantSet, targets: list[tuple[str, int]], config: WitnessConfig) -> Search:
    """The witness search of ``targets`` (id, selector value), each in the schemata build that
    holds it, all within one budget of ``config.total_s`` (the builds, made first, not counted)."""
    return find_witnesses(schemata_targets(mutant_set), targets, config)


def _keep_valid_witnesses(mutant_set: MutantSet) -> MutantSet:
    kept = {m.id for m in mutant_set.valid}
    return replace(mutant_set, witnesses={k: v for k, v in mutant_set.witnesses.items() if k in kept})


def _with_formal_verdicts(mutant_set: MutantSet, config: MutationConfig) -> MutantSet:
    """``mutant_set`` (its witnesses included) after :func:`_classify_formally`."""
    checked, found = _classify_formally(mutant_set, config, dict(mutant_set.witnesses))
    return _keep_valid_witnesses(replace(checked, witnesses=found))


def _classify_formally(
    mutant_set: MutantSet, config: MutationConfig, found: dict[str, Plan]
) -> tuple[MutantSet, dict[str, Plan]]:
    """The Yosys miter (:mod:`hwtp.mutators.formal`) on the mutants the witness search left
    ``unknown`` (``--formal all``: every valid mutant not yet checked): proved equivalent,
    killable with a confirmed counterexample as witness, or unknown with the reason, each with
    its proof record. An ``equivalent``-by-construction mutant with a counterexample is
    rejected, as a witness rejects it."""
    if config.formal == "auto" and formal_yosys.find() is None:
        log.info("formal classification skipped: Yosys is not installed (apt-get install yosys)")
        return mutant_set, found
    formal_yosys.require()  # --formal unknown|all: Yosys is required
    everything = config.formal == "all"
    targets = [
        m
        for m in mutant_set.valid
        if m.proof is None and m.klass != NONTERMINATING and (everything or m.klass == MutantClass.UNKNOWN)
    ]
    verdicts = formal_check(
        mutant_set,
        targets,
        FormalConfig(
            Bounds(depth=config.formal_depth, timeout_s=config.formal_timeout),
            jobs=config.jobs,
            eval_s=max(config.eval_timeout, FormalConfig.eval_s),  # the replay's wall clock is a backstop
            build=config.build,
            simulator=config.simulator,
        ),
    )
    found = dict(found)
    out = []
    for m in mutant_set.mutants:
        verdict = verdicts.get(m.id)
        if verdict is None:
            out.append(m)
            continue
        if verdict.klass == MutantClass.KILLABLE and m.klass == MutantClass.EQUIVALENT:
            reason = "not equivalent: a formal counterexample tells it from golden"
            m = replace(m, status=MutantStatus.REJECTED, reason=reason)
        elif verdict.klass == MutantClass.KILLABLE:
            if m.id not in found and verdict.witness is not None:
                found[m.id] = rename_witness(verdict.witness, m.id)
            m = replace(m, klass=MutantClass.KILLABLE)
        elif verdict.klass == MutantClass.EQUIVALENT and m.klass == MutantClass.KILLABLE:
            log.warning("%s: proved equivalent by Yosys but a witness tells it apart: kept killable", m.id)
        elif verdict.klass == MutantClass.EQUIVALENT:
            m = replace(m, klass=MutantClass.EQUIVALENT)
        out.append(replace(m, proof=verdict.proof))
    return _number(mutant_set.design, mutant_set.seed, out, mutant_set.spares), found


def rename_witness(plan: Plan, mutant_id: str) -> Plan:
    """The same witness, named after ``mutant_id``."""
    test = plan.tests[0]
    description = f"witness for {mutant_id}: " + test.description.split(": ", 1)[-1]
    return replace(
        plan,
        tests=(replace(test, name=f"witness_{mutant_id}", description=description),),
        source=f"witness {mutant_id}",
    )
