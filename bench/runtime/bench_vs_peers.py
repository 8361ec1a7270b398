#!/usr/bin/python3
"""Runtime (CPU) vs PyTorch on the same cores, in the same run: ResNet-18, ResNet-50, MobileNetV2
and a small BERT-style encoder at batch 1 and 8, a 3-layer MLP at batch 1 and 64. Prints a
Markdown table of throughput ratios and each side's peak RSS.

Each side runs in its own child process (so peak RSS is its own), with the same thread count,
alternating ours / PyTorch for several rounds so background load hits both alike; the figure
per side is the best round's mean latency.

    /usr/bin/python3 bench/runtime/bench_vs_pytorch.py [--threads N] [--rounds 3] [--only mlp]
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import runtime_fixtures as rf  # noqa: E402

CASES = [("resnet18", 1, 10), ("resnet18", 8, 3), ("resnet50", 1, 5), ("resnet50", 8, 2),
         ("mobilenet_v2", 1, 20), ("mobilenet_v2", 8, 5), ("bert_encoder", 1, 50), ("bert_encoder", 8, 20),
         ("mlp", 1, 2000), ("mlp", 64, 500)]

TORCH_CHILD = r"""
import sys, time, resource
sys.path.insert(0, {e2e!r})
import numpy as np, torch
import runtime_fixtures as rf
torch.set_num_threads({threads})
model = rf.build_model({name!r})
x = torch.from_numpy(np.load({input!r}))
with torch.no_grad():
    for _ in range(2):
        model(x)
    t = time.perf_counter()
    for _ in range({iters}):
        model(x)
    ms = (time.perf_counter() - t) * 1000 / {iters}
print(f"mean {{ms:.4f}} ms")
"""


def timed(args):
    """Runs `args` wrapped so that the child's own peak RSS (VmHWM) is reported; returns
    (stdout, mean latency in ms, peak RSS MiB)."""
    wrapper = ("import resource, subprocess, sys\n"
               "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "sys.stdout.write(p.stdout); sys.stderr.write(p.stderr)\n"
               "print('maxrss_kb', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
               "sys.exit(p.returncode)\n")
    proc = subprocess.run([sys.executable, "-c", wrapper, *args], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} failed: {proc.stderr[-2000:]}")
    mean = float(re.search(r"mean ([0-9.]+) ms", proc.stdout).group(1))
    rss = int(re.search(r"maxrss_kb (\d+)", proc.stdout).group(1)) / 1024
    return mean, rss


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", default=os.environ.get("MODELFLEET_BUILD_DIR", str(ROOT / "build")))
    parser.add_argument("--only", default="", help="run only the models whose name contains this")
    opts = parser.parse_args()
    binary = pathlib.Path(opts.build) / "tools" / "run" / "modelfleet-run"
    import torch
    print(f"threads {opts.threads}, {opts.rounds} alternating rounds, torch {torch.__version__}, "
          f"CPU: {open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}\n")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        exported = {}
        for name, batch, iters in CASES:
            if opts.only not in name:
                continue
            if name not in exported:
                exported[name] = rf.export(name, tmp)
            x, _ = rf.reference(name, batch)
            inp = tmp / f"{name}_{batch}.npy"
            np.save(inp, x)
            ours_args = [str(binary), str(exported[name]), "--input", str(inp), "--threads", str(opts.threads),
                         "--warmup", "2", "--iterations", str(iters), "--show", "0"]
            torch_args = [sys.executable, "-c", TORCH_CHILD.format(e2e=str(ROOT / "tests" / "e2e"), threads=opts.threads,
                                                                   name=name, input=str(inp), iters=iters)]
            ours, theirs = [], []
            for _ in range(opts.rounds):
                ours.append(timed(ours_args))
                theirs.append(timed(torch_args))
            o_ms, o_rss = min(ours)[0], max(r for _, r in ours)
            t_ms, t_rss = min(theirs)[0], max(r for _, r in theirs)
            rows.append((name, batch, o_ms, t_ms, t_ms / o_ms, o_rss, t_rss))
            print(f"  {name} batch {batch}: ours {o_ms:.3f} ms, torch {t_ms:.3f} ms", file=sys.stderr)
    print("| model | batch | ModelFleet ms | PyTorch ms | throughput ratio (ours / PyTorch) | peak RSS ours MiB | peak RSS PyTorch MiB |")
    print("|---|---|---|---|---|---|---|")
    for name, batch, o, t, ratio, orss, trss in rows:
        print(f"| {name} | {batch} | {o:.3f} | {t:.3f} | {ratio:.2f}x | {orss:.0f} | {trss:.0f} |")


if __name__ == "__main__":
    main()
