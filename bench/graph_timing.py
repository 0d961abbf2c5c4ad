"""performance.md's timing, for the torch side of the benchmarks: `calls` calls of fn captured in
one CUDA graph (rotating through `sets` of arguments), median microseconds per call over
`replays` replays, after a warm-up on a side stream."""
import statistics

import torch

CALLS, REPLAYS = 20, 7


def time_per_call_us(fn, sets, calls=CALLS, replays=REPLAYS):
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(3):
            fn(*sets[i % len(sets)])
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    keep = []
    with torch.cuda.graph(graph):
        for i in range(calls):
            keep.append(fn(*sets[i % len(sets)]))
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000 / calls)
    return statistics.median(times)


def copy_bandwidth():
    """Device-to-device copy bandwidth, bytes read + written per second."""
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").fill_(3)
    b = torch.empty_like(a)
    return 2 * a.numel() / (time_per_call_us(lambda x: b.copy_(x), [(a,)]) * 1e-6)
