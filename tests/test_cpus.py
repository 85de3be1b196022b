"""The CPUs hwtp sizes its pools and ``-j`` defaults by: the affinity, bounded by a cgroup quota
(the cgroup file systems here are folders written by the tests, laid out as the kernel's)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hwtp.sim import cpus, warm
from hwtp.sim.cpus import cgroup_quota, cpus_within, usable_cpus


def _tree(root: Path, files: dict[str, str], groups: str) -> tuple[Path, Path]:
    """A cgroup mount at ``root`` holding ``files`` (path -> text) and a /proc/self/cgroup."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    root.mkdir(parents=True, exist_ok=True)
    self_groups = root.parent / "self-cgroup"
    self_groups.write_text(groups)
    return root, self_groups


def test_a_v2_quota_is_read_in_cpus(tmp_path: Path) -> None:
    root, groups = _tree(tmp_path / "fs", {"job/cpu.max": "150000 100000"}, "0::/job\n")
    assert cgroup_quota(root, groups) == 1.5
    assert cpus_within(64, cgroup_quota(root, groups)) == 2  # a 64-CPU node, a 1.5-CPU limit


def test_no_v2_limit_means_no_quota(tmp_path: Path) -> None:
    root, groups = _tree(tmp_path / "fs", {"job/cpu.max": "max 100000", "cpu.max": "max 100000"}, "0::/job\n")
    assert cgroup_quota(root, groups) is None
    assert cpus_within(8, None) == 8


def test_a_limit_on_a_parent_group_counts_and_the_smallest_wins(tmp_path: Path) -> None:
    files = {
        "kubepods/pod1/cpu.max": "200000 100000",
        "kubepods/pod1/ctr/cpu.max": "max 100000",
        "kubepods/cpu.max": "800000 100000",
    }
    root, groups = _tree(tmp_path / "fs", files, "0::/kubepods/pod1/ctr\n")
    assert cgroup_quota(root, groups) == 2.0


def test_a_container_namespace_reads_the_mount_s_own_files(tmp_path: Path) -> None:
    root, groups = _tree(tmp_path / "fs", {"cpu.max": "400000 100000"}, "0::/\n")
    assert cgroup_quota(root, groups) == 4.0


def test_a_v1_quota_under_the_cpu_controller_s_mount(tmp_path: Path) -> None:
    files = {
        "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "-1",  # no limit of its own
        "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
        "cpu,cpuacct/docker/cpu.cfs_quota_us": "300000",
        "cpu,cpuacct/docker/cpu.cfs_period_us": "100000",
        "memory/docker/abc/memory.limit_in_bytes": "1073741824",
    }
    lines = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n"
    root, groups = _tree(tmp_path / "fs", files, lines)
    assert cgroup_quota(root, groups) == 3.0


def test_a_hybrid_system_without_limits_has_no_quota(tmp_path: Path) -> None:
    files = {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000", "unified/cgroup.procs": ""}
    root, groups = _tree(tmp_path / "fs", files, "4:memory:/x\n1:cpu:/\n0::/\n")
    assert cgroup_quota(root, groups) is None


@pytest.mark.parametrize(
    ("groups", "cpu_max"),
    [
        (None, None),  # no /proc/self/cgroup: not Linux
        ("0::/job\n", "garbage"),
        ("0::/job\n", "-5 100000"),
        ("0::/job\n", "100000 0"),
        ("not a cgroup line\n", "100000 100000"),
    ],
)
def test_what_cannot_be_read_is_no_quota(tmp_path: Path, groups: str | None, cpu_max: str | None) -> None:
    root = tmp_path / "fs"
    (root / "job").mkdir(parents=True)
    if cpu_max is not None:
        (root / "job" / "cpu.max").write_text(cpu_max)
    self_groups = tmp_path / "self-cgroup"
    if groups is not None:
        self_groups.write_text(groups)
    assert cgroup_quota(root, self_groups) is None


def test_a_quota_under_one_cpu_still_leaves_one() -> None:
    assert cpus_within(16, 0.25) == 1
    assert cpus_within(2, 3.5) == 2  # the affinity is the smaller
    assert cpus_within(0, None) == 1


def test_this_process_s_cpus_are_within_its_affinity_and_the_pools_use_them() -> None:
    assert 1 <= usable_cpus() <= len(os.sched_getaffinity(0))
    assert usable_cpus() == cpus_within(cpus._affinity(), cgroup_quota())
    assert warm.usable_cpus is usable_cpus  # the running cap and the pools' sizes count the same CPUs


def _own_group(tmp_name: str) -> tuple[Path, str, str]:
    """A fresh cgroup this test may move a process into, with the file and text that set a
    quota of half a CPU; skipped where the kernel's cgroups cannot be written (not root, no
    CPU controller)."""
    v1, v2 = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")
    controllers = v2 / "cgroup.controllers"
    if v1.is_dir() and (v1 / "cpu.cfs_period_us").exists():
        group, setting, text = v1 / tmp_name, "cpu.cfs_quota_us", "50000"
    elif controllers.exists() and "cpu" in controllers.read_text().split():
        group, setting, text = v2 / tmp_name, "cpu.max", "50000 100000"
        with contextlib.suppress(OSError):  # the controller handed down to child groups
            (v2 / "cgroup.subtree_control").write_text("+cpu")
    else:
        pytest.skip("no cgroup CPU controller here")
    try:
        group.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a cgroup here: {exc}")
    return group, setting, text


def test_a_process_in_a_real_cgroup_with_half_a_cpu_uses_one(tmp_path: Path) -> None:
    # the kernel's own files, not a copy: a child process moves itself into a group limited to
    # 0.5 CPU and reports what hwtp would size its pools by
    group, setting, text = _own_group(f"hwtp-test-{os.getpid()}")
    try:
        try:
            (group / setting).write_text(text)
        except OSError as exc:
            pytest.skip(f"cannot set a CPU quota here: {exc}")
        script = (
            "import os, sys\n"
            f"open({str(group / 'cgroup.procs')!r}, 'w').write(str(os.getpid()))\n"
            "from hwtp.sim.cpus import cgroup_quota, usable_cpus\n"
            "print(cgroup_quota(), usable_cpus())\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
        assert done.stdout.split() == ["0.5", "1"]
    finally:
        group.rmdir()
