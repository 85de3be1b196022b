"""hwtp.sim.switching: the short switch interval held while the reward path reads plans."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from hwtp.sim import switching


@pytest.fixture(autouse=True)
def _interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_the_interval_is_short_while_held_and_restored_after() -> None:
    sys.setswitchinterval(0.005)
    with switching.responsive():
        assert sys.getswitchinterval() == pytest.approx(switching.SWITCH_S)
        with switching.responsive():  # re-entrant
            assert sys.getswitchinterval() == pytest.approx(switching.SWITCH_S)
        assert sys.getswitchinterval() == pytest.approx(switching.SWITCH_S)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_a_shorter_interval_is_left_alone() -> None:
    sys.setswitchinterval(switching.SWITCH_S / 4)
    with switching.responsive():
        assert sys.getswitchinterval() == pytest.approx(switching.SWITCH_S / 4)
    assert sys.getswitchinterval() == pytest.approx(switching.SWITCH_S / 4)


def test_an_interval_set_meanwhile_stays() -> None:
    sys.setswitchinterval(0.005)
    with switching.responsive():
        sys.setswitchinterval(0.002)  # the user's own, set while hwtp held its interval
    assert sys.getswitchinterval() == pytest.approx(0.002)


def test_threads_share_it_and_the_last_one_out_restores_it() -> None:
    sys.setswitchinterval(0.005)
    inside, leave = threading.Barrier(3), threading.Event()
    seen: list[float] = []

    def hold() -> None:
        with switching.responsive():
            inside.wait()
            leave.wait()
            seen.append(sys.getswitchinterval())

    first = threading.Thread(target=hold)
    second = threading.Thread(target=hold)
    first.start()
    second.start()
    inside.wait()
    assert sys.getswitchinterval() == pytest.approx(switching.SWITCH_S)
    leave.set()
    first.join()
    second.join()
    assert seen == [pytest.approx(switching.SWITCH_S)] * 2
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_an_exception_inside_restores_it() -> None:
    sys.setswitchinterval(0.005)
    with pytest.raises(RuntimeError), switching.responsive():
        raise RuntimeError("a reward call failed")
    assert sys.getswitchinterval() == pytest.approx(0.005)
