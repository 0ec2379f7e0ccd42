"""`frugal run`: any program on every rank, started the way `frugal train` starts itself. Run by
ctest as one process (it starts the jobs); FRUGAL is the `frugal` command to test."""

import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

FRUGAL = os.environ.get("FRUGAL", "frugal")


def run(args, script=None, timeout=120):
    cmd = [FRUGAL] + args
    if script is not None:
        cmd += ["--", sys.executable, "-c", textwrap.dedent(script)]
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - start


def test_runs_program_on_every_rank():
    proc, _ = run(["run", "--np", "3"], """
        import frugal.torch as hvd, torch
        hvd.init()
        total = hvd.allreduce(torch.tensor([hvd.rank()]), op=hvd.Sum)
        print("rank %d of %d: %d" % (hvd.rank(), hvd.size(), int(total)))
    """)
    assert proc.returncode == 0, proc.stderr
    for r in range(3):
        assert "rank %d of 3: 3" % r in proc.stdout


def test_arguments_reach_the_program():
    proc, _ = run(["run", "--np", "2", "--", sys.executable, "-c",
                   # One write per rank: two ranks' writes never split each other's line.
                   "import sys; sys.stdout.write('args %r\\n' % (sys.argv[1:],))",
                   "--lr", "0.1", "x y"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("args ['--lr', '0.1', 'x y']") == 2


ALLREDUCE_AND_NETWORK = """
    import os, socket, torch
    import frugal.torch as hvd
    hvd.init()
    total = hvd.allreduce(torch.tensor([hvd.rank() + 1]), op=hvd.Sum)
    print("rank %d of %d: %d, netns %d" % (hvd.rank(), hvd.size(), int(total),
                                           os.stat("/proc/self/ns/net").st_ino))
"""


def ranks_and_namespaces(proc, n):
    """Each rank's report (sum of 1..n), and the network namespace every rank reported. The
    ranks' output may interleave within a line, so the reports are found anywhere in it."""
    namespaces = {}
    for rank, size, total, ns in re.findall(r"rank (\d+) of (\d+): (\d+), netns (\d+)",
                                            proc.stdout):
        namespaces["rank %s of %s: %s" % (rank, size, total)] = int(ns)
    expected = {"rank %d of %d: %d" % (r, n, n * (n + 1) // 2) for r in range(n)}
    assert set(namespaces) == expected, proc.stdout + proc.stderr
    return namespaces


def test_emulated_hosts_run_each_rank_in_its_own_namespace():
    proc, _ = run(["run", "--np", "2", "--emulate", "hosts=2,nic=100mbit"],
                  ALLREDUCE_AND_NETWORK)
    assert proc.returncode == 0, proc.stderr
    namespaces = ranks_and_namespaces(proc, 2)
    own = os.stat("/proc/self/ns/net").st_ino
    assert len(set(namespaces.values())) == 2
    assert own not in namespaces.values()


def test_hostfile_places_the_ranks(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost slots=3\n")
    proc, _ = run(["run", "--np", "3", "--hostfile", str(hosts)], ALLREDUCE_AND_NETWORK)
    assert proc.returncode == 0, proc.stderr
    ranks_and_namespaces(proc, 3)


def test_killed_rank_ends_the_job_naming_it():
    proc, seconds = run(["run", "--np", "2"], """
        import os, signal, torch
        import frugal.torch as hvd
        hvd.init()
        hvd.allreduce(torch.ones(4), name="before")
        if hvd.rank() == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        hvd.allreduce(torch.ones(4), name="after")  # rank 0 waits for the dead rank
    """)
    assert proc.returncode != 0
    assert seconds < 30
    assert "frugal: rank 1: %s was killed by signal 9" % sys.executable in proc.stderr


def test_failing_rank_exit_code_is_named():
    proc, _ = run(["run", "--np", "2"], """
        import sys
        import frugal.torch as hvd
        hvd.init()
        sys.exit(3 if hvd.rank() == 1 else 0)
    """)
    assert proc.returncode != 0
    assert "frugal: rank 1: %s exited with code 3" % sys.executable in proc.stderr


def test_exception_on_one_rank_raises_on_every_rank():
    """A mismatch raises on every rank; each rank's program ends with its own traceback."""
    proc, seconds = run(["run", "--np", "2"], """
        import torch
        import frugal.torch as hvd
        hvd.init(timeout=20)
        try:
            hvd.allreduce(torch.zeros(2 + hvd.rank()), name="grad")
        except hvd.FrugalError as e:
            print("rank %d raised: %s" % (hvd.rank(), e))
    """)
    assert proc.returncode == 0, proc.stderr
    assert seconds < 30
    for r in range(2):
        assert "rank %d raised:" % r in proc.stdout


def test_usage_errors_exit_2():
    proc, _ = run(["run", "--np", "2"])
    assert proc.returncode == 2
    assert proc.stderr.startswith("frugal: ")
    assert len(proc.stderr.strip().splitlines()) == 1
    proc, _ = run(["run", "--np", "2", "--", "/nonexistent/program"])
    assert proc.returncode != 0
    assert "/nonexistent/program" in proc.stderr


def test_value_error_is_frugal_trains_line():
    """A combination the strategy factory refuses: the same one line as `frugal train`."""
    proc, _ = run(["train", "--compress", "nosuch", "--epochs", "1"])
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert line.startswith("frugal: ")
    proc, _ = run(["run", "--np", "1"], """
        import torch
        import frugal.torch as hvd
        hvd.init()
        model = torch.nn.Linear(2, 2)
        try:
            hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     named_parameters=model.named_parameters(),
                                     compress="nosuch")
        except ValueError as e:
            print("ValueError: %s" % e)
    """)
    assert proc.returncode == 0, proc.stderr
    assert "ValueError: " + line[len("frugal: "):] in proc.stdout
