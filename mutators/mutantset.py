"""Mutant sets: the records of mutants.json and the mutant directory on disk.

A mutant directory is self-contained: ``golden/`` holds a copy of the design (manifest,
spec, sources), ``schemata/`` the schemata sources, ``witnesses/`` one plan per killable
mutant, ``diffs/`` one unified diff per mutant and ``mutants.json`` the records (docs/formats.md
and docs/how-to/mutants.md). :mod:`hwtp.mutators.engine` makes them.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from hwtp import env, yamlio
from hwtp.errors import ConfigError, MutantError
from hwtp.mutators import probes
from hwtp.mutators.schemata import SELECTOR, SchemataError, render, standalone
from hwtp.mutators.site import Site
from hwtp.outputs import Staged, staged
from hwtp.plans.format import Plan, load_plan_file, to_data
from hwtp.rtl.design import MANIFEST, Design, SourceFile, load_design
from hwtp.rtl.frontend import module_body_offsets

MUTANTS_JSON = "mutants.json"
#: The state of the unmutated design (selector value 0); every other state is a mutant id.
GOLDEN = "golden"


class MutantStatus(str, Enum):
    """Whether a mutant is in the set (str-valued: mutants.json holds the value)."""

    VALID = "valid"  # compiles, distinct: a state of the set
    REJECTED = "rejected"  # left out, with the reason in ``Mutant.reason``
    SPARE = "spare"  # a validated candidate that killable-first selection did not choose (``MutantSet.spares``)


class MutantClass(str, Enum):
    """What the witness search proved about a mutant (str-valued: mutants.json's ``class``)."""

    UNKNOWN = "unknown"  # not told apart from golden within the search budget (nor by the formal check)
    KILLABLE = "killable"  # a witness plan tells it from golden
    EQUIVALENT = "equivalent"  # semantics-preserving by construction, or proved by Yosys (``Mutant.proof``)
    NONTERMINATING = "nonterminating"  # its evaluation never ends within its budget (reason in ``Mutant.reason``)


#: What a mutant id may be (``m0001``, ``spare0003``): a file name on every platform, since
#: ``hwtp plan`` and ``hwtp score`` name folders and files after it; never ``golden``.
_MUTANT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")

#: Class of a mutant whose evaluation never ends within its budget (reason in ``Mutant.reason``).
NONTERMINATING = MutantClass.NONTERMINATING


@dataclass(frozen=True)
class Mutant:
    """One mutant record of mutants.json."""

    id: str
    operator: str
    file: str
    line: int
    col: int
    original: str
    replacement: str
    parents: tuple[str, ...] = ()
    status: MutantStatus = MutantStatus.VALID
    klass: MutantClass = MutantClass.UNKNOWN
    reason: str | None = None
    index: int = 0  # selector value in the schemata build (0 = none)
    start: int = 0
    end: int = 0
    sites: tuple[Site, ...] = field(default=(), compare=False)
    #: The formal check's record (hwtp.mutators.formal): method (sat, k-induction, bmc, none), depth,
    #: seconds, tool, and the reason when it stayed unknown. None: not checked formally.
    proof: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def proved_equivalent(self) -> bool:
        """Proved equivalent to golden by the formal check: never a training state."""
        return self.klass == MutantClass.EQUIVALENT and self.proof is not None

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("sites")
        if self.proof is None:  # sets never checked formally keep their bytes (and hashes)
            data.pop("proof")
        else:  # how long a proof took is timing, not content: the same set made twice is the same bytes
            data["proof"] = {k: v for k, v in self.proof.items() if k != "seconds"}
        data["status"] = self.status.value
        data["class"] = data.pop("klass").value
        data["parents"] = list(self.parents)
        data["edits"] = [
            {
                "file": s.file,
                "start": s.start,
                "end": s.end,
                "operator": s.operator,
                "original": s.original,
                "replacement": s.replacement,
                "guard_start": s.guard_start,
                "guard_end": s.guard_end,
                "guard": s.guard,
                "line": s.line,
                "col": s.col,
            }
            for s in self.sites
        ]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Mutant:
        sites = tuple(Site(**e) for e in data.get("edits", ()))
        fields = {k: v for k, v in data.items() if k not in ("edits", "class")}
        fields["parents"] = tuple(fields.get("parents", ()))
        fields["status"] = MutantStatus(fields.get("status", MutantStatus.VALID))
        return cls(**fields, klass=MutantClass(data.get("class", MutantClass.UNKNOWN)), sites=sites)


@dataclass(frozen=True)
class MutantSet:
    """The contents of a mutant directory.

    ``spares``: candidates that killable-first selection validated and searched in its
    schemata build but did not choose. They are never states; they stay in the schemata
    with their selector values, so the chosen mutants keep theirs and every later build of
    the set (scoring, ``hwtp ci``) is the selection's build, not a second one.
    """

    design: Design
    seed: int
    mutants: tuple[Mutant, ...]
    root: Path | None = None
    witnesses: dict[str, Plan] = field(default_factory=dict, compare=False)
    spares: tuple[Mutant, ...] = ()

    @functools.cached_property
    def valid(self) -> tuple[Mutant, ...]:
        """The mutants that compile and differ from golden (kept: the record is immutable)."""
        return tuple(m for m in self.mutants if m.status == MutantStatus.VALID)

    @functools.cached_property
    def set_hash(self) -> str:
        """Content hash of the set (design + mutants), for exports, plans' identity and caches:
        computed once per record (the record is immutable)."""
        payload = json.dumps(self.as_json(), sort_keys=True).encode()
        return hashlib.sha256(payload).hexdigest()

    @functools.cached_property
    def states(self) -> tuple[Mutant, ...]:
        """The valid mutants that make default states for planning, scoring and training:
        all but the non-terminating ones (every evaluation on them would only time out) and
        the ones Yosys proved equivalent (no plan can detect them: the same reward for a
        perfect plan and a lazy one). Equivalents added on purpose (``--equivalents``, not
        checked formally) stay: scoring caps their reward."""
        return tuple(m for m in self.valid if m.klass != NONTERMINATING and not m.proved_equivalent)

    @property
    def proved_equivalent(self) -> tuple[Mutant, ...]:
        return tuple(m for m in self.valid if m.proved_equivalent)

    @property
    def nonterminating(self) -> tuple[Mutant, ...]:
        return tuple(m for m in self.valid if m.klass == NONTERMINATING)

    def select(self, wanted: Sequence[str] | None = None) -> list[tuple[str, int]]:
        """(state id, selector value) of the states ``wanted`` (golden or valid mutants, by id,
        in that order); ``None``: golden and the default :attr:`states` (a non-terminating or
        proved-equivalent mutant only when asked for by id)."""
        if wanted is None:
            return [(GOLDEN, 0), *((m.id, m.index) for m in self.states)]
        valid = {m.id: m.index for m in self.valid}
        unknown = [s for s in wanted if s != GOLDEN and s not in valid]
        if unknown:
            known = ", ".join([GOLDEN, *valid]) if len(valid) < 12 else f"{GOLDEN}, {len(valid)} valid mutants"
            raise ConfigError(f"--states: unknown or invalid state(s) {', '.join(map(repr, unknown))} (valid: {known})")
        return [(s, 0 if s == GOLDEN else valid[s]) for s in wanted]

    def get(self, mutant_id: str) -> Mutant:
        for m in self.mutants:
            if m.id == mutant_id:
                return m
        raise MutantError(
            f"no mutant {mutant_id!r} (ids: {self.mutants[0].id}..{self.mutants[-1].id})"
            if self.mutants
            else f"no mutant {mutant_id!r}: the set is empty"
        )

    def sources_of(self, mutant: Mutant) -> tuple[SourceFile, ...]:
        """The standalone sources of ``mutant`` (golden files with its edits applied)."""
        out = []
        for src in self.design.sources:
            edits = [s for s in mutant.sites if s.file == src.path]
            out.append(SourceFile(src.path, standalone(src.text, edits)) if edits else src)
        return tuple(out)

    def diff(self, mutant: Mutant) -> str:
        chunks: list[str] = []
        for golden, mutated in zip(self.design.sources, self.sources_of(mutant), strict=True):
            if golden.text != mutated.text:
                chunks.extend(
                    difflib.unified_diff(
                        golden.text.splitlines(keepends=True),
                        mutated.text.splitlines(keepends=True),
                        fromfile=f"a/{golden.path}",
                        tofile=f"b/{golden.path}",
                    )
                )
        return "".join(chunks)

    def as_json(self) -> dict[str, Any]:
        data = {
            "design": self.design.name,
            "design_hash": self.design.content_hash,
            "seed": self.seed,
            "mutants": [m.as_json() for m in self.mutants],
        }
        if self.spares:  # only sets made by killable-first selection have them
            data["spares"] = [m.as_json() for m in self.spares]
        return data


def _schemata(mutant_set: MutantSet) -> tuple[tuple[SourceFile, ...], list[str], list[Mutant]]:
    valid = sorted([*(m for m in mutant_set.valid if m.index), *mutant_set.spares], key=lambda m: m.index)
    excluded: list[str] = []
    while True:
        try:
            out = []
            for src in mutant_set.design.sources:
                pairs = [(m.index, s) for m in valid for s in m.sites if s.file == src.path]
                out.append(SourceFile(src.path, render(src.text, pairs, module_body_offsets(src.text, src.path))))
            return tuple(out), excluded, valid
        except SchemataError as exc:
            bad = {i for i in exc.indices}
            excluded.extend(m.id for m in valid if m.index in bad)
            valid = [m for m in valid if m.index not in bad]


def schemata_sources(mutant_set: MutantSet) -> tuple[tuple[SourceFile, ...], list[str]]:
    """Schemata sources of all the valid mutants in one text (and the spares, so selector values
    stay those of the selection's build), and the ids that could not share it. Builds use
    :func:`schemata_parts`: this one text can be too big for one build."""
    sources, excluded, _ = _schemata(mutant_set)
    return sources, excluded


#: Bounds of one schemata build (:func:`schemata_parts`): mutants, and bytes of generated text
#: (each mutant counts the bytes its guards copy, plus the guard itself). Beyond them a set
#: gets several builds: one build's C++ and compile memory grow faster than its text. Each
#: build is also one more simulator start (~0.7 CPU-s) for every command that simulates the
#: set. Measured, ``hwtp mutate traffic_light -n 512 --depth 2`` (508 mutants, 100 KB): with
#: one build 94 CPU-s in all, its largest process 0.8 GB; with four of 128, 127 CPU-s.
MAX_PART_MUTANTS = 512
MAX_PART_BYTES = 256 * 1024
_GUARD_BYTES = 64  # the selector test and brackets around one copy


@dataclass(frozen=True)
class SchemataPart:
    """One schemata build of a mutant set: golden (selector 0) and the mutants with selector
    values ``indices``, each at the value it has in the set (so a state routes to the part that
    holds it, and every part simulates golden alike). ``coverage``: with probes, how each of
    its mutants' activation is measured."""

    indices: frozenset[int]
    sources: tuple[SourceFile, ...]
    coverage: dict[int, probes.Coverage] = field(default_factory=dict, compare=False)


def part_bounds() -> tuple[int, int]:
    """(mutants, bytes) of one schemata build: :data:`MAX_PART_MUTANTS` and
    :data:`MAX_PART_BYTES`, or ``$HWTP_SCHEMATA_PART`` (``MUTANTS`` or ``MUTANTS,BYTES``)."""
    raw = env.get(env.SCHEMATA_PART_VAR)
    if raw is None:
        return MAX_PART_MUTANTS, MAX_PART_BYTES
    try:
        numbers = [int(x) for x in raw.split(",")]
        if not 1 <= len(numbers) <= 2 or min(numbers) < 1:
            raise ValueError(raw)
    except ValueError:
        raise ConfigError(
            f"${env.SCHEMATA_PART_VAR}={raw!r}: expected MUTANTS or MUTANTS,BYTES (positive integers)"
        ) from None
    return numbers[0], numbers[1] if len(numbers) == 2 else MAX_PART_BYTES


def _cost(mutant: Mutant) -> int:
    return sum(s.guard_end - s.guard_start + _GUARD_BYTES for s in mutant.sites)


def _groups(valid: list[Mutant], bounds: tuple[int, int]) -> list[list[Mutant]]:
    """Consecutive runs of ``valid`` (selector order) within ``bounds``; a mutant over the byte
    bound alone gets a part of its own."""
    most, budget = bounds
    groups: list[list[Mutant]] = []
    used = 0
    for m in valid:
        cost = _cost(m)
        if not groups or len(groups[-1]) >= most or (groups[-1] and used + cost > budget):
            groups.append([])
            used = 0
        groups[-1].append(m)
        used += cost
    return groups or [[]]


def _rendered(mutant_set: MutantSet, group: Sequence[Mutant], with_probes: bool) -> SchemataPart:
    out: list[SourceFile] = []
    coverage: dict[int, probes.Coverage] = {}
    for src in mutant_set.design.sources:
        pairs = [(m.index, s) for m in group for s in m.sites if s.file == src.path]
        bodies = module_body_offsets(src.text, src.path)
        plain = render(src.text, pairs, bodies)
        if not with_probes:
            out.append(SourceFile(src.path, plain))
            continue
        found = probes.plan(src.text, src.path, pairs, bodies, SELECTOR)
        try:
            out.append(SourceFile(src.path, render(src.text, pairs, bodies, found)))
            found_coverage = found.coverage
        except SchemataError:
            out.append(SourceFile(src.path, plain))
            found_coverage = {
                i: probes.Coverage("none", f"the probes of {src.path} do not fit its schemata") for i, _ in pairs
            }
        for i, c in found_coverage.items():
            coverage[i] = coverage[i].merge(c) if i in coverage else c
    return SchemataPart(frozenset(m.index for m in group), tuple(out), coverage)


def schemata_parts(
    mutant_set: MutantSet, with_probes: bool = False, bounds: tuple[int, int] | None = None
) -> tuple[SchemataPart, ...]:
    """The schemata builds of a set: its valid mutants (and spares) in selector order, cut into
    runs within ``bounds`` (default :func:`part_bounds`), each rendered on its own; at least one
    part (golden alone when there are no mutants). Mutants that cannot share the one text of
    :func:`schemata_sources` are in none. ``with_probes``: with activation probes."""
    _plain, _excluded, valid = _schemata(mutant_set)
    return tuple(_rendered(mutant_set, g, with_probes) for g in _groups(valid, bounds or part_bounds()))


def part_of(parts: Sequence[SchemataPart], index: int) -> int:
    """The position of the part that simulates selector value ``index`` (golden: the first)."""
    if index:
        for i, part in enumerate(parts):
            if index in part.indices:
                return i
        raise MutantError(f"no schemata build holds selector value {index}")
    return 0


def probed_sources(mutant_set: MutantSet) -> tuple[tuple[SourceFile, ...], dict[int, probes.Coverage]]:
    """The schemata sources of all the valid mutants in one text with activation probes
    (:mod:`hwtp.mutators.probes`): the same mutants at the same selector values as
    :func:`schemata_sources`, and how each mutant index's activation is measured. A file whose
    probes do not fit its schemata keeps its plain schemata (its mutants are then not probed)."""
    (part,) = schemata_parts(mutant_set, with_probes=True, bounds=(1 << 62, 1 << 62))
    return part.sources, part.coverage


def write(mutant_set: MutantSet, outdir: Path) -> Path:
    """Write the mutant directory; returns the path of mutants.json. Its files are staged
    (:func:`hwtp.outputs.staged`): a write that fails (a full disk) names the file and leaves
    no half-written file and no ``mutants.json``."""
    with staged(sync=False) as files:
        return _write(mutant_set, outdir, files)


def _write(mutant_set: MutantSet, outdir: Path, files: Staged) -> Path:
    design = mutant_set.design
    outdir.mkdir(parents=True, exist_ok=True)
    golden = outdir / "golden"
    if golden.exists():
        shutil.rmtree(golden)
    for src in design.sources:
        (golden / src.path).parent.mkdir(parents=True, exist_ok=True)
        files.write_text(golden / src.path, src.text)
    files.write_text(golden / "spec.md", design.spec)
    manifest: dict[str, Any] = {
        "name": design.name,
        "top": design.top,
        "sources": [s.path for s in design.sources],
        "spec": "spec.md",
    }
    if design.clock:
        manifest["clock"] = {"port": design.clock.port, "period_ns": design.clock.period_ns}
    if design.reset:
        manifest["reset"] = {"port": design.reset.port, "active": design.reset.active, "cycles": design.reset.cycles}
    files.write_text(golden / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    parts = schemata_parts(mutant_set)
    if (outdir / "schemata").exists():
        shutil.rmtree(outdir / "schemata")
    for number, part in enumerate(parts, start=1):  # one build: schemata/FILE; several: schemata/N/FILE
        folder = outdir / "schemata" / (str(number) if len(parts) > 1 else "")
        for src in part.sources:
            (folder / src.path).parent.mkdir(parents=True, exist_ok=True)
            files.write_text(folder / src.path, src.text)
    witnesses = outdir / "witnesses"
    if witnesses.exists():
        shutil.rmtree(witnesses)
    if mutant_set.witnesses:
        witnesses.mkdir()
    for mid, plan in sorted(mutant_set.witnesses.items()):
        files.write_text(witnesses / f"{mid}.yaml", yamlio.dump(to_data(plan)))
    diffs = outdir / "diffs"
    if diffs.exists():
        shutil.rmtree(diffs)
    diffs.mkdir()
    for m in mutant_set.valid:
        files.write_text(diffs / f"{m.id}.diff", mutant_set.diff(m))
    path = outdir / MUTANTS_JSON
    files.write_text(path, json.dumps(mutant_set.as_json(), indent=2) + "\n")
    return path


def load(mutdir: Path) -> MutantSet:
    """Read a mutant directory written by :func:`write`."""
    path = mutdir / MUTANTS_JSON
    if not path.is_file():
        raise MutantError(f"{mutdir}: no {MUTANTS_JSON} (run `hwtp mutate DESIGN -o {mutdir}` first)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        design = load_design(mutdir / "golden")
        mutants = tuple(Mutant.from_json(m) for m in data["mutants"])
        spares = tuple(Mutant.from_json(m) for m in data.get("spares", ()))
    except (ValueError, KeyError, TypeError) as exc:
        raise MutantError(f"{path}: malformed: {exc}") from exc
    for key, group in (("mutants", mutants), ("spares", spares)):
        for i, m in enumerate(group):
            if not isinstance(m.id, str) or not _MUTANT_ID.match(m.id) or m.id == GOLDEN:
                raise MutantError(f"{path}: {key}[{i}].id: {m.id!r} is not a mutant id (letters, digits, _ and -, "
                                  f"as hwtp mutate writes them: m0001)")
    if data.get("design_hash") != design.content_hash:
        raise MutantError(f"{path}: design_hash does not match {mutdir / 'golden'} (edited by hand?)")
    witnesses = {p.stem: load_plan_file(p) for p in sorted((mutdir / "witnesses").glob("*.yaml"))}
    return MutantSet(design, int(data.get("seed", 0)), mutants, mutdir, witnesses, spares)


def set_hash(mutant_set: MutantSet) -> str:
    """Content hash of a mutant set (design + mutants): :attr:`MutantSet.set_hash`."""
    return mutant_set.set_hash
