"""hwtp: hardware test plans with a reinforcement-learning feedback loop."""

from __future__ import annotations

from pathlib import Path as _Path

__version__ = "0.1.0"


def _checkout_subpackages() -> None:
    """Make ``hwtp.sim``, ``hwtp.mutators`` and ``hwtp.designs`` importable from a source checkout.

    Installed, those three folders sit inside the package (pyproject.toml maps the checkout's
    top-level ``sim/``, ``mutators/`` and ``designs/`` there). Python started in the checkout's
    root (a script, ``python -c``, a Ray worker that puts the driver's folder on its path) finds
    ``./hwtp`` first, where they are siblings instead: the checkout root then joins the
    package's search path, so the same code answers both ways.
    """
    here = _Path(__file__).resolve().parent
    root = here.parent
    if (here / "sim").is_dir() or not (root / "sim" / "__init__.py").is_file():
        return  # installed (or an editable install's own mapping): nothing to add
    if not (root / "pyproject.toml").is_file():
        return
    if str(root) not in __path__:
        __path__.append(str(root))


_checkout_subpackages()
