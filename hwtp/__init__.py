"""hwtp: hardware test plans with a reinforcement-learning feedback loop."""

from __future__ import annotations

__version__ = "0.1.0"
