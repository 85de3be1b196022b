"""Outputs that cannot be written: a read-only ``-o``, a dangling symbolic link, a read-only cache
folder, a full disk. Each is exit 2 with the path named and no traceback, refused before any work;
an export is written whole or not at all (no truncated shard is left behind)."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_bad_input import refused
from test_export import _scores

Run = Callable[..., tuple[int, str, str]]
PLAN = "tests:\n  - name: t\n    steps:\n      - drive: {a: 3}\n      - expect: {y: 3}\n"
RTL = "module t(input wire [3:0] a, output wire [3:0] y);\n  assign y = a;\nendmodule\n"


def _mount(folder: Path, options: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")


def _unmount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], check=False, capture_output=True)


@pytest.fixture
def readonly(tmp_path: Path) -> Iterator[Path]:
    """A folder nobody can write into: mode 0555, or (root ignores modes) a read-only tmpfs."""
    folder = tmp_path / "ro"
    if os.geteuid() != 0:
        folder.mkdir()
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    _mount(folder, "ro,size=64k")
    try:
        yield folder
    finally:
        _unmount(folder)


@pytest.fixture
def full(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs filled up to its last two pages."""
    folder = tmp_path / "full"
    _mount(folder, "size=64k")
    try:
        fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)
        os.truncate(folder / "filler", os.path.getsize(folder / "filler") - 2 * 4096)
        yield folder
    finally:
        _unmount(folder)


def _inputs(tmp_path: Path) -> dict[str, Path]:
    scores, plans = _scores(tmp_path)
    rtl = tmp_path / "t.v"
    rtl.write_text(RTL)
    plan = tmp_path / "p.yaml"
    plan.write_text(PLAN)
    return {"scores": scores, "plans": plans, "rtl": rtl, "plan": plan}


def _commands(i: dict[str, Path], out: Path) -> dict[str, list[object]]:
    """Every command that writes, with ``out`` where it writes (a folder or a file)."""
    return {
        "mutate": ["mutate", "counter_en_load", "-n", "2", "-o", out / "m"],
        "plan": ["plan", i["plans"], "-G", "1", "-o", out / "p"],
        "score --json": ["score", i["plans"], "--plans", i["plans"], "--json", out / "s.json"],
        "export": ["export", i["scores"], "--plans", i["plans"], "-o", out / "e"],
        "advantage -o": ["advantage", i["scores"], "-o", out / "a.jsonl"],
        "report": ["report", i["scores"], "-o", out / "r.html"],
        "run": ["run", "counter_en_load", "-G", "1", "--states", "2", "-o", out / "run"],
        "sim --json": ["sim", i["rtl"], i["plan"], "--top", "t", "--clock", "none", "--json", out / "s.json"],
    }


COMMANDS = list(_commands({k: Path(k) for k in ("scores", "plans", "rtl", "plan")}, Path("x")))


@pytest.mark.parametrize("command", COMMANDS)
def test_a_read_only_output_is_refused_before_any_work(
    command: str, tmp_path: Path, readonly: Path, run_cli: Run
) -> None:
    args = _commands(_inputs(tmp_path), readonly)[command]
    err = refused(run_cli(*args), str(readonly))
    assert "read-only file system" in err or "permission denied" in err, err
    assert not any(readonly.iterdir())


@pytest.mark.parametrize("command", COMMANDS)
def test_a_dangling_symlink_as_output_is_refused(command: str, tmp_path: Path, run_cli: Run) -> None:
    args = _commands(_inputs(tmp_path), tmp_path / "out")[command]
    target = Path(str(args[-1]))
    target.parent.mkdir(exist_ok=True)
    target.symlink_to(tmp_path / "gone" / "away")
    refused(run_cli(*args), str(target), "a symbolic link to", "which does not exist")
    assert not (tmp_path / "gone").exists()


def test_a_read_only_cache_folder_names_the_variable(
    tmp_path: Path, readonly: Path, run_cli: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    i = _inputs(tmp_path)
    monkeypatch.setenv("HWTP_CACHE_DIR", str(readonly / "cache"))
    refused(run_cli("sim", i["rtl"], i["plan"], "--top", "t", "--clock", "none"), f"{readonly}/cache", "HWTP_CACHE_DIR")


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_an_export_on_a_full_disk_leaves_nothing_behind(fmt: str, tmp_path: Path, full: Path, run_cli: Run) -> None:
    """8 shards on a disk with room for two: exit 2 naming the shard that did not fit; no shard,
    temporary file or manifest is left (whole or not at all)."""
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    i = _inputs(tmp_path)
    out = full / "export"
    args = ["export", i["scores"], "--plans", i["plans"], "--format", fmt, "--group-by", "state", "--batch-size", "1"]
    refused(run_cli(*args, "-o", out), f"{out}/data/train-", "No space left on device")
    assert sorted(p.name for p in full.iterdir()) == ["filler"]
    # the same export where there is room: whole, its 8 shards and manifest
    code, _, err = run_cli(*args, "-o", tmp_path / "roomy")
    assert code == 0, err
    assert len(list((tmp_path / "roomy" / "data").iterdir())) == 8


def test_a_full_device_as_a_single_output_file(tmp_path: Path, run_cli: Run) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    i = _inputs(tmp_path)
    refused(run_cli("advantage", i["scores"], "-o", "/dev/full"), "/dev/full: cannot write: No space left on device")
    assert Path("/dev/full").is_char_device()


@pytest.mark.sim
def test_a_full_disk_during_mutate_is_one_line_naming_the_file(tmp_path: Path, full: Path, run_cli: Run) -> None:
    """Writes no check can foresee (the disk fills up half way through a mutant set) end in one
    line naming the file, exit 2, never a traceback."""
    refused(run_cli("mutate", "counter_en_load", "-n", "4", "-o", full / "m"), f"{full}/m", "No space left on device")
