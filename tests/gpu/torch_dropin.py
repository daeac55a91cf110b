#!/usr/bin/env python3
"""PyTorch drop-in smoke test (issue 4): torch.distributed on the "nccl" backend with braid
preloaded (LD_PRELOAD=libbraid.so), several processes on ONE GPU (cuda:0). The real NCCL
refuses that ("Duplicate GPU detected"), so passing proves braid ran; each rank also prints
where ncclAllReduce resolves and whether libbraid.so is mapped.

  torch_dropin.py --lib /abs/libbraid.so [--worlds 2,4] [--timeout 40]

The parent does not import torch: it starts the ranks (this file with --child) as
subprocesses with MASTER_ADDR=127.0.0.1 and a free MASTER_PORT, bounds each world's time,
kills stragglers, and prints a SUMMARY line. World size 2 initialises eagerly (device_id,
plus a subgroup made by ncclCommSplit); larger worlds initialise lazily, as most scripts do.
Exit status: 0 when every world passed.
"""
import argparse
import os
import signal
import sys
import time

import rank_procs


def on_term(signum, frame):
    rank_procs.kill_live()
    print("killed by signal %d" % signum, flush=True)
    sys.exit(128 + signum)


def run_world(lib, world, timeout):
    port = rank_procs.free_port()
    envs = []
    for rank in range(world):
        env = dict(os.environ)
        env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), LD_PRELOAD=lib, NCCL_NVLS_ENABLE="0",
                   TORCH_DROPIN_EAGER="1" if world == 2 else "0")
        env.setdefault("NCCL_DEBUG", "VERSION")
        envs.append(env)
    timed_out, results = rank_procs.run_ranks(__file__, envs, timeout)
    ok = not timed_out
    for rank, (returncode, text) in enumerate(results):
        lines = text.splitlines()
        # Keep the log short: torch's warnings can be long.
        if len(lines) > 40:
            lines = lines[:15] + ["... (%d lines cut)" % (len(lines) - 30)] + lines[-15:]
        for line in lines:
            print("[ws%d rank %d] %s" % (world, rank, line))
        if returncode != 0 or "RANK_OK" not in text:
            ok = False
    status = "OK" if ok else ("TIMEOUT(%ds)" % timeout if timed_out else "FAIL")
    print("world %d: %s" % (world, status), flush=True)
    return status


def which_library():
    """Where ncclAllReduce resolves in the global scope, and which NCCL-like files are mapped."""
    import ctypes
    maps = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                maps.append((lo, hi, parts[5]))
    addr = ctypes.cast(ctypes.CDLL(None).ncclAllReduce, ctypes.c_void_p).value
    where = next((path for lo, hi, path in maps if lo <= addr < hi), "?")
    mapped = sorted({os.path.basename(p) for _, _, p in maps if "nccl" in p or "braid" in p})
    return where, mapped


def child():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    eager = os.environ.get("TORCH_DROPIN_EAGER") == "1"
    from datetime import timedelta
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    dev = torch.device("cuda:0")
    kwargs = dict(backend="nccl", rank=rank, world_size=world, timeout=timedelta(seconds=30))
    if eager:
        kwargs["device_id"] = dev
    dist.init_process_group(**kwargs)
    where, mapped = which_library()
    if rank == 0:
        print("torch %s, torch.cuda.nccl.version() = %s" % (torch.__version__, torch.cuda.nccl.version()))
        print("ncclAllReduce resolves into %s; mapped: %s" % (where, ", ".join(mapped)))
    if "libbraid" not in where:
        print("FAIL ncclAllReduce does not resolve into libbraid.so: %s" % where)
        sys.exit(1)

    def expect(name, got, want):
        if not torch.equal(got.cpu(), want.cpu()):
            print("FAIL %s: got %s want %s" % (name, got.cpu()[:8].tolist(), want.cpu()[:8].tolist()))
            sys.exit(1)

    tri = world * (world + 1) // 2
    # all_reduce: fp32, int64 and bf16 (sum), fp32 max
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        t = torch.full((1000,), rank + 1, dtype=dtype, device=dev)
        dist.all_reduce(t)
        expect("all_reduce %s" % dtype, t, torch.full((1000,), tri, dtype=dtype))
    t = torch.arange(4097, dtype=torch.float32, device=dev) + rank
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    expect("all_reduce max", t, torch.arange(4097, dtype=torch.float32) + world - 1)
    # all_gather_into_tensor
    inp = torch.arange(5, dtype=torch.float32, device=dev) + 10 * rank
    out = torch.empty(5 * world, dtype=torch.float32, device=dev)
    dist.all_gather_into_tensor(out, inp)
    expect("all_gather_into_tensor", out,
           torch.cat([torch.arange(5, dtype=torch.float32) + 10 * r for r in range(world)]))
    # reduce_scatter_tensor
    inp = torch.arange(4 * world, dtype=torch.float32, device=dev) * (rank + 1)
    out = torch.empty(4, dtype=torch.float32, device=dev)
    dist.reduce_scatter_tensor(out, inp)
    expect("reduce_scatter_tensor", out, torch.arange(4 * rank, 4 * rank + 4, dtype=torch.float32) * tri)
    # broadcast from the last rank
    src = world - 1
    t = torch.arange(300, dtype=torch.int32, device=dev) if rank == src else torch.zeros(300, dtype=torch.int32, device=dev)
    dist.broadcast(t, src=src)
    expect("broadcast", t, torch.arange(300, dtype=torch.int32))
    # send/recv: a ring in one batch (one group), then a plain pair 0 -> 1
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    s = torch.full((77,), float(rank), device=dev)
    r = torch.empty(77, device=dev)
    for req in dist.batch_isend_irecv([dist.P2POp(dist.isend, s, nxt), dist.P2POp(dist.irecv, r, prv)]):
        req.wait()
    expect("batch_isend_irecv ring", r, torch.full((77,), float(prv)))
    if rank == 0 and world > 1:
        dist.send(torch.arange(33, dtype=torch.float32, device=dev) * 3, dst=1)
    elif rank == 1:
        r = torch.empty(33, dtype=torch.float32, device=dev)
        dist.recv(r, src=0)
        expect("send/recv 0->1", r, torch.arange(33, dtype=torch.float32) * 3)
    if eager:
        # A subgroup of the even ranks (ncclCommSplit under eager init).
        group = dist.new_group([r for r in range(world) if r % 2 == 0])
        if rank % 2 == 0:
            t = torch.ones(10, device=dev)
            dist.all_reduce(t, group=group)
            expect("subgroup all_reduce", t, torch.full((10,), float((world + 1) // 2)))
    dist.barrier()
    torch.cuda.synchronize()
    dist.destroy_process_group()
    print("RANK_OK rank %d of %d (%s init)" % (rank, world, "eager" if eager else "lazy"), flush=True)


def main():
    if "--child" in sys.argv:
        child()
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--worlds", default="2,4")
    ap.add_argument("--timeout", type=float, default=40)
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, on_term)
    lib = os.path.abspath(a.lib)
    if not os.path.exists(lib):
        print("FAIL %s does not exist" % lib)
        return 1
    try:
        import importlib.util
        if importlib.util.find_spec("torch") is None:
            print("SKIP no torch in %s" % sys.executable)
            return 77
    except Exception as e:  # noqa: BLE001
        print("SKIP cannot look for torch: %s" % e)
        return 77
    results = []
    for w in (int(x) for x in a.worlds.split(",")):
        t0 = time.monotonic()
        status = run_world(lib, w, a.timeout)
        results.append("ws%d %s %.0fs" % (w, status, time.monotonic() - t0))
    print("SUMMARY torch " + ", ".join(results))
    return 0 if all(" OK " in r + " " for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
