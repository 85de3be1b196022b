"""A short interpreter switch interval while a thread computes beside the simulators' I/O threads.

CPython hands the GIL from a thread that computes to one that waits for it only after the
switch interval (5 ms by default). The warm pools' I/O threads (:mod:`hwtp.sim.warm`) need it
for a few microseconds at a time, after each system call, to route results and send their
simulators more work. While the reward path's thread reads plans (pure Python, holding the
GIL), each of those waits lasts up to the interval, longer than the work a simulator has
queued, so the simulators stand idle (ARCHITECTURE.md, "Reading plans on the reward path").
:func:`responsive` shortens the interval while it is held: re-entrant and shared by threads
(``hwtp serve`` scores from several), the last holder's exit restores the interval found,
and an interval already shorter is left alone.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator

#: The switch interval while held (seconds). Measured on 2 cores, batches of 64 alternated with
#: the workers alone: the machine's idle CPU during ``score_completions`` 17.5-19.5% at 5 ms and
#: 11.4-13.6% at 0.2, 0.5 and 1 ms alike (the longest of those: the fewest forced switches); the
#: host's CPU per completion the same within the spread.
SWITCH_S = 0.001

_lock = threading.Lock()
_holders = 0
_found = 0.0  # the interval when the first holder entered


@contextlib.contextmanager
def responsive() -> Iterator[None]:
    """Hold a switch interval of at most :data:`SWITCH_S` over the block."""
    global _holders, _found
    with _lock:
        if _holders == 0:
            _found = sys.getswitchinterval()
            if _found > SWITCH_S:
                sys.setswitchinterval(SWITCH_S)
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            # restored unless someone set another interval meanwhile (theirs stays)
            if _holders == 0 and sys.getswitchinterval() == min(_found, SWITCH_S):
                sys.setswitchinterval(_found)
