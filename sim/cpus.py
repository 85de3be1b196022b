"""How many CPUs this process may use: the CPUs it may run on, bounded by a cgroup CPU quota.

``os.cpu_count()`` counts the machine's CPUs. A training job in a container (Kubernetes CPU
limits, ``docker run --cpus``) on a large node is throttled to its quota however many CPUs the
node has, so simulator pools, ``-j`` defaults and the reward path's running cap sized by the
node's count would start many more processes than the job can run at once. :func:`usable_cpus`
is the smaller of the affinity (``os.sched_getaffinity``) and the quota, rounded up (cgroup v2
``cpu.max``, v1 ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, the process's own group and every
group above it, so a limit set on a parent counts too).

Reading a quota is a few lines over two kernel files; joblib's ``cpu_count`` does the same, but
it would make a parallelism library a dependency for one function.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterator
from pathlib import Path

_CGROUP_ROOT = Path("/sys/fs/cgroup")
_SELF = Path("/proc/self/cgroup")


@functools.cache
def usable_cpus() -> int:
    """The CPUs this process may use (at least 1), read once."""
    return cpus_within(_affinity(), cgroup_quota())


def cpus_within(cpus: int, quota: float | None) -> int:
    """``cpus`` bounded by a quota of ``quota`` CPUs (None: no quota), rounded up, at least 1."""
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # no affinity on this system
        return os.cpu_count() or 1


def cgroup_quota(root: Path = _CGROUP_ROOT, self_groups: Path = _SELF) -> float | None:
    """The CPU quota of this process's cgroups in CPUs (quota over period; the smallest along
    the hierarchy), or None when none is set or the files cannot be read (not Linux, no
    cgroup file system)."""
    try:
        lines = self_groups.read_text().splitlines()
    except OSError:
        return None
    quotas = [q for folder in _folders(root, lines) if (q := _quota(folder)) is not None]
    return min(quotas) if quotas else None


def _folders(root: Path, lines: list[str]) -> Iterator[Path]:
    """The cgroup folders that may hold this process's CPU limits: its own group's and every
    parent's up to the mount, under the v2 hierarchy and under the v1 ``cpu`` controller's mount
    (in a container's cgroup namespace the group is ``/``: the mount's own files)."""
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            mounts = [root, root / "unified"]  # the v2 hierarchy (hybrid systems mount it apart)
        elif "cpu" in controllers.split(","):
            mounts = [root / controllers, root / "cpu", root / "cpu,cpuacct"]
        else:
            continue
        for mount in dict.fromkeys(mounts):
            if not mount.is_dir():
                continue
            folder = mount / path.strip("/")
            while True:
                yield folder
                if folder == mount:
                    break
                folder = folder.parent


def _quota(folder: Path) -> float | None:
    """The quota set in one cgroup folder, in CPUs, or None."""
    try:
        quota, _, period = (folder / "cpu.max").read_text().strip().partition(" ")
    except OSError:
        try:
            quota = (folder / "cpu.cfs_quota_us").read_text().strip()
            period = (folder / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        q, p = int(quota), int(period)
    except ValueError:  # "max": no limit
        return None
    return q / p if q > 0 and p > 0 else None  # v1 writes -1 for no limit
