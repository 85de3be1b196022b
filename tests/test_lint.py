"""The code stays ruff and mypy clean (ARCHITECTURE.md): checked with the tools in the test extras."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> list[str]:
    exe = shutil.which(name) or str(Path(sys.executable).with_name(name))
    if not Path(exe).exists():
        pytest.skip(f"{name} is not installed (pip install '.[test]')")
    return [exe]


def test_ruff_clean() -> None:
    result = subprocess.run([*_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_clean() -> None:
    result = subprocess.run([*_tool("mypy"), "hwtp", "sim", "mutators"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
