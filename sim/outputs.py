"""Output port changes of one test, settled per time step, and their first difference from golden's.

Pure Python, used inside the simulator (``hwtp ci``'s observer compares as the test runs; the
harness records for ``hwtp score --diagnose``) and on the host (``hwtp score`` compares two
records). A record is ``{"changes": [[step, port, value], ...], "end": step, "cut": bool}``:
the value each port settles to in each time step where it changed (the values at the test's
start settle with its first step; a glitch back to the old value within a step is no change),
steps counted from the test's start, at most :data:`LIMIT` changes (``cut`` when more came).
Two records differ at the first (step, port) where they disagree, over the time both lasted.
"""

from __future__ import annotations

from typing import Any

#: Output changes a record keeps per test; past them, later differences are unknown.
LIMIT = 200_000

Entry = tuple[int, str, str]  # (time step since the test's start, port, value)


class Compare:
    """Output changes of one test, settled per time step, checked against golden's as they come."""

    def __init__(self, golden: dict[str, Any] | None, start: dict[str, str]) -> None:
        self.golden: list[Entry] = [(int(t), str(n), str(v)) for t, n, v in golden["changes"]] if golden else []
        self.golden_end: int | None = int(golden["end"]) if golden else None
        self.cut: bool = bool(golden and golden["cut"])
        self.current: dict[str, str] = {}
        self.pending = dict(start)  # the values at the test's start settle with the rest of its first step
        self.pending_t = 0
        self.changes: list[Entry] = []  # golden's run: what it records
        self.position = 0
        self.first: tuple[int, str] | None = None
        self.full = False

    def change(self, t: int, name: str, value: str) -> None:
        if t != self.pending_t:
            self.flush()
            self.pending_t = t
        self.pending[name] = value

    def flush(self) -> None:
        for name in sorted(self.pending):
            value = self.pending[name]
            if self.current.get(name) != value:
                self.current[name] = value
                self._settled(self.pending_t, name, value)
        self.pending = {}

    def _settled(self, t: int, name: str, value: str) -> None:
        if self.first is not None or self.full:
            return
        entry = (t, name, value)
        if self.golden_end is None:  # recording golden
            if len(self.changes) >= LIMIT:
                self.full = True
                return
            self.changes.append(entry)
            return
        self._compare_before(t)
        if self.first is not None or self.full:
            return
        if self.position < len(self.golden):
            theirs = self.golden[self.position]
            if theirs != entry:
                self.first = min((t, name), (theirs[0], theirs[1]))
                return
            self.position += 1
        elif self.cut:
            self.full = True
        elif t <= self.golden_end:
            self.first = (t, name)

    def _compare_before(self, t: int) -> None:
        """Golden changed something before ``t`` that this run has not (up to ``t``)."""
        if self.position < len(self.golden) and self.golden[self.position][0] < t:
            self.first = (self.golden[self.position][0], self.golden[self.position][1])

    def end(self, t: int) -> None:
        self.flush()
        if self.golden_end is not None and self.first is None and not self.full:
            limit = min(t, self.golden_end)
            if self.position < len(self.golden) and self.golden[self.position][0] <= limit:
                self.first = (self.golden[self.position][0], self.golden[self.position][1])
            elif self.cut:  # golden's record stops early: no difference in it, none known after it
                self.full = True

    @property
    def propagated(self) -> bool | None:
        if self.first is not None:
            return True
        return None if self.full else False

    def record(self, end: int) -> dict[str, Any]:
        """This run's record (recording mode)."""
        return {"changes": self.changes, "end": end, "cut": self.full}


def first_difference(golden: dict[str, Any], other: dict[str, Any]) -> tuple[bool | None, tuple[int, str] | None]:
    """Whether ``other``'s record differs from ``golden``'s (None: unknown, a record was cut
    first), and the first (step, port) where they do."""
    compare = Compare(golden, {})
    for t, name, value in other["changes"]:
        compare.change(int(t), str(name), str(value))
    compare.end(int(other["end"]))
    if other.get("cut") and compare.first is None:
        return None, None
    return compare.propagated, compare.first
