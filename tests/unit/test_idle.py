"""The devices under test idle before the warm-up: the wait, its bound, and what it says."""

from __future__ import annotations

from pgfsbench.collect.idle import wait_idle


def diskstats(written: int, discarded: int = 0) -> str:
    # a kernel >= 4.18 line: 20 fields; sectors written is the 10th, discarded the 17th
    f = [
        "7",
        "3",
        "loop3",
        "10",
        "0",
        "80",
        "5",
        "20",
        "0",
        str(written),
        "9",
        "0",
        "30",
        "40",
        "1",
        "0",
        str(discarded),
        "2",
        "3",
        "4",
    ]
    return " ".join(f) + "\n"


def fake(readings: list[str]) -> tuple[object, object, object]:
    clock = [0.0]
    it = iter(readings)

    def read() -> str:
        return next(it)

    def sleep(s: float) -> None:
        clock[0] += s

    return read, (lambda: clock[0]), sleep


def test_a_device_busy_with_lazy_initialisation_is_waited_for_then_found_idle() -> None:
    # 8 MB/s of writes (16384 sectors a half second), then discards, then nothing
    mb = 2048  # sectors in 1 MB
    readings = [
        diskstats(0),
        diskstats(4 * mb),
        diskstats(8 * mb),
        diskstats(8 * mb, 4 * mb),
        diskstats(8 * mb, 4 * mb),
    ]
    read, clock, sleep = fake(readings)
    wait = wait_idle(["/dev/loop3"], read=read, clock=clock, sleep=sleep)  # type: ignore[arg-type]
    assert wait.idle and wait.waited_s == 2.0 and wait.busiest == "loop3"
    assert wait.as_dict()["write_mbps"] == 0.0


def test_a_device_that_stays_busy_ends_the_wait_at_its_bound_and_says_so() -> None:
    readings = [diskstats(i * 4096) for i in range(200)]  # 4 MB/s for ever
    read, clock, sleep = fake(readings)
    wait = wait_idle(["loop3"], read=read, clock=clock, sleep=sleep, max_s=5.0)  # type: ignore[arg-type]
    assert not wait.idle and wait.waited_s == 5.0
    assert round(wait.write_mbps, 1) == 4.2  # 4096 sectors of 512 B in 0.5 s
