"""``hwtp.yaml``: the project's configuration file, read in one place.

The file is read and loaded here, once per command (bounded YAML with line numbers, through
:mod:`hwtp.yamlio`); its ``run:`` section is handed to :mod:`hwtp.run.config` (``hwtp run``)
and its other top-level keys to :mod:`hwtp.ci.config` (``hwtp ci``, ``export-tests``). Every
error names ``file:line: field: what is wrong``.
"""

from __future__ import annotations

from pathlib import Path

from hwtp import yamlio
from hwtp.ci import config as ci_config
from hwtp.errors import ConfigError
from hwtp.run import config as run_config

CONFIG_NAME = "hwtp.yaml"


def locate(path: Path) -> Path:
    """The configuration file ``path`` names: a folder means its ``hwtp.yaml``."""
    return path / CONFIG_NAME if path.is_dir() else path


def read(path: Path) -> yamlio.Located:
    """Read and load the file (an empty file is an empty mapping); :class:`ConfigError` names
    the file and line of what cannot be read or loaded."""
    located = yamlio.load_file(path, ConfigError)
    if located.data is None:
        return yamlio.Located({}, located.lines)
    if not isinstance(located.data, dict):
        raise yamlio.located_error(ConfigError, path, located, (), "expected a mapping (design, tests, ..., run)")
    return located


def load_ci(path: Path) -> ci_config.CiConfig:
    """``hwtp ci``'s configuration from the file ``path`` names (or the ``hwtp.yaml`` in it)."""
    path = locate(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such file (write a starter one with `hwtp ci init`)")
    return ci_config.from_document(path, read(path))


def load_run(path: Path) -> run_config.FileValues:
    """The values of the file's ``run:`` section, checked field by field."""
    return run_config.from_document(path, read(path))
