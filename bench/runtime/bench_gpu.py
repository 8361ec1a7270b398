#!/usr/bin/env python3
"""Runtime (CUDA) vs PyTorch on the same GPU, in the same run: ResNet-50 in FP16 at batch 1 and 256
against PyTorch FP16 channels_last eager. Prints a Markdown table of throughput ratios, batch-1
latency and each side's peak GPU memory (the process's, as nvidia-smi reports it).

Both sides are timed the way a server uses them: a float32 batch in host memory in, the float32
result in host memory out (PyTorch: .cuda(), .half(), model, .float().cpu()), after warm-up runs
(ours: the first run, the CUDA-graph capture, then replays). Each side runs in its own process.

Run on the GPU machine (scripts/device-run.sh bench) with that machine's PyTorch:
    python3 bench/runtime/bench_gpu.py --bin /path/to/dir/with/modelfleet-run [--rounds 3]
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import runtime_fixtures as rf  # noqa: E402

CASES = [("resnet50", 1, 200), ("resnet50", 256, 20)]

TORCH_CHILD = r"""
import sys, time
sys.path.insert(0, {e2e!r})
import numpy as np, torch
import runtime_fixtures as rf
model = rf.build_model({name!r}).half().cuda().to(memory_format=torch.channels_last)
x = torch.from_numpy(np.load({input!r}))
def step():
    xg = x.cuda().half().to(memory_format=torch.channels_last)
    return model(xg).float().cpu()
with torch.no_grad():
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range({iters}):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1000)
times.sort()
print(f"mean {{sum(times) / len(times):.4f}} ms, p50 {{times[len(times) // 2]:.4f}} ms")
"""


class GpuMemoryPeak:
    """Polls nvidia-smi for a process's GPU memory while it runs."""

    def __init__(self, pid):
        self.pid, self.peak, self.done = pid, 0, False
        self.thread = threading.Thread(target=self.poll, daemon=True)
        self.thread.start()

    def poll(self):
        while not self.done:
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                pid, _, mib = line.partition(",")
                if pid.strip() == str(self.pid):
                    self.peak = max(self.peak, int(mib.strip() or 0))
            time.sleep(0.2)

    def stop(self):
        self.done = True
        self.thread.join()
        return self.peak


def timed(args):
    """(stdout, mean ms, p50 ms, peak GPU MiB) of a child process."""
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = GpuMemoryPeak(proc.pid)
    out, err = proc.communicate(timeout=900)
    mib = peak.stop()
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} failed: {err[-3000:]}")
    mean = float(re.search(r"mean ([0-9.]+) ms", out).group(1))
    p50 = float(re.search(r"p50 ([0-9.]+) ms", out).group(1))
    return out, mean, p50, mib


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=str(ROOT / "build" / "tools" / "run"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    binary = pathlib.Path(args.bin) / "modelfleet-run"
    work = pathlib.Path(tempfile.mkdtemp(prefix="mf-bench-gpu-"))
    rows = []
    models = {}
    for name, batch, iters in CASES:
        if name not in models:
            models[name] = rf.export(name, work)
        x, _ = rf.reference(name, batch)
        inp = work / f"{name}_{batch}.npy"
        np.save(inp, x)
        ours_best = theirs_best = None
        for _ in range(args.rounds):
            out, mean, p50, mib = timed([str(binary), str(models[name]), "--input", str(inp), "--backend", "cuda",
                                         "--precision", "fp16", "--warmup", "5", "--iterations", str(iters), "--show", "0"])
            placement = re.search(r"placement: .*", out)
            if ours_best is None or mean < ours_best[0]:
                ours_best = (mean, p50, mib, placement.group(0) if placement else "")
            script = TORCH_CHILD.format(e2e=str(ROOT / "tests" / "e2e"), name=name, input=str(inp), iters=iters)
            _, mean, p50, mib = timed([sys.executable, "-c", script])
            if theirs_best is None or mean < theirs_best[0]:
                theirs_best = (mean, p50, mib)
        ratio = theirs_best[0] / ours_best[0]
        rows.append((name, batch, ours_best, theirs_best, ratio))
        print(f"{name} b{batch}: ours {ours_best[0]:.3f} ms ({ours_best[3]}), PyTorch {theirs_best[0]:.3f} ms",
              flush=True)
    print("\n| model | batch | ours img/s | PyTorch img/s | ratio | ours p50 ms | PyTorch p50 ms | ours GPU MiB | PyTorch GPU MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, batch, ours, theirs, ratio in rows:
        print(f"| {name} FP16 | {batch} | {batch * 1000 / ours[0]:.0f} | {batch * 1000 / theirs[0]:.0f} | {ratio:.2f}x | "
              f"{ours[1]:.3f} | {theirs[1]:.3f} | {ours[2]} | {theirs[2]} |")


if __name__ == "__main__":
    main()
