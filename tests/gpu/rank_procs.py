"""Runs the ranks of a test as child processes (tests/gpu/torch_dropin.py, perf/ddp_vs_gloo.py):
each its own process group, its output in a file (a chatty rank never blocks on a pipe), the
whole set bounded by one timeout, stragglers killed."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

def free_port():
    """A TCP port free on 127.0.0.1 now (MASTER_PORT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LIVE = []  # the running ranks, for a SIGTERM handler to kill (kill_live)


def kill_live():
    for p in LIVE:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass


def run_ranks(script, envs, timeout):
    """Starts `script --child` once per environment in `envs`; returns (timed_out, [(returncode, output)])."""
    procs, outs = [], []
    for env in envs:
        out = tempfile.TemporaryFile()
        outs.append(out)
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(script), "--child"], env=env,
                                      stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        LIVE.append(procs[-1])
    deadline = time.monotonic() + timeout
    timed_out = False
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            break
    results = []
    for p, out in zip(procs, outs):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        LIVE.remove(p)
        out.seek(0)
        results.append((p.returncode, out.read().decode(errors="replace")))
    return timed_out, results
