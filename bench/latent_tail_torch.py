#!/usr/bin/env python3
"""The latent tail the way a user would write it in torch, on tp GPUs of this machine: NCCL
all-reduce of the routed latent and of the shared-expert output, torch RMSNorm, torch matmul,
add. Timed like moejit (20 calls per CUDA graph, median of 7 replays, max over ranks).

  python3 bench/latent_tail_torch.py --tp 2 [--tokens 1,4,16,64]
"""
import argparse
import os
import statistics

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

H, L, EPS, CALLS, REPLAYS = 7168, 3584, 1e-5, 20, 7


def tail(routed, shared, gamma, w):
    r = routed.clone()
    dist.all_reduce(r)
    s = shared.clone()
    dist.all_reduce(s)
    z = torch.nn.functional.rms_norm(r, (L,), gamma, EPS)
    return torch.addmm(s, z, w.t())


def worker(rank, tp, tokens, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), NCCL_NVLS_ENABLE="0",
                      TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=tp, device_id=torch.device("cuda", rank))
    g = torch.Generator(device="cuda").manual_seed(1 + rank)
    w = (torch.rand(H, L, device="cuda", generator=g) - 0.5).mul_(0.06).to(torch.bfloat16)
    gamma = torch.ones(L, device="cuda", dtype=torch.bfloat16)
    rows = []
    for t in tokens:
        routed = torch.randn(t, L, device="cuda", generator=g).to(torch.bfloat16)
        shared = torch.randn(t, H, device="cuda", generator=g).to(torch.bfloat16)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                tail(routed, shared, gamma, w)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(CALLS):
                tail(routed, shared, gamma, w)
        graph.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(REPLAYS):
            dist.barrier()
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            graph.replay()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1000 / CALLS)
        mine = torch.tensor([statistics.median(times)], device="cuda")
        dist.all_reduce(mine, op=dist.ReduceOp.MAX)
        rows.append((t, mine.item()))
    if rank == 0:
        print(f"torch (NCCL all-reduce x2 + rms_norm + addmm), tp {tp}, H {H}, L {L}, torch {torch.__version__}")
        for t, us in rows:
            print(f"torch-nccl     {t:>6} {us:>10.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--tokens", default="1,4,16,64")
    a = p.parse_args()
    mp.spawn(worker, args=(a.tp, [int(t) for t in a.tokens.split(",")], 29531), nprocs=a.tp)
