"""The policy's prompt: the state's spec, ports and standalone RTL, plus the plan format.

Templates are files (``hwtp/policy/templates``; ``--prompt-template DIR`` overrides them) with
``{{name}}`` placeholders, filled by plain text replacement: no template engine evaluates
anything. The prompt of a mutant state differs from golden's only inside the RTL text, at
the mutation: nothing tells a policy which state is a mutant.
"""

from __future__ import annotations

import importlib.resources
import re
from dataclasses import dataclass
from pathlib import Path

from hwtp.errors import ConfigError
from hwtp.rtl.design import Design, SourceFile

Messages = list[dict[str, str]]
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_FILES = ("system.md", "user.md", "format.md")


@dataclass(frozen=True)
class Templates:
    """The three template texts."""

    system: str
    user: str
    format: str

    @classmethod
    def load(cls, folder: Path | None = None) -> Templates:
        """Built-in templates, each overridable by a same-named file in ``folder``."""
        builtin = importlib.resources.files("hwtp.policy.templates")
        texts = {}
        for name in _FILES:
            override = folder / name if folder else None
            if folder is not None and not folder.is_dir():
                raise ConfigError(f"--prompt-template {folder}: not a folder")
            path = override if override and override.is_file() else None
            texts[name] = (
                path.read_text(encoding="utf-8") if path else builtin.joinpath(name).read_text(encoding="utf-8")
            )
        return cls(texts["system.md"].strip(), texts["user.md"].strip(), texts["format.md"].strip())


def _ports(design: Design) -> str:
    lines = ["| port | direction | width | signed |", "|---|---|---|---|"]
    for p in design.ports:
        role = ""
        if design.clock and p.name == design.clock.port:
            role = " (clock)"
        elif design.reset and p.name == design.reset.port:
            role = f" (reset, active {design.reset.active})"
        lines.append(f"| {p.name}{role} | {p.direction} | {p.width} | {'yes' if p.signed else 'no'} |")
    return "\n".join(lines)


def _timing(design: Design) -> str:
    if design.clock is None:
        return "The design is combinational: `wait` only lets inputs settle; there is no reset."
    text = f"The clock is `{design.clock.port}` ({design.clock.period_ns:g} ns period)."
    if design.reset:
        text += (
            f" The reset `{design.reset.port}` is active {design.reset.active}; each test starts after a "
            f"{design.reset.cycles}-cycle reset, and a `reset: N` step resets again."
        )
    return text


def _rtl(sources: tuple[SourceFile, ...]) -> str:
    if len(sources) == 1:
        return sources[0].text.rstrip("\n")
    return "\n\n".join(f"// file: {s.path}\n{s.text.rstrip()}" for s in sources)


def build_messages(design: Design, sources: tuple[SourceFile, ...], templates: Templates) -> Messages:
    """Chat messages for one state: ``sources`` is the state's standalone RTL."""
    fields = {
        "spec": design.spec.strip() or "(no specification given)",
        "ports": _ports(design),
        "timing": _timing(design),
        "format": templates.format,
        "rtl": _rtl(sources),
    }
    # One pass over the template: inserted text (spec, RTL) is never scanned for placeholders.
    user = _PLACEHOLDER.sub(lambda m: fields.get(m.group(1), m.group(0)), templates.user)
    return [{"role": "system", "content": templates.system}, {"role": "user", "content": user}]
