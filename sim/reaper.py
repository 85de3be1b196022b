"""Run one command and take its whole process group down with hwtp.

hwtp starts this file as ``python -I -S reaper.py PARENT_PID ARGV...`` in a new session, so
the reaper leads a process group that holds the command and everything it starts (``make``,
``g++``, ``cc1plus``, the simulator). Linux sends the reaper SIGTERM when hwtp dies, even by
``kill -9`` (``PR_SET_PDEATHSIG``, set here in a single-threaded process, not between fork
and exec of a threaded one); on SIGTERM, SIGINT or SIGHUP it kills its whole group. It exits
with the command's status (128 + signal number when the command was killed by a signal).

Only the standard library, no hwtp import: it starts in milliseconds.
"""

import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def _kill_group(*_args: object) -> None:
    os.killpg(0, signal.SIGKILL)  # the reaper's own group: the command, its children and us


def main() -> int:
    parent, argv = int(sys.argv[1]), sys.argv[2:]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _kill_group)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the group is still killed by hwtp itself
        pass
    if os.getppid() != parent:  # hwtp died before the death signal was armed
        _kill_group()
    try:
        pid = os.posix_spawnp(argv[0], argv, os.environ)
    except OSError as exc:
        print(f"hwtp: cannot run {argv[0]}: {exc.strerror}", file=sys.stderr)
        return 127
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
