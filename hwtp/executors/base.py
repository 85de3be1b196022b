"""The executor interface: run a (build, evaluations) pair somewhere and stream the results back.

A :class:`Target` is what a worker needs to make the build itself: the design and the
schemata sources (text, a few KB), never the built folder, so any node builds it once in
its own content-hashed cache (:func:`hwtp.sim.buildcache.ensure_build`). An executor runs
evaluations on a target and calls ``on_result`` once per evaluation id as results arrive;
:func:`hwtp.executors.choice.make_executor` picks one by name (``local`` or ``ray``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hwtp.design import Design, SourceFile, system_tasks_allowed
from hwtp.errors import MutantError
from hwtp.mutantset import MutantSet, SchemataPart, part_of, schemata_parts
from hwtp.sim import procs
from hwtp.sim.backends import NO_OPTIONS, get_backend
from hwtp.sim.buildcache import Build, build_key, ensure_build, ensure_generated
from hwtp.sim.job import Evaluation, Limits
from hwtp.sim.runner import Counters, EvalResult
from hwtp.sim.wrapper import WRAPPER_TOP, build_sources

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class Target:
    """A design and the sources of its schemata build: shipped to workers, built where they run."""

    design: Design
    sources: tuple[SourceFile, ...]
    simulator: str = "verilator"
    cache_root: Path | None = None  # None: the node's own cache ($HWTP_CACHE_DIR or the default)
    #: Whether the RTL may run commands or write files (--allow-system-tasks where the target was made).
    allow_escapes: bool = field(default_factory=system_tasks_allowed)

    @functools.cached_property
    def key(self) -> str:
        """The target's content hash: equal targets build the same folder (the folder's own
        key also holds the preprocessed text's digest, which these sources determine)."""
        return build_key(get_backend(self.simulator), self.sources, WRAPPER_TOP, NO_OPTIONS)

    #: Sources hwtp generated (schemata) around the design's: a build that fails on them while the
    #: design's own sources pass is hwtp's fault (:class:`~hwtp.errors.InternalError`), not the input's.
    generated: bool = False

    def build(self) -> Build:
        """The build in this machine's cache, made now unless it is there."""
        backend = get_backend(self.simulator)
        if self.generated:
            return ensure_generated(backend, self.sources, build_sources(self.design), WRAPPER_TOP,
                                    root=self.cache_root, allow_escapes=self.allow_escapes)
        return ensure_build(backend, self.sources, WRAPPER_TOP, root=self.cache_root, allow_escapes=self.allow_escapes)


@dataclass(frozen=True)
class Schemata:
    """The schemata builds of a mutant set (:func:`hwtp.mutantset.schemata_parts`): one target
    per part, and which part simulates each selector value (golden: the first). Evaluations of
    a mutant run in the build that holds it; every build simulates golden alike."""

    targets: tuple[Target, ...]
    parts: tuple[SchemataPart, ...]

    def target_of(self, index: int) -> Target:
        return self.targets[part_of(self.parts, index)]

    def split(self, evaluations: Sequence[Evaluation]) -> list[tuple[int, list[Evaluation]]]:
        """``evaluations`` grouped by the position of the target that runs them (in target
        order; empty groups left out)."""
        groups: dict[int, list[Evaluation]] = {}
        for ev in evaluations:
            groups.setdefault(part_of(self.parts, ev.mutant), []).append(ev)
        return [(i, groups[i]) for i in sorted(groups)]

    def build(self, jobs: int = 1) -> tuple[Build, ...]:
        """Every part's build in this machine's cache, made now (``jobs`` at once) unless there."""
        return tuple(procs.map_threads(lambda t: t.build(), list(self.targets), jobs))


def schemata_targets(
    mutant_set: MutantSet, simulator: str = "verilator", cache_root: Path | None = None, probes: bool = False
) -> Schemata:
    """The targets of a mutant set's schemata builds (golden and every valid mutant); ``probes``:
    with activation probes (``hwtp score --diagnose``; other builds, never the training ones)."""
    parts = schemata_parts(mutant_set, with_probes=probes)
    design = mutant_set.design
    targets = tuple(
        Target(design, build_sources(design, p.sources), simulator, cache_root, generated=True) for p in parts
    )
    return Schemata(targets, parts)


def schemata_target(
    mutant_set: MutantSet, simulator: str = "verilator", cache_root: Path | None = None, probes: bool = False
) -> Target:
    """The target of a mutant set whose schemata is one build (:func:`schemata_targets` for any set)."""
    schemata = schemata_targets(mutant_set, simulator, cache_root, probes)
    if len(schemata.targets) != 1:
        raise MutantError(f"{mutant_set.design.name}: the schemata is {len(schemata.targets)} builds, not one")
    return schemata.targets[0]


def run_split(
    executor: Executor,
    schemata: Schemata,
    evaluations: Sequence[Evaluation],
    limits: Limits,
    progress: Callable[[int], None] | None = None,
    on_result: Callable[[EvalResult], None] | None = None,
    counters: Counters | None = None,
    workdir: Path | None = None,
) -> dict[str, EvalResult]:
    """Run ``evaluations`` on ``executor``, each in the build of its selector value, one build after another."""
    out: dict[str, EvalResult] = {}
    for i, group in schemata.split(evaluations):
        out.update(executor.run(schemata.targets[i], group, limits, progress, on_result, counters, workdir))
    return out


class Executor(Protocol):
    """Runs evaluations of one target; results by id, each reported once through ``on_result``."""

    name: str

    def run(
        self,
        target: Target,
        evaluations: Sequence[Evaluation],
        limits: Limits,
        progress: Callable[[int], None] | None = None,
        on_result: Callable[[EvalResult], None] | None = None,
        counters: Counters | None = None,
        workdir: Path | None = None,
    ) -> dict[str, EvalResult]: ...

    def close(self) -> None: ...
