"""The operator catalog: built-in operators, plug-ins, and selection by name or family.

Built-in families (see each module for the operators and their examples):

============  ==========================================================  ====================
family        what it does                                                module
============  ==========================================================  ====================
arithmetic    ``+ - * / %`` swaps                                         :mod:`.ops_tokens`
relational    ``< <= > >= == != === !==`` swaps                           :mod:`.ops_tokens`
logical       ``&&`` ↔ ``||``, remove ``!``                               :mod:`.ops_tokens`
bitwise       ``& | ^`` swaps, remove ``~``                               :mod:`.ops_tokens`
reduction     ``&x |x ^x ~^x ~&x ~|x`` swaps                              :mod:`.ops_tokens`
shift         ``<< >> <<< >>>`` swaps                                     :mod:`.ops_tokens`
unary         insert ``!``/``-``/``~`` before an operand, remove ``-``    :mod:`.ops_code`
constant      literal +1, -1, lowest bit flipped, all zeros, all ones     :mod:`.ops_values`
condition     negate an ``if``/``?:`` condition, force it true or false   :mod:`.ops_code`
case          drop a case item, swap two adjacent item bodies             :mod:`.ops_code`
assignment    delete a procedural assignment, ``=`` ↔ ``<=``              :mod:`.ops_code`
edge          ``posedge`` ↔ ``negedge``                                   :mod:`.ops_code`
index         bit-select index ±1, constant part-select shifted by one    :mod:`.ops_values`
equivalent    commute, De Morgan, double negation (``Site.equivalent``)   :mod:`.ops_equiv`
============  ==========================================================  ====================

Third-party operators register under the entry-point group ``hwtp.operators``: each entry
point loads to an operator object (see :class:`hwtp.mutators.base.Operator`) or a list of them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from importlib.metadata import entry_points

from hwtp.errors import MutantError
from hwtp.mutators.base import Operator, family_of
from hwtp.mutators.ops_code import code_operators
from hwtp.mutators.ops_equiv import equivalent_operators
from hwtp.mutators.ops_tokens import token_operators
from hwtp.mutators.ops_values import value_operators

ENTRY_POINT_GROUP = "hwtp.operators"

FAMILY_ORDER = ("arithmetic", "relational", "logical", "bitwise", "reduction", "shift", "unary",
                "constant", "condition", "case", "assignment", "edge", "index", "equivalent")


def builtin_operators() -> list[Operator]:
    """The built-in operators, grouped by family in :data:`FAMILY_ORDER`."""
    ops: list[Operator] = [*token_operators(), *code_operators(), *value_operators(),
                           *equivalent_operators()]
    return sorted(ops, key=lambda op: FAMILY_ORDER.index(family_of(op.name)))


def _check(op: object, origin: str) -> Operator:
    name = getattr(op, "name", None)
    if not isinstance(op, Operator) or not isinstance(name, str) or "." not in name.strip("."):
        raise MutantError(f"{origin}: not a mutation operator with a namespaced name "
                          f"(family.what) and a sites(ctx) method: {op!r}")
    return op


def _plugins() -> list[Operator]:
    found: list[Operator] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        origin = f"entry point {ep.name!r} ({ep.value}) in group {ENTRY_POINT_GROUP}"
        try:
            loaded = ep.load()
        except Exception as exc:  # a broken plug-in must say which one it is
            raise MutantError(f"{origin} failed to load: {exc}") from exc
        items = loaded if isinstance(loaded, list | tuple) else [loaded]
        found.extend(_check(op, origin) for op in items)
    return found


@functools.cache
def all_operators() -> tuple[Operator, ...]:
    """Every registered operator: the built-ins, then plug-ins, with unique names."""
    ops = (*builtin_operators(), *_plugins())
    seen: set[str] = set()
    for op in ops:
        if op.name in seen:
            raise MutantError(f"two mutation operators are named {op.name!r}")
        seen.add(op.name)
    return ops


def families() -> list[str]:
    """The families of the registered operators, in catalog order."""
    return list(dict.fromkeys(family_of(op.name) for op in all_operators()))


def _unknown(name: str) -> MutantError:
    names = ", ".join(op.name for op in all_operators())
    return MutantError(f"unknown mutation operator {name!r}; families: "
                       f"{', '.join(families())}; operators: {names}")


def get_operator(name: str) -> Operator:
    """The operator called ``name``; :class:`MutantError` listing the valid names if none."""
    for op in all_operators():
        if op.name == name:
            return op
    raise _unknown(name)


def select(names_or_families: Iterable[str | Operator] | None = None) -> list[Operator]:
    """Operators by exact name or by family (``relational``), in catalog order, without
    repeats. ``None`` selects every operator; operator objects are passed through."""
    if names_or_families is None:
        return list(all_operators())
    wanted: list[Operator] = []
    for item in names_or_families:
        if not isinstance(item, str):
            wanted.append(_check(item, "operator"))
            continue
        group = [op for op in all_operators() if item in (op.name, family_of(op.name))]
        if not group:
            raise _unknown(item)
        wanted.extend(group)
    return list({op.name: op for op in wanted}.values())
