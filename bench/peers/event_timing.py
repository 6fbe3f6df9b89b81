"""CUDA-event timing shared by the peer baselines (torch_moe.py, torch_tp.py): the loop that
bench/tp.ts and bench/moe.ts time their own variants with, each caller adding its own barrier,
rest and cross-rank reduction around it."""
import torch


def events_loop_ms(fn, calls):
    """ms per call over `calls` back-to-back calls behind one untimed call (so the GPU is busy while
    Python enqueues the loop), on this rank, by CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls
