"""Refusals a trainer may hide, printed where its user still sees them.

OpenRLHF 0.11 catches every error of a reward call (its remote client retries a 422 five times,
then returns nothing; an error of ``reward_func`` is logged at INFO level among its progress
lines) and goes on with no reward. A refusal that no retry can cure (an unknown or changed
mutant set) is therefore also printed to standard error by hwtp, once per distinct message, so
that it stands in the trainer's console (Ray forwards its workers' stderr) or in the console of
``hwtp serve``.
"""

from __future__ import annotations

import sys
import threading

_MAX_REMEMBERED = 1024
_seen: set[str] = set()
_lock = threading.Lock()


def announce(where: str, message: str) -> bool:
    """Print ``hwtp WHERE: MESSAGE`` to stderr unless the same line was printed already; True if printed."""
    line = f"hwtp {where}: {message}"
    with _lock:
        if line in _seen:
            return False
        if len(_seen) >= _MAX_REMEMBERED:
            _seen.clear()
        _seen.add(line)
    print(line, file=sys.stderr, flush=True)
    return True
