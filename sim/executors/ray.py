"""The Ray executor: warm simulator workers in Ray actors, across the nodes of a cluster.

Each actor (``num_cpus`` each, fractional allowed; by default one actor per CPU of the
cluster) keeps a :class:`hwtp.sim.warm.WarmPool` of one simulator process per target (design
and mutant set), made on first use: the actor receives the :class:`~hwtp.sim.executors.base.Target`
(the sources, put once in the object store per run) and builds it in its own node's cache,
where concurrent builders coordinate through the cache's file lock as on one machine.

Work is cut into chunks (default 64 evaluations), each one actor call, two in flight per
actor (a threaded actor: both feed its warm pool, which never runs dry between chunks);
results come back as chunks finish (``ray.wait``). Results are keyed by evaluation id and
reported once: a chunk whose actor died (killed, out of memory, node lost) is sent again to a
live actor, a replacement is asked for (it takes work once the cluster has placed it), and an
id already reported is never reported again. Per-evaluation budgets and faults are the warm
pool's, inside the actor.

The actors are named (:func:`actor_name`: hwtp's version, the calls' protocol, CPUs per actor
and a slot number) in the Ray namespace of the job, and found by name before one is made: every
process of a job (a trainer's reward workers, ``hwtp serve``, the driver) shares one pool of
actors, and each actor one warm pool per target. A design and mutant set key the warm pool
inside an actor (the target's build hash), not the actor: actors reserve CPUs, so one set of
actors per design would reserve the cluster many times over. An actor is owned by the process
that made it (Ray's default lifetime, not detached): it stops when that process's executor is
closed or the process ends, so nothing outlives the job; another process that was using it
sends its chunks again and finds or makes the replacement under the same name.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import ray
import ray.exceptions

from hwtp import __version__
from hwtp.errors import ConfigError, HwtpError, SimulationError
from hwtp.sim import warm
from hwtp.sim.executors.base import Builds, Schemata, Target, in_thread, joined
from hwtp.sim.executors.local import run_batched
from hwtp.sim.job import Evaluation, Limits
from hwtp.sim.runner import Counters, EvalResult, budget_spent

DEFAULT_CHUNK = 64
#: Chunks in flight on one actor, run by as many threads of it into its one warm pool: the pool
#: already holds the next chunk when one ends (a pool that runs dry between two calls waits
#: ~50 ms to be fed again: 40% of a chunk of 64).
_DEPTH = 2
#: Times one chunk is sent again after its actor died, before the run gives up.
_ATTEMPTS = 4
_POLL_S = 0.01
#: Seconds :meth:`RayExecutor.close` waits for Ray to free the names of the actors it stopped.
_CLOSE_S = 10.0
_DIED = (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError)
#: The calls of :class:`SimActor` (their arguments and answers); bumped when they change, so that
#: processes of different hwtp code never share an actor.
PROTOCOL = 2


def actor_name(cpus: float, index: int) -> str:
    """The name of slot ``index`` of the actor pool: processes that agree on it may share the
    actor (same hwtp, same calls, same CPUs per actor). What it simulates is per call."""
    return f"hwtp-sim-{__version__}-p{PROTOCOL}-cpu{cpus:g}-{index}"


class SimActor:
    """One Ray actor: warm pools (one simulator process each) by target and limits; limits no
    pool honours (:attr:`hwtp.sim.job.Limits.pooled`) run in a batched process of their own,
    their total budget counted on this node's clock from when the chunk arrives."""

    def __init__(self) -> None:
        self.node = ray.get_runtime_context().get_node_id()

    def run(self, key: str, shipped: list[Any], limits: Limits, evaluations: list[Evaluation]) -> list[dict[str, Any]]:
        """The chunk's results, as the harness writes them (plain data: small and version-proof).
        ``key`` names the target (its build's hash); ``shipped`` holds a reference to it, fetched
        only when this actor has no pool for it yet (a reference in a list is not resolved)."""

        if not limits.pooled:
            target: Target = ray.get(shipped[0])
            return [r.as_line() for r in run_batched(target.build(), target.design, evaluations, limits).values()]

        def make() -> warm.WarmPool:
            target: Target = ray.get(shipped[0])
            return warm.WarmPool(target.build(), target.design, workers=1, limits=limits)

        pool = warm.pool_for(f"{key}@{limits.key}", make)
        return [r.as_line() for r in pool.run(evaluations).values()]

    def where(self) -> tuple[str, int]:
        """(node id, pid) of this actor."""
        return self.node, os.getpid()


@dataclass
class _Slot:
    index: int
    handle: Any
    made: bool  # made by this executor (not found by name): stopped by its close()
    started: Any  # the actor's first call: done once Ray has placed and started it
    inflight: int = 0

    @classmethod
    def join(cls, remote: Any, options: dict[str, Any], name: str, index: int, dead: list[Any]) -> _Slot | None:
        """The actor called ``name`` in this job's namespace, made unless another process has it
        (None while the name still belongs to an actor in ``dead``: Ray frees it shortly)."""
        try:
            handle, made = ray.get_actor(name), False
        except ValueError:
            try:
                handle, made = remote.options(name=name, **options).remote(), True
            except ray.exceptions.ActorAlreadyExistsError:  # made meanwhile by another process
                handle, made = ray.get_actor(name), False
        if handle in dead:
            return None
        return cls(index, handle, made, handle.where.remote())

    def ready(self) -> bool:
        """Started (or failed to: its chunks then fail and are sent elsewhere). An actor the
        cluster has no room for yet (a node was lost) is given no work until it starts."""
        if self.started is not None:
            done, _ = ray.wait([self.started], timeout=0)
            if not done:
                return False
            self.started = None
        return True


def _check_address(address: str) -> None:
    """Refuse at once an address nothing listens on (``ray.init`` would retry for a minute)."""
    if address == "auto" or address.startswith("ray://") or address.startswith("local"):
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=3):
            return
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--ray-address {address}: no Ray cluster answers there ({exc})") from None


def connect(address: str | None) -> None:
    """Join the Ray cluster at ``address`` unless this process already belongs to one (a
    trainer's Ray job: its workers use the cluster they run on)."""
    if ray.is_initialized():
        return
    if address:
        _check_address(address)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ConfigError(f"cannot connect to Ray at {address or 'a new local cluster'}: {exc}") from None


class RayExecutor:
    """Evaluations on Ray actors holding warm simulator workers (see the module docstring)."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        cpus: float | None = None,
        chunk: int | None = None,
        actors: int | None = None,
    ) -> None:
        if cpus is not None and not cpus > 0:
            raise ConfigError(f"--ray-cpus {cpus}: must be above 0")
        if chunk is not None and chunk < 1:
            raise ConfigError(f"--ray-chunk {chunk}: at least 1 evaluation")
        connect(address)
        self.cpus = float(cpus or 1.0)
        self.chunk = chunk or DEFAULT_CHUNK
        total = ray.cluster_resources().get("CPU", 1.0)
        self.size = actors or max(1, int(total // self.cpus))
        self._remote = ray.remote(SimActor)
        self._options = {"num_cpus": self.cpus, "max_concurrency": _DEPTH}
        self._lock = threading.Lock()
        self._slots: dict[int, _Slot] = {}
        self._dead: list[Any] = []  # handles of the actors lost (their names are freed shortly)
        self.stats = {"chunks": 0, "resubmitted": 0, "actors_lost": 0, "duplicates": 0}

    # -- actors ---------------------------------------------------------------------------

    def actors(self) -> list[Any]:
        """Handles of the live actors (found or made on first use)."""
        with self._lock:
            self._fill()
            return [s.handle for s in self._slots.values()]

    def ready_actors(self) -> list[Any]:
        """Handles of the actors that have started (a replacement waits for room on the cluster)."""
        with self._lock:
            self._fill()
            return [s.handle for s in self._slots.values() if s.ready()]

    def snapshot(self) -> dict[str, Any]:
        """The counters (chunks sent, sent again, actors lost, duplicate results dropped) and
        the names of the actors in use."""
        with self._lock:
            return {**self.stats, "actors": [actor_name(self.cpus, i) for i in sorted(self._slots)]}

    def _fill(self) -> None:
        for index in range(self.size):
            if index not in self._slots:
                slot = _Slot.join(self._remote, self._options, actor_name(self.cpus, index), index, self._dead)
                if slot is not None:
                    self._slots[index] = slot

    def _lost(self, slot: _Slot) -> None:
        """Forget a dead actor and find or make its replacement: it takes work once the cluster
        has placed it (at once when the CPU came free; when a node was lost, once one joins). An
        actor merely unreachable is killed first, so that every process sharing it replaces it."""
        with contextlib.suppress(ray.exceptions.RayError, ValueError):
            ray.kill(slot.handle)
        with self._lock:
            if self._slots.get(slot.index) is not slot:
                return
            del self._slots[slot.index]
            self._dead.append(slot.handle)
            self.stats["actors_lost"] += 1
            self._fill()

    def _pick(self) -> _Slot | None:
        with self._lock:
            self._fill()
            ready = [s for s in self._slots.values() if s.ready()]
            slot = min(ready, key=lambda s: s.inflight, default=None)
            if slot is None or slot.inflight >= _DEPTH:
                return None
            slot.inflight += 1
            return slot

    def _release(self, slot: _Slot) -> None:
        with self._lock:
            slot.inflight -= 1

    # -- work -------------------------------------------------------------------------------

    def build(self, schemata: Schemata) -> Builds:
        """Nothing here: each actor builds the targets in its own node's cache."""
        return Builds()

    def run(
        self,
        schemata: Schemata,
        evaluations: Sequence[Evaluation],
        limits: Limits,
        progress: Callable[[int], None] | None = None,
        on_result: Callable[[EvalResult], None] | None = None,
        counters: Counters | None = None,
        workdir: Path | None = None,
    ) -> dict[str, EvalResult]:
        """Run ``evaluations`` on the actors, each part's after another; ``on_result`` once per
        id as chunks finish."""
        out: dict[str, EvalResult] = {}
        for i, group in schemata.split(evaluations):
            out.update(self._run_target(schemata.targets[i], group, limits, progress, on_result, counters))
        return out

    def _run_target(
        self,
        target: Target,
        evaluations: Sequence[Evaluation],
        limits: Limits,
        progress: Callable[[int], None] | None = None,
        on_result: Callable[[EvalResult], None] | None = None,
        counters: Counters | None = None,
    ) -> dict[str, EvalResult]:
        unique = list({ev.id: ev for ev in evaluations}.values())
        if not unique:
            return {}
        shipped = [ray.put(target)]  # once per run; fetched by an actor only to make its pool
        todo: deque[tuple[int, list[Evaluation]]] = deque(
            (i, unique[start : start + self.chunk]) for i, start in enumerate(range(0, len(unique), self.chunk))
        )
        attempts: dict[int, int] = {}
        inflight: dict[Any, tuple[_Slot, int, list[Evaluation]]] = {}
        results: dict[str, EvalResult] = {}
        deadline = limits.deadline()  # this process's clock: each chunk is sent what is left

        def keep(result: EvalResult) -> bool:
            if result.id in results:
                with self._lock:
                    self.stats["duplicates"] += 1
                return False
            results[result.id] = result
            if on_result is not None:
                on_result(result)
            return True

        def tally(fresh: int) -> None:
            if counters is not None:
                counters.add(evaluations=fresh)
            if progress is not None and fresh:
                progress(fresh)

        try:
            while todo or inflight:
                while todo and deadline is not None and time.monotonic() >= deadline:
                    tally(sum(keep(budget_spent(ev.id)) for ev in todo.popleft()[1]))
                while todo:
                    slot = self._pick()
                    if slot is None:
                        break
                    index, chunk = todo.popleft()
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    sent = limits if left is None else replace(limits, total_s=left)
                    ref = slot.handle.run.remote(target.key, shipped, sent, chunk)
                    inflight[ref] = (slot, index, chunk)
                    with self._lock:
                        self.stats["chunks"] += 1
                if not inflight:  # every actor is starting, or busy with other callers' chunks
                    if todo:
                        time.sleep(_POLL_S)
                    continue
                ready, _ = ray.wait(list(inflight), num_returns=1, timeout=1.0)
                for ref in ready:
                    slot, index, chunk = inflight.pop(ref)
                    self._release(slot)
                    try:
                        lines = ray.get(ref)
                    except _DIED:
                        self._lost(slot)
                        attempts[index] = attempts.get(index, 0) + 1
                        if attempts[index] >= _ATTEMPTS:
                            raise SimulationError(
                                f"a chunk of {len(chunk)} evaluations lost its Ray actor {_ATTEMPTS} times"
                            ) from None
                        with self._lock:
                            self.stats["resubmitted"] += 1
                        todo.appendleft((index, chunk))
                        continue
                    except ray.exceptions.RayTaskError as exc:
                        cause = getattr(exc, "cause", None)
                        if isinstance(cause, HwtpError):
                            raise cause from None
                        raise SimulationError(f"a Ray simulator actor failed: {exc}") from None
                    tally(sum(keep(EvalResult.from_line(line)) for line in lines))
        finally:
            for slot, _index, _chunk in inflight.values():
                self._release(slot)
        return {ev.id: results[ev.id] for ev in unique}

    def submit(
        self, schemata: Schemata, evaluations: Sequence[Evaluation], limits: Limits
    ) -> Future[dict[str, EvalResult]]:
        """A future of the results (for callers that prepare the next batch meanwhile, as with
        :meth:`hwtp.sim.warm.WarmPool.submit`): each part's evaluations in a thread of their own."""
        return joined(
            [
                in_thread(functools.partial(self._run_target, schemata.targets[i], group, limits), "hwtp-ray")
                for i, group in schemata.split(evaluations)
            ]
        )

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, **self.snapshot()}

    def close(self) -> None:
        """Stop the actors this executor made (their warm simulators die with them) and wait, up
        to a few seconds, until Ray has freed their names (an executor made next must not find a
        dying actor); the ones found by name belong to another process and are only let go."""
        with self._lock:
            slots, self._slots = list(self._slots.values()), {}
        made = [slot for slot in slots if slot.made]
        for slot in made:
            ray.kill(slot.handle)
        deadline = time.monotonic() + _CLOSE_S
        for slot in made:
            while time.monotonic() < deadline:
                try:
                    if ray.get_actor(actor_name(self.cpus, slot.index)) != slot.handle:
                        break
                except ValueError:
                    break
                time.sleep(_POLL_S)
