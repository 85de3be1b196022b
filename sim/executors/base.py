"""The executor interface: one path from a mutant set's schemata to evaluation results.

A :class:`Target` is what a worker needs to make the build itself: the design and the
schemata sources (text, a few KB), never the built folder, so any node builds it once in
its own content-hashed cache (:func:`hwtp.sim.buildcache.ensure_build`, called only by
:meth:`Target.build`). A :class:`Schemata` is a mutant set's targets (one per part). An
:class:`Executor` runs evaluations of a whole schemata (it decides how the parts share its
processes), calls ``on_result`` once per evaluation id as results arrive, and offers a
future of the results (:meth:`Executor.submit`) for callers that prepare the next batch
meanwhile. Implementations: :class:`hwtp.sim.executors.local.LocalExecutor` (batched or isolated
processes), :class:`hwtp.sim.executors.warm.WarmExecutor` (warm pools kept between calls),
:class:`hwtp.sim.executors.ray.RayExecutor` (Ray actors) and
:class:`hwtp.sim.executors.memory.MemoryExecutor` (a function, for tests);
:func:`hwtp.sim.executors.choice.make_executor` picks one.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hwtp.errors import MutantError
from hwtp.mutators.mutantset import MutantSet, SchemataPart, part_of, schemata_parts
from hwtp.rtl.design import Design, SourceFile, system_tasks_allowed
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
    """The schemata builds of a mutant set (:func:`hwtp.mutators.mutantset.schemata_parts`): one target
    per part, and which part simulates each selector value (golden: the first). Evaluations of
    a mutant run in the build that holds it; every build simulates golden alike."""

    targets: tuple[Target, ...]
    parts: tuple[SchemataPart, ...]
    #: The set's identity (design name and set hash): what warm pools and their process budget are keyed by.
    key: str = ""

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
    return Schemata(targets, parts, f"{design.name}:{mutant_set.set_hash}" + (":probes" if probes else ""))


def design_schemata(design: Design, simulator: str = "verilator", cache_root: Path | None = None) -> Schemata:
    """The design alone (golden, selector value 0) as a schemata of one build (``hwtp sim``)."""
    target = Target(design, build_sources(design), simulator, cache_root)
    return Schemata((target,), (SchemataPart(frozenset(), ()),), f"{design.name}:{design.content_hash}")


def schemata_target(
    mutant_set: MutantSet, simulator: str = "verilator", cache_root: Path | None = None, probes: bool = False
) -> Target:
    """The target of a mutant set whose schemata is one build (:func:`schemata_targets` for any set)."""
    schemata = schemata_targets(mutant_set, simulator, cache_root, probes)
    if len(schemata.targets) != 1:
        raise MutantError(f"{mutant_set.design.name}: the schemata is {len(schemata.targets)} builds, not one")
    return schemata.targets[0]


@dataclass(frozen=True)
class Builds:
    """What an executor's builds of a schemata cost here: seconds spent building, and whether
    every build was in the cache (``hwtp score``'s ``build_seconds``/``build_cached``). An
    executor that builds on its workers' nodes reports none here (0 s, cached)."""

    seconds: float = 0.0
    cached: bool = True

    @classmethod
    def of(cls, builds: Sequence[Build]) -> Builds:
        return cls(sum(b.seconds for b in builds), all(b.cached for b in builds))


class Executor(Protocol):
    """Runs evaluations of a schemata (every part); results by id, each reported once through
    ``on_result``. ``progress`` is called with the number of results that arrived."""

    name: str

    def build(self, schemata: Schemata) -> Builds:
        """Make the schemata's builds where this executor needs them now (before any timing)."""
        ...

    def run(
        self,
        schemata: Schemata,
        evaluations: Sequence[Evaluation],
        limits: Limits,
        progress: Callable[[int], None] | None = None,
        on_result: Callable[[EvalResult], None] | None = None,
        counters: Counters | None = None,
        workdir: Path | None = None,
    ) -> dict[str, EvalResult]: ...

    def submit(
        self, schemata: Schemata, evaluations: Sequence[Evaluation], limits: Limits
    ) -> Future[dict[str, EvalResult]]:
        """A future of the results of ``evaluations`` (the batched reward path)."""
        ...

    def describe(self) -> dict[str, Any]:
        """Where simulations run (``name``) and the executor's own counters."""
        ...

    def close(self) -> None: ...


_threads = itertools.count(1)


def in_thread(work: Callable[[], dict[str, EvalResult]], name: str = "hwtp-exec") -> Future[dict[str, EvalResult]]:
    """``work()`` in a thread of its own, as a future of its results."""
    future: Future[dict[str, EvalResult]] = Future()

    def body() -> None:
        try:
            future.set_result(work())
        except BaseException as exc:  # handed to the caller through the future
            future.set_exception(exc)

    threading.Thread(target=body, name=f"{name}-{next(_threads)}", daemon=True).start()
    return future


def joined(futures: Sequence[Future[dict[str, EvalResult]]]) -> Future[dict[str, EvalResult]]:
    """One future of the merged results of ``futures`` (one per schemata build)."""
    if len(futures) == 1:
        return futures[0]
    out: Future[dict[str, EvalResult]] = Future()
    if not futures:
        out.set_result({})
        return out
    lock = threading.Lock()
    left = [len(futures)]

    def done(_: Future[dict[str, EvalResult]]) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if not last:
            return
        try:
            merged: dict[str, EvalResult] = {}
            for f in futures:
                merged.update(f.result())
            out.set_result(merged)
        except BaseException as exc:  # handed to the caller through the future
            out.set_exception(exc)

    for f in futures:
        f.add_done_callback(done)
    return out
