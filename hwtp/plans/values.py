"""Values in test plans: integers, ``0x``/``0b``/``0o`` strings, Verilog sized literals.

A :class:`Value` is an integer plus a mask of the bits that matter: ``x``, ``z`` and ``?``
digits in a literal are don't-care bits (allowed only in ``expect``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SIZED = re.compile(r"^\s*(\d+)?\s*'\s*([sS])?\s*([bBoOdDhH])\s*([0-9a-fA-FxXzZ?_]+)\s*$")
_PREFIXED = re.compile(r"^\s*(-)?\s*0([xXbBoO])([0-9a-fA-F_]+)\s*$")
_DECIMAL = re.compile(r"^\s*(-)?\s*(\d[\d_]*)\s*$")
_BITS = {"b": 1, "o": 3, "h": 4}
_DONT_CARE = set("xXzZ?")
#: Widest literal accepted (bits); ports are far narrower.
MAX_LITERAL_BITS = 4096


class ValueError_(ValueError):
    """A value that is not a valid plan literal (the message says why)."""


@dataclass(frozen=True)
class Value:
    """A literal: ``bits`` (two's complement, unbounded), ``care`` mask (None = all bits),
    ``size`` when the literal is sized (``8'hff``), ``negative`` for negative numbers."""

    bits: int
    care: int | None = None
    size: int | None = None
    negative: bool = False

    def fits(self, width: int, signed: bool) -> str | None:
        """None when the value fits a port of ``width`` bits, else why not."""
        if self.size is not None and self.size > width:
            return f"is a {self.size}-bit literal, wider than the {width}-bit port"
        if self.negative:
            if not signed:
                return f"is negative but the {width}-bit port is unsigned"
            if self.bits < -(1 << (width - 1)):
                return f"does not fit the {width}-bit signed port"
            return None
        limit = (1 << width) - 1
        if self.bits > limit:
            return f"needs {self.bits.bit_length()} bits, wider than the {width}-bit port (max {limit})"
        if self.care is not None and self.care > limit:
            return f"is wider than the {width}-bit port"
        return None

    def masked(self, width: int) -> tuple[int, int]:
        """(value, mask) truncated to ``width`` bits, two's complement for negatives."""
        full = (1 << width) - 1
        mask = full if self.care is None else self.care & full
        return self.bits & full & mask, mask

    @property
    def has_dont_care(self) -> bool:
        return self.care is not None

    def literal(self) -> int | str:
        """Canonical form for output: the integer, ``8'hff`` when sized, ``4'b1x0x`` with x bits.

        >>> parse_value("4'b10x1").literal(), parse_value("8'hff").literal(), parse_value(-3).literal()
        ("4'b10x1", "8'hff", -3)
        """
        if self.care is None:
            return self.bits if self.size is None else f"{self.size}'h{self.bits:x}"
        width = self.size or max(self.bits.bit_length(), (~self.care).bit_length(), 1)
        digits = "".join("x" if not (self.care >> b) & 1 else str((self.bits >> b) & 1) for b in reversed(range(width)))
        return f"{width}'b{digits}"


def parse_value(raw: object) -> Value:
    """Parse one plan value.

    >>> parse_value(5), parse_value("0xff").bits, parse_value("8'hff").size
    (Value(bits=5, care=None, size=None, negative=False), 255, 8)
    >>> v = parse_value("4'b10x1"); v.bits, v.masked(4)
    (9, (9, 13))
    >>> parse_value(-3).negative
    True
    """
    if isinstance(raw, bool):
        return Value(int(raw))
    if isinstance(raw, int):
        return Value(raw, negative=raw < 0)
    if not isinstance(raw, str):
        raise ValueError_(f"expected an integer or a literal string, got {type(raw).__name__}")
    text = raw.strip()
    if text.lower() in ("x", "z", "?"):
        return Value(0, care=0)
    if match := _DECIMAL.match(text):
        number = int(match.group(2).replace("_", ""))
        return Value(-number if match.group(1) else number, negative=bool(match.group(1)) and number != 0)
    if match := _PREFIXED.match(text):
        sign, base, digits = match.groups()
        number = int(digits.replace("_", ""), {"x": 16, "b": 2, "o": 8}[base.lower()])
        return Value(-number if sign else number, negative=bool(sign) and number != 0)
    if match := _SIZED.match(text):
        return _parse_sized(text, *match.groups())
    raise ValueError_(f"{raw!r} is not a number or Verilog literal (e.g. 5, 0xff, 8'hff, 4'b10x1)")


def _parse_sized(text: str, size_s: str | None, _signed: str | None, base: str, digits: str) -> Value:
    size = int(size_s) if size_s else None
    if size is not None and not 1 <= size <= MAX_LITERAL_BITS:
        raise ValueError_(f"{text!r}: size must be between 1 and {MAX_LITERAL_BITS}")
    digits = digits.replace("_", "")
    if not digits:
        raise ValueError_(f"{text!r}: no digits")
    base = base.lower()
    if base == "d":
        if any(c in _DONT_CARE for c in digits):
            if len(digits) != 1:
                raise ValueError_(f"{text!r}: x/z in a decimal literal must be the only digit")
            return Value(0, care=0, size=size)
        if not digits.isdigit():
            raise ValueError_(f"{text!r}: invalid decimal digits")
        bits = int(digits)
        if size is not None and bits >= 1 << size:
            raise ValueError_(f"{text!r}: value does not fit in {size} bits")
        return Value(bits, size=size)
    step = _BITS[base]
    bits = care = 0
    for ch in digits:
        bits <<= step
        care <<= step
        if ch in _DONT_CARE:
            continue
        try:
            digit = int(ch, 1 << step)
        except ValueError as exc:
            raise ValueError_(f"{text!r}: {ch!r} is not a base-{1 << step} digit") from exc
        bits |= digit
        care |= (1 << step) - 1
    n = step * len(digits)
    # Bits above the digits: x-extended after a leading x/z digit, else zero (and cared for).
    # ``care`` is a two's-complement mask, so "every bit above n" is a negative number.
    if digits[0] not in _DONT_CARE:
        care |= -1 << n
    if size is not None:
        if bits >> size:
            raise ValueError_(f"{text!r}: value does not fit in {size} bits")
        care = (care & ((1 << size) - 1)) | (-1 << size)  # zero-extended past its size
        return Value(bits, care=None if care == -1 else care, size=size)
    return Value(bits, care=None if care == -1 else care)
