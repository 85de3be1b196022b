"""Observing a user's cocotb tests on each mutant, for the survivor diagnosis (:mod:`hwtp.scoring.reach`).

For each (test, mutant) the simulator process writes what :mod:`hwtp.ci.observe` saw, one JSON
line per test (:data:`OUT`), as asked by a :class:`Watch`; :func:`read` turns them into
:class:`~hwtp.scoring.reach.Observation` records, summarized and explained in that module.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hwtp.scoring.reach import Observation

#: The file a simulator process writes its observations to, one JSON line per test.
OUT = "observe.jsonl"
#: The job file of the observation (:mod:`hwtp.ci.observe`).
JOB = "observe.json"
#: The cocotb test module of an observed process per mutant (it wraps the user's tests).
OBSERVER_MODULE = "hwtp.ci.observe"


@dataclass(frozen=True)
class Watch:
    """What the host asks the simulator process to observe: the design's output ports, and
    either where golden's run records its outputs (``record``) or that record (``golden``);
    ``uncovered``: the mutants whose probes do not cover all their code (a probe that did not
    fire says nothing about them: activation unknown, not false)."""

    outputs: tuple[str, ...]
    record: Path | None = None
    golden: Path | None = None
    uncovered: frozenset[int] = frozenset()

    def job(self, folder: Path, mutant: int, modules: Sequence[str], test_filter: str | None) -> Path:
        """Write the job file into ``folder``; its path (``$HWTP_CI_OBSERVE``)."""
        path = folder / JOB
        path.write_text(
            json.dumps(
                {
                    "outputs": list(self.outputs),
                    "record": str(self.record) if self.record else None,
                    "golden": str(self.golden) if self.golden else None,
                    "out": str(folder / OUT),
                    "mutant": mutant,
                    "modules": list(modules),
                    "filter": test_filter,
                }
            ),
            encoding="utf-8",
        )
        return path


def read(folder: Path, watch: Watch) -> dict[int, list[Observation]]:
    """The observations a process wrote into ``folder``, by position of the state in its list."""
    out: dict[int, list[Observation]] = {}
    try:
        lines = (folder / OUT).read_text(encoding="utf-8").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            break  # a line being written when the process was stopped
        activated = row.get("activated")
        if activated is False and int(row.get("mutant", 0)) in watch.uncovered:
            activated = None
        out.setdefault(int(row.get("position", 0)), []).append(
            Observation(
                str(row["test"]),
                activated,
                row.get("activated_ns") if activated else None,
                row.get("propagated"),
                row.get("propagated_ns"),
                row.get("signal"),
            )
        )
    return out


