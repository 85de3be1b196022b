"""Plan steps in the simulator: the timing rules of docs/plan-format.md, implemented once.

:class:`PlanTiming` is where a test stands in simulated time and what each step does to it;
:func:`bits_match` is the ``expect`` comparison. ``hwtp.sim.harness.Harness`` runs every
scored plan through them, and ``hwtp export-tests`` copies this module's code (everything
after this docstring) unchanged into each exported cocotb module, where :class:`PlanRunner`
runs the exported steps. So this module imports nothing but cocotb and the standard library:
an exported module must run without hwtp installed.

The rules: the clock starts low and rises at P/2; between steps a test stands P/4 after a
falling edge, inside the low phase, away from any edge (a mutant clocked on ``negedge`` never
races a drive). ``drive`` sets inputs at once; ``expect`` first lets combinational logic
settle (one 1 ps step) when inputs changed since the last edge, then compares; ``wait N``
advances to the same phase N rising edges later (N ns on a combinational design); ``reset N``
holds the reset at its active level for N cycles, then releases it; every test starts with
every input at 0 (the reset inactive), then the design's reset.
"""

from collections.abc import Sequence
from typing import Any

from cocotb.clock import Clock
from cocotb.triggers import Timer

SETTLE_PS = 1  # how long driven inputs get to propagate before an expect
COMB_UNIT_PS = 1000  # wait(1) on a combinational design


class PlanTiming:
    """Where a test stands in simulated time, and the steps that move it.

    ``period_ps`` is the clock period (0: combinational design), a multiple of 4; ``reset`` is
    (port, active level, cycles) or None; ``inputs`` are the inputs a test starts at 0 (the
    reset port among them starts inactive). Subclasses say how an input is written.
    """

    def __init__(self, period_ps: int, reset: tuple[str, int, int] | None, inputs: Sequence[str]) -> None:
        self.period_ps = period_ps
        self.reset_spec = reset
        self.input_names = tuple(inputs)
        self.offset = 0  # ps spent settling since the test last stood at its phase
        self.dirty = False  # inputs driven since the last clock edge
        self.cycle = 0  # rising edges since the test started (after its power-on reset)

    def write(self, name: str, value: int) -> None:
        raise NotImplementedError

    async def start_clock(self, port: Any) -> None:
        """Start the clock on ``port`` low now (rising at P/2), and stand at P/4."""
        Clock(port, self.period_ps, unit="ps").start(start_high=False)
        await Timer(self.period_ps // 4, "ps")
        self.offset = 0

    async def begin(self) -> None:
        """Where every test starts: inputs at 0 (the reset inactive), then the design's reset."""
        for name in self.input_names:
            self.write(name, 1 - self.reset_spec[1] if self.reset_spec and name == self.reset_spec[0] else 0)
        self.dirty = True
        if self.reset_spec:
            await self.reset(self.reset_spec[2])
        elif not self.period_ps:
            await self.settle()
        self.cycle = 0

    def drive(self, *pairs: tuple[str, int], **values: int) -> None:
        """Set inputs at once, as (name, value) pairs or keywords; they hold until driven again."""
        for name, value in (*pairs, *values.items()):
            self.write(name, value)
        self.dirty = True

    async def wait(self, cycles: int) -> None:
        """Advance to the same phase ``cycles`` rising edges later (N ns when combinational)."""
        if self.period_ps:
            await Timer(cycles * self.period_ps - self.offset, "ps")
            self.cycle += cycles
        else:  # to the same place in the ns N ns later: settling may have passed whole ns, in one
            # test or, in a warm process, over many tests that never waited
            await Timer(cycles * COMB_UNIT_PS - self.offset % COMB_UNIT_PS, "ps")
        self.offset = 0
        self.dirty = False

    async def settle(self) -> None:
        """Let inputs driven since the last edge propagate (before an expect)."""
        if not self.dirty:
            return
        if self.period_ps and self.offset + SETTLE_PS >= self.period_ps // 4:
            raise ValueError("too many drive/expect alternations within one clock cycle")
        await Timer(SETTLE_PS, "ps")
        self.offset += SETTLE_PS
        self.dirty = False

    async def reset(self, cycles: int) -> None:
        """Hold the reset at its active level for ``cycles`` cycles, then release it."""
        if self.reset_spec is None:
            raise ValueError("the design has no reset")
        port, active, _ = self.reset_spec
        self.write(port, active)
        self.dirty = True
        await self.wait(cycles)
        self.write(port, 1 - active)
        self.dirty = True


def bits_match(bits: str, value: int, mask: int) -> bool:
    """Whether ``bits`` (most significant first; x/z never match) equal ``value`` on every bit
    set in ``mask``: the bits of an expected value that are not don't-care."""
    width = len(bits)
    return all(bits[width - 1 - i] == str((value >> i) & 1) for i in range(width) if (mask >> i) & 1)


class PlanRunner(PlanTiming):
    """Runs the steps of one exported test against ``dut`` through cocotb's public API.

    ``clock`` is (port, period in ps) or None (combinational design); ``inputs`` include the
    reset port.
    """

    def __init__(
        self, dut: Any, clock: tuple[str, int] | None, reset: tuple[str, int, int] | None, inputs: Sequence[str]
    ) -> None:
        super().__init__(clock[1] if clock else 0, reset, inputs)
        self.dut = dut
        self.clock = clock

    def write(self, name: str, value: int) -> None:
        getattr(self.dut, name).value = value

    async def start(self) -> None:
        """Start the clock and bring the design to where every test starts."""
        if self.clock:
            await self.start_clock(getattr(self.dut, self.clock[0]))
        await self.begin()

    async def expect(self, step: int, /, **expected: int | tuple[int, int]) -> None:
        """Compare outputs; a value is an int, or (value, mask) when some bits are don't-care."""
        await self.settle()
        for name, want in expected.items():
            bits = str(getattr(self.dut, name).value)  # most significant bit first
            full = (1 << len(bits)) - 1
            value, mask = want if isinstance(want, tuple) else (want, full)
            assert bits_match(bits, value, mask), (
                f"step {step}: {name} = {_shown(bits)}, expected {_pattern(value, mask, len(bits))}"
            )


def _shown(bits: str) -> str:
    return str(int(bits, 2)) if set(bits) <= {"0", "1"} else bits


def _pattern(value: int, mask: int, width: int) -> str:
    if mask == (1 << width) - 1:
        return str(value)
    return "".join(str((value >> i) & 1) if (mask >> i) & 1 else "x" for i in reversed(range(width)))
