"""defaults.server_cpus: CPU lists, the split of this host's CPUs, and affinity itself."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgfsbench.spec.models import Defaults
from pgfsbench.system.cpus import (
    cpu_record,
    format_cpu_list,
    parse_cpu_list,
    pin_process,
    split_cpus,
    this_thread_on,
)


@given(st.frozensets(st.integers(0, 300), min_size=1))
def test_a_cpu_list_reads_back_as_it_was_written(cpus: frozenset[int]) -> None:
    text = format_cpu_list(cpus)
    assert parse_cpu_list(text) == cpus
    assert " " not in text and ",," not in text


def test_cpu_lists_as_the_kernel_writes_them() -> None:
    assert parse_cpu_list("0") == {0}
    assert parse_cpu_list("0-3,8") == {0, 1, 2, 3, 8}
    assert parse_cpu_list("1, 3-4") == {1, 3, 4}
    assert format_cpu_list({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    for bad in ("", "a", "3-1", "1,,2", "-1", "1-", "0-99999"):
        with pytest.raises(ValueError):
            parse_cpu_list(bad)


def test_the_spec_refuses_a_malformed_list_and_keeps_a_good_one() -> None:
    assert Defaults(server_cpus="0-1").server_cpus == "0-1"
    with pytest.raises(ValueError, match="runs backwards"):
        Defaults(server_cpus="2-1")


def test_the_split_leaves_the_clients_every_other_cpu_and_refuses_what_cannot_be() -> None:
    split = split_cpus("0", frozenset({0, 1, 2, 3}))
    assert split.server == {0} and split.clients == {1, 2, 3}
    assert split.as_dict() == {"server": "0", "clients": "1-3"}
    with pytest.raises(ValueError, match="CPU 4 is not among"):
        split_cpus("3-4", frozenset({0, 1, 2, 3}))
    with pytest.raises(ValueError, match="no CPU for the clients"):
        split_cpus("0-1", frozenset({0, 1}))


needs_two = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 CPUs")


@needs_two
def test_a_process_and_every_thread_it_has_are_moved_and_its_children_inherit() -> None:
    first = min(os.sched_getaffinity(0))
    # a process with a second thread (python: the main one and a sleeping one)
    code = (
        "import threading, time, os, sys\n"
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
        "sys.stdin.readline()\n"
        "sys.stdout.write(','.join(map(str, sorted(os.sched_getaffinity(0)))) + '\\n')\n"
        "sys.stdout.flush()\n"
        "os.execvp('sh', ['sh', '-c', 'cat /proc/self/status'])\n"
    )
    proc = subprocess.Popen(
        ["python3", "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
        tids = os.listdir(f"/proc/{proc.pid}/task")
        assert len(tids) >= 2
        pin_process(proc.pid, frozenset({first}))
        for tid in tids:
            assert os.sched_getaffinity(int(tid)) == {first}
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == str(first)
        status = proc.stdout.read()
        assert f"Cpus_allowed_list:\t{first}" in status  # what it exec'd kept it
    finally:
        proc.kill()
        proc.wait()
    pin_process(proc.pid, frozenset({first}))  # gone: nothing to do, no error


@needs_two
def test_this_thread_only_and_put_back() -> None:
    before = frozenset(os.sched_getaffinity(0))
    last = max(before)
    seen: dict[str, set[int]] = {}
    with this_thread_on(frozenset({last})):
        assert os.sched_getaffinity(0) == {last}
        other = threading.Thread(target=lambda: seen.update(t=os.sched_getaffinity(0)))
        other.start()
        other.join()
        child = subprocess.run(
            ["grep", "Cpus_allowed_list", "/proc/self/status"], capture_output=True, text=True
        )
        split = split_cpus(format_cpu_list(before - {last}), before)
        record = cpu_record(split, {"postmaster": os.getpid(), "gone": None})
    assert seen["t"] == {last}  # a thread started meanwhile inherits it
    assert child.stdout.split()[-1] == str(last)  # and so does a child
    assert os.sched_getaffinity(0) == before
    assert record["clients_at_end"] == str(last)
    assert record["server"] == format_cpu_list(before - {last})
    assert record["postmaster_at_end"] == str(last) and record["gone_at_end"] is None
    with this_thread_on(None):
        assert os.sched_getaffinity(0) == before


def test_plan_says_what_the_split_is_on_this_host_or_why_it_cannot_be() -> None:
    from pgfsbench.plan import cpu_split_line

    have = frozenset(os.sched_getaffinity(0))
    every = cpu_split_line(format_cpu_list(have))
    assert "leaves no CPU for the clients" in every and "the run will refuse it" in every
    assert "is not among" in cpu_split_line(str(max(have) + 1))
    if len(have) >= 2:
        line = cpu_split_line(str(min(have)))
        assert f"on CPU {min(have)}, pgfsbench and the clients" in line
        assert line.endswith(f"on CPU {format_cpu_list(have - {min(have)})}")
