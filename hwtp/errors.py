"""The one error hierarchy of hwtp.

Library code raises these (third-party errors are re-raised ``from exc``); the CLI maps them
once, in :func:`hwtp.cli.main.main`, to a one-line message and an exit code (docs/reference/commands.md, exit codes).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_GATE = 1
EXIT_INPUT = 2
EXIT_TOOLCHAIN = 3


class HwtpError(Exception):
    """Base of every error hwtp raises on purpose. ``exit_code`` is what the CLI returns."""

    exit_code: int = EXIT_INPUT


class DesignError(HwtpError):
    """A design (manifest, sources, RTL) is missing, malformed or does not parse."""


class UntrustedError(DesignError):
    """The trust check refused what the compiler would read (:func:`hwtp.rtl.trust.check`): bad
    input wherever the text came from, a design's files or a mutant set's edits."""


class PlanError(HwtpError):
    """A test plan is malformed or does not fit the design's ports."""


class MutantError(HwtpError):
    """A mutant directory or mutation request is malformed."""


class ScoreError(HwtpError):
    """Scores or their inputs are malformed."""


class RewardError(HwtpError):
    """A reward request cannot be scored: its ground truth is malformed, or names a mutant set
    (design, hash) that is not in the configured folders. Never turned into a reward of 0."""


class ConfigError(HwtpError):
    """A configuration value or combination of options is invalid."""


class PolicyError(HwtpError):
    """A policy (LLM endpoint, replay source) failed or is misconfigured."""


class PolicyUnavailable(PolicyError):
    """The policy could not produce some samples (an endpoint failed after its retries).

    Those samples get no plan record, so they are never scored, advantaged or exported; what
    was produced is kept and a rerun asks only for the missing samples. Exit 1: the command
    could not finish, the input was fine.
    """

    exit_code = EXIT_GATE


class EndpointAuthError(PolicyError):
    """The endpoint refused the API key (HTTP 401/403): bad input, stops at once."""


class OutputError(HwtpError):
    """A file or folder hwtp must write cannot be: a read-only file system, no permission, a
    dangling symbolic link, a file where a folder is needed, a full disk. Exit 2: the path given
    (or its disk) must change; nothing is left half written (:mod:`hwtp.outputs`)."""


class StoreError(HwtpError):
    """The run store is corrupt, foreign, locked or inconsistent with the request."""


class ToolchainError(HwtpError):
    """The simulator toolchain is missing, too old or broken."""

    exit_code = EXIT_TOOLCHAIN


class SimulationError(HwtpError):
    """A simulator process crashed or produced no result."""

    exit_code = EXIT_TOOLCHAIN


class InternalError(HwtpError):
    """hwtp's own fault: code it generated (a schemata build) does not build while the input it
    came from does. Never bad input. ``kept``: where the generated sources and the tool's
    message are kept for a bug report."""

    exit_code = EXIT_TOOLCHAIN  # the documented codes stay 0-3: the build tool chain failed, not the input

    def __init__(self, message: str, kept: str | None = None) -> None:
        super().__init__(f"internal error (please report it): {message}" + (f" (kept: {kept})" if kept else ""))
        self.kept = kept
