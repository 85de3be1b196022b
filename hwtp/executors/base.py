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
from hwtp.mutantset import MutantSet, probed_sources, schemata_sources
from hwtp.sim.backends import NO_OPTIONS, get_backend
from hwtp.sim.buildcache import Build, build_key, ensure_build
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

    def build(self) -> Build:
        """The build in this machine's cache, made now unless it is there."""
        return ensure_build(get_backend(self.simulator), self.sources, WRAPPER_TOP, root=self.cache_root,
                            allow_escapes=self.allow_escapes)


def schemata_target(
    mutant_set: MutantSet, simulator: str = "verilator", cache_root: Path | None = None, probes: bool = False
) -> Target:
    """The target of a mutant set's schemata build (golden and every valid mutant); ``probes``:
    with activation probes (``hwtp score --diagnose``; another build, never the training one)."""
    schemata = probed_sources(mutant_set)[0] if probes else schemata_sources(mutant_set)[0]
    return Target(mutant_set.design, build_sources(mutant_set.design, schemata), simulator, cache_root)


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
