#!/usr/bin/env python3
"""PyTorch DDP on one GPU through braid against the same training on gloo over CPU tensors
(issue 16's measure: world size 2 on one GPU, MPS off, must be faster per step than gloo).

  perf/ddp_vs_gloo.py --lib /abs/libbraid.so [--world 2] [--steps 40] [--warmup 10] [--timeout 120]

Each backend runs the same training: an MLP (1024 -> 2048 -> 2048 -> 1024, 8.4 M parameters,
34 MB of gradients a step), SGD, the same seed and the same per-rank batches. "braid": the
"nccl" backend with LD_PRELOAD=libbraid.so and every rank on cuda:0 (the real NCCL refuses
that); "gloo": CPU tensors. Prints ms per step (median over the timed steps, host clock after
a synchronize) and checks the results: every rank of a backend ends with bitwise the same
parameters, and the two backends' parameters agree to 1e-3 relative (fp32 on a GPU against a
CPU; TF32 off). Exit status 0 when both ran and agree; the verdict line says whether braid
was faster.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "gpu"))
import rank_procs  # noqa: E402  (tests/gpu: the ranks' supervision, shared with torch_dropin.py)

LAYERS = (1024, 2048, 2048, 1024)
BATCH = 64


def child():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    backend, steps, warmup = os.environ["DDP_BACKEND"], int(os.environ["DDP_STEPS"]), int(os.environ["DDP_WARMUP"])
    out_dir = os.environ["DDP_OUT"]
    from datetime import timedelta
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gpu = backend == "braid"
    dev = torch.device("cuda:0" if gpu else "cpu")
    if gpu:
        torch.cuda.set_device(0)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 2) // world))
    dist.init_process_group("nccl" if gpu else "gloo", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    torch.manual_seed(1234)  # the same initial model everywhere (DDP also broadcasts rank 0's)
    mods = []
    for i in range(len(LAYERS) - 1):
        mods.append(torch.nn.Linear(LAYERS[i], LAYERS[i + 1]))
        if i + 2 < len(LAYERS):
            mods.append(torch.nn.ReLU())
    model = DDP(torch.nn.Sequential(*mods).to(dev), device_ids=[0] if gpu else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(100 + rank)  # rank r's batches, the same for both backends
    batches = [(torch.randn(BATCH, LAYERS[0], generator=gen), torch.randn(BATCH, LAYERS[-1], generator=gen))
               for _ in range(8)]
    batches = [(x.to(dev), y.to(dev)) for x, y in batches]

    def sync():
        if gpu:
            torch.cuda.synchronize()

    times = []
    for step in range(warmup + steps):
        x, y = batches[step % len(batches)]
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        sync()
        if step >= warmup:
            times.append(time.perf_counter() - t0)
    flat = torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()])
    torch.save(flat, os.path.join(out_dir, "%s-rank%d.pt" % (backend, rank)))
    dist.barrier()
    dist.destroy_process_group()
    times.sort()
    print("DDP_RESULT " + json.dumps({"backend": backend, "rank": rank, "median_ms": 1e3 * times[len(times) // 2],
                                      "mean_ms": 1e3 * sum(times) / len(times), "loss": float(loss)}), flush=True)


def run_backend(backend, lib, world, a, out_dir):
    port = rank_procs.free_port()
    envs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0", DDP_BACKEND=backend, DDP_STEPS=str(a.steps),
                   DDP_WARMUP=str(a.warmup), DDP_OUT=out_dir)
        if backend == "braid":
            env["LD_PRELOAD"] = lib
        else:
            env["CUDA_VISIBLE_DEVICES"] = ""  # gloo's run touches no GPU
        envs.append(env)
    timed_out, ran = rank_procs.run_ranks(__file__, envs, a.timeout)
    ok = not timed_out
    results = []
    for rank, (returncode, text) in enumerate(ran):
        found = [json.loads(l.split(" ", 1)[1]) for l in text.splitlines() if l.startswith("DDP_RESULT ")]
        if returncode != 0 or not found:
            ok = False
            print("[%s rank %d] rc=%s, last lines:\n  %s" % (backend, rank, returncode,
                                                            "\n  ".join(text.splitlines()[-15:])))
        results += found
    return ok, results


def main():
    if "--child" in sys.argv:
        child()
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    lib = os.path.abspath(a.lib)
    mps = subprocess.run(["pgrep", "-f", "nvidia-cuda-mps-control"], capture_output=True).returncode == 0
    params = sum(LAYERS[i] * LAYERS[i + 1] + LAYERS[i + 1] for i in range(len(LAYERS) - 1))
    print("DDP world %d, MLP %s (%.1f M parameters), batch %d a rank, %d timed steps after %d; MPS %s"
          % (a.world, "-".join(map(str, LAYERS)), params / 1e6, BATCH, a.steps, a.warmup, "on" if mps else "off"))
    import torch
    with tempfile.TemporaryDirectory() as out_dir:
        per = {}
        for backend in ("braid", "gloo"):
            t0 = time.monotonic()
            ok, results = run_backend(backend, lib, a.world, a, out_dir)
            if not ok:
                print("FAIL %s did not finish (%.0f s)" % (backend, time.monotonic() - t0))
                return 1
            med = max(r["median_ms"] for r in results)  # the slowest rank sets the step
            per[backend] = med
            print("%-6s %8.2f ms per step (median; ranks %s), loss %.6f, %.0f s in all"
                  % (backend, med, ", ".join("%.2f" % r["median_ms"] for r in sorted(results, key=lambda r: r["rank"])),
                     results[0]["loss"], time.monotonic() - t0))
            flats = [torch.load(os.path.join(out_dir, "%s-rank%d.pt" % (backend, r))) for r in range(a.world)]
            for r in range(1, a.world):
                if not torch.equal(flats[0], flats[r]):
                    print("FAIL %s: rank %d's parameters differ from rank 0's (max %.3g)"
                          % (backend, r, (flats[0] - flats[r]).abs().max().item()))
                    return 1
        g = torch.load(os.path.join(out_dir, "braid-rank0.pt")).double()
        c = torch.load(os.path.join(out_dir, "gloo-rank0.pt")).double()
        rel = ((g - c).abs().max() / c.abs().max()).item()
        print("parameters, braid against gloo: max |difference| / max |value| = %.3g" % rel)
        if rel > 1e-3:
            print("FAIL the two trainings disagree")
            return 1
    faster = per["braid"] < per["gloo"]
    print("SUMMARY ddp world %d: braid %.2f ms, gloo %.2f ms per step: braid %s (%.1fx)"
          % (a.world, per["braid"], per["gloo"], "faster" if faster else "SLOWER", per["gloo"] / per["braid"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
