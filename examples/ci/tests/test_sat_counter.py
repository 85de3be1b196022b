"""A deliberately incomplete cocotb testbench for sat_counter.

It checks reset and counting up, and nothing else: no counting down, no saturation, no
at_max/at_min flags, no inc and dec together. `hwtp ci` shows which bugs slip through.
"""

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge


async def reset(dut):
    Clock(dut.clk, 10, unit="ns").start(start_high=False)
    dut.inc.value = 0
    dut.dec.value = 0
    dut.rst_n.value = 0
    for _ in range(2):
        await RisingEdge(dut.clk)
    await FallingEdge(dut.clk)
    dut.rst_n.value = 1


@cocotb.test()
async def test_reset_clears_count(dut):
    await reset(dut)
    assert int(dut.count.value) == 0


@cocotb.test()
async def test_counts_up(dut):
    await reset(dut)
    dut.inc.value = 1
    for _ in range(5):
        await FallingEdge(dut.clk)
    assert int(dut.count.value) == 5
