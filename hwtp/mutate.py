"""``hwtp mutate``: pick mutation sites, validate the mutants, write the schemata and mutants.json.

The mutant directory is self-contained: ``golden/`` holds a copy of the design (manifest,
spec, sources), ``schemata/`` the schemata sources, ``diffs/`` one unified diff per mutant
and ``mutants.json`` the records (DESIGN.md, "Mutants").
"""

from __future__ import annotations

import difflib
import hashlib
import json
import random
import shutil
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from hwtp.design import MANIFEST, Design, SourceFile, load_design
from hwtp.errors import MutantError
from hwtp.gitlines import changed_lines
from hwtp.mutators.schemata import SchemataError, render, standalone
from hwtp.mutators.site import Site
from hwtp.plan import Plan, load_plan_file, to_data
from hwtp.rtl import module_body_offsets
from hwtp.sim import toolchain

MUTANTS_JSON = "mutants.json"


@dataclass(frozen=True)
class MutationConfig:
    """What ``hwtp mutate`` does; every field is a CLI option."""

    n: int | None = 32  # how many mutants (None: every site)
    operators: tuple[str, ...] = ()  # families or names; empty: all bug-injecting ones
    seed: int = 0
    lines: tuple[int, int] | None = None  # only sites on these lines (inclusive)
    since: str | None = None  # only sites on lines changed since this git revision
    include_widths: bool = False
    jobs: int = 2
    depth: int = 1  # >1: higher-order mutants, mutating mutants
    branching: int = 2  # children per mutant at each extra level
    equivalents: int = 0  # semantics-preserving variants of golden to add
    witness_cycles: int = 2000  # witness-search budget per mutant (0: skip)

    def __post_init__(self) -> None:
        if self.n is not None and self.n < 1:
            raise MutantError("-n must be at least 1 (or 0 for every site)")
        if not 1 <= self.depth <= 4:
            raise MutantError("--depth must be from 1 to 4")
        if self.branching < 1 or self.equivalents < 0 or self.witness_cycles < 0:
            raise MutantError("--branching must be >= 1; --equivalents and --witness-cycles >= 0")


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
    status: str = "valid"
    klass: str = "unknown"
    reason: str | None = None
    index: int = 0  # selector value in the schemata build (0 = none)
    start: int = 0
    end: int = 0
    sites: tuple[Site, ...] = field(default=(), compare=False)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("sites")
        data["class"] = data.pop("klass")
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
        return cls(**fields, klass=data.get("class", "unknown"), sites=sites)


@dataclass(frozen=True)
class MutantSet:
    """The contents of a mutant directory."""

    design: Design
    seed: int
    mutants: tuple[Mutant, ...]
    root: Path | None = None
    witnesses: dict[str, Plan] = field(default_factory=dict, compare=False)

    @property
    def valid(self) -> tuple[Mutant, ...]:
        return tuple(m for m in self.mutants if m.status == "valid")

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
        chunks = []
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
        return {
            "design": self.design.name,
            "design_hash": self.design.content_hash,
            "seed": self.seed,
            "mutants": [m.as_json() for m in self.mutants],
        }


def _find(design: Design, config: MutationConfig, operators: tuple[str, ...] | None = None) -> list[Site]:
    from hwtp.mutators.operators import select
    from hwtp.mutators.sites import find_sites

    names = config.operators if operators is None else operators
    chosen = select(names) if names else None
    sites: list[Site] = []
    for src in design.sources:
        found = find_sites(src.text, src.path, operators=chosen, include_widths=config.include_widths)
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


def _lint(design: Design, sources: Sequence[SourceFile]) -> str | None:
    """None when Verilator accepts the sources (width warnings not fatal), else the reason."""
    tool = toolchain.find_verilator()
    with tempfile.TemporaryDirectory(prefix="hwtp-lint-") as tmp:
        paths = []
        for src in sources:
            path = Path(tmp) / src.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(src.text, encoding="utf-8")
            paths.append(str(path))
        argv = [
            str(tool.executable),
            "--lint-only",
            "-Wno-fatal",
            "-Wno-lint",
            "-Wno-style",
            "--top-module",
            design.top,
            *paths,
        ]
        out = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            env=toolchain.simulator_environment(tool),
            cwd=tmp,
        )
    if out.returncode == 0:
        return None
    errors = [ln for ln in (out.stderr + out.stdout).splitlines() if "%Error" in ln]
    return (errors[0] if errors else "Verilator lint failed").replace(tmp + "/", "")


def _validate(design: Design, candidates: list[Mutant], jobs: int) -> list[Mutant]:
    texts: dict[tuple[str, ...], str] = {tuple(s.text for s in design.sources): "golden"}
    staged = MutantSet(design, 0, tuple(candidates))
    to_lint: list[Mutant] = []
    out: dict[str, Mutant] = {}
    for m in candidates:
        key = tuple(s.text for s in staged.sources_of(m))
        if key in texts:
            out[m.id] = replace(m, status="rejected", reason=f"duplicate of {texts[key]}")
        else:
            texts[key] = m.id
            to_lint.append(m)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        reasons = list(pool.map(lambda m: _lint(design, staged.sources_of(m)), to_lint))
    for m, reason in zip(to_lint, reasons, strict=True):
        out[m.id] = replace(m, status="rejected", reason=f"does not compile: {reason}") if reason else m
    return [out[m.id] for m in candidates]


def schemata_sources(mutant_set: MutantSet) -> tuple[tuple[SourceFile, ...], list[str]]:
    """Schemata sources of the valid mutants, and the ids that could not share the build."""
    valid = [m for m in mutant_set.valid if m.index]
    excluded: list[str] = []
    while True:
        try:
            out = []
            for src in mutant_set.design.sources:
                pairs = [(m.index, s) for m in valid for s in m.sites if s.file == src.path]
                out.append(SourceFile(src.path, render(src.text, pairs, module_body_offsets(src.text, src.path))))
            return tuple(out), excluded
        except SchemataError as exc:
            bad = {i for i in exc.indices}
            excluded.extend(m.id for m in valid if m.index in bad)
            valid = [m for m in valid if m.index not in bad]


def _record(number: int, sites: tuple[Site, ...], parents: tuple[str, ...] = (), klass: str = "unknown") -> Mutant:
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
    """Find, select, validate and classify mutants of ``design`` (no files written)."""
    pool = _find(design, config)
    first = [_record(i, (s,)) for i, s in enumerate(select_sites(pool, config.n, config.seed), start=1)]
    checked = _validate(design, first, config.jobs)
    level = [m for m in checked if m.status == "valid"]
    for _ in range(config.depth - 1):
        children = _validate(design, _children(level, pool, config, len(checked) + 1), config.jobs)
        checked += children
        level = [m for m in children if m.status == "valid"]
    if config.equivalents:
        eq_sites = select_sites(_find(design, config, ("equivalent",)), config.equivalents, config.seed)
        eq = [_record(len(checked) + i, (s,), klass="equivalent") for i, s in enumerate(eq_sites, start=1)]
        checked += _validate(design, eq, config.jobs)
    if config.include_widths:
        checked = _reject_width_sites(design, config, checked)
    result = _number(design, config.seed, checked)
    _, excluded = schemata_sources(result)
    if excluded:
        result = _number(
            design,
            config.seed,
            [
                replace(m, status="rejected", index=0, reason="cannot share the schemata build")
                if m.id in excluded
                else m
                for m in result.mutants
            ],
        )
    if config.witness_cycles:
        result = classify(result, config)
    return result


def _reject_width_sites(design: Design, config: MutationConfig, mutants: list[Mutant]) -> list[Mutant]:
    """Sites that size declarations cannot be selected at run time: keep them out of the build."""
    plain = replace(config, include_widths=False)
    runtime = set(_find(design, plain)) | set(_find(design, plain, ("equivalent",)))
    return [
        replace(m, status="rejected", reason="sizes a declaration: a schemata build cannot select it at run time")
        if m.status == "valid" and any(s not in runtime for s in m.sites)
        else m
        for m in mutants
    ]


def _number(design: Design, seed: int, mutants: list[Mutant] | tuple[Mutant, ...]) -> MutantSet:
    """Give valid mutants selector values 1..N in id order."""
    numbered, index = [], 0
    for m in mutants:
        if m.status == "valid":
            index += 1
        numbered.append(replace(m, index=index if m.status == "valid" else 0))
    return MutantSet(design, seed, tuple(numbered))


def classify(mutant_set: MutantSet, config: MutationConfig) -> MutantSet:
    """Search witnesses: killable mutants get one; an 'equivalent' with a witness is rejected."""
    from hwtp.witness import WitnessConfig, find_witnesses

    schemata, _ = schemata_sources(mutant_set)
    targets = [(m.id, m.index) for m in mutant_set.valid]
    if not targets:
        return mutant_set
    witness_config = WitnessConfig(cycles=config.witness_cycles, seed=config.seed, jobs=config.jobs)
    found = find_witnesses(mutant_set.design, schemata, targets, witness_config)
    out = []
    for m in mutant_set.mutants:
        if m.id in found and m.klass == "equivalent":
            m = replace(m, status="rejected", reason="not equivalent: a witness tells it from golden")
        elif m.id in found:
            m = replace(m, klass="killable")
        out.append(m)
    numbered = _number(mutant_set.design, mutant_set.seed, out)
    kept = {m.id for m in numbered.valid}
    return replace(numbered, witnesses={k: v for k, v in found.items() if k in kept})


def write(mutant_set: MutantSet, outdir: Path) -> Path:
    """Write the mutant directory; returns the path of mutants.json."""
    design = mutant_set.design
    outdir.mkdir(parents=True, exist_ok=True)
    golden = outdir / "golden"
    if golden.exists():
        shutil.rmtree(golden)
    for src in design.sources:
        (golden / src.path).parent.mkdir(parents=True, exist_ok=True)
        (golden / src.path).write_text(src.text, encoding="utf-8")
    (golden / "spec.md").write_text(design.spec, encoding="utf-8")
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
    (golden / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    schemata, _ = schemata_sources(mutant_set)
    for src in schemata:
        (outdir / "schemata" / src.path).parent.mkdir(parents=True, exist_ok=True)
        (outdir / "schemata" / src.path).write_text(src.text, encoding="utf-8")
    witnesses = outdir / "witnesses"
    if witnesses.exists():
        shutil.rmtree(witnesses)
    if mutant_set.witnesses:
        witnesses.mkdir()
    for mid, plan in sorted(mutant_set.witnesses.items()):
        (witnesses / f"{mid}.yaml").write_text(yaml.safe_dump(to_data(plan), sort_keys=False), encoding="utf-8")
    diffs = outdir / "diffs"
    if diffs.exists():
        shutil.rmtree(diffs)
    diffs.mkdir()
    for m in mutant_set.valid:
        (diffs / f"{m.id}.diff").write_text(mutant_set.diff(m), encoding="utf-8")
    path = outdir / MUTANTS_JSON
    path.write_text(json.dumps(mutant_set.as_json(), indent=2) + "\n", encoding="utf-8")
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
    except (ValueError, KeyError, TypeError) as exc:
        raise MutantError(f"{path}: malformed: {exc}") from exc
    if data.get("design_hash") != design.content_hash:
        raise MutantError(f"{path}: design_hash does not match {mutdir / 'golden'} (edited by hand?)")
    witnesses = {p.stem: load_plan_file(p) for p in sorted((mutdir / "witnesses").glob("*.yaml"))}
    return MutantSet(design, int(data.get("seed", 0)), mutants, mutdir, witnesses)


def set_hash(mutant_set: MutantSet) -> str:
    """Content hash of a mutant set (design + mutants), for exports and caches."""
    payload = json.dumps(mutant_set.as_json(), sort_keys=True).encode()
    return hashlib.sha256(payload).hexdigest()
