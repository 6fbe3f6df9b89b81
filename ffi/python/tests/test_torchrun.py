"""The same checks with one rank per GPU under `torchrun --nproc-per-node=2` (tests/dist_check.py):
a communicator made from the process group's store, and torch.distributed's own collectives as
the reference (two GPUs); and examples/torch_tp_mlp.py, under torchrun and with two ranks sharing
one GPU, matching torch's step."""
import subprocess
import sys

from support import PACKAGE, REPO, need_gpus, need_torch


def torchrun(script, *args, timeout=600):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", str(script), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)


def test_every_op_and_the_layers_under_torchrun():
    need_gpus(2)
    need_torch()
    r = torchrun(PACKAGE / "tests" / "dist_check.py")
    print(r.stdout[-6000:])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    for rank in (0, 1):
        assert f"dist_check rank {rank}: all passed" in r.stdout


def test_the_example_matches_torch_under_torchrun():
    need_gpus(2)
    need_torch()
    r = torchrun(REPO / "examples" / "torch_tp_mlp.py", "--tokens", "4096", "--hidden", "2048", "--ffn", "8192",
                 "--steps", "3", "--repeats", "2")
    print(r.stdout[-4000:])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert r.stdout.count("against torch") == 2 and "MISMATCH" not in r.stdout


def test_the_example_at_world_2_on_one_gpu():
    need_torch()
    cmd = [sys.executable, str(REPO / "examples" / "torch_tp_mlp.py"), "--local-ranks", "2", "--tokens", "2048",
           "--hidden", "1024", "--ffn", "4096", "--steps", "3", "--repeats", "2"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=REPO)
    print(r.stdout[-4000:])
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert r.stdout.count("against torch") == 2 and "MISMATCH" not in r.stdout
