#!/usr/bin/env python3
"""Runtime (CPU) vs its peers on the same cores, in the same run: ONNX Runtime's CPU execution
provider (all graph optimizations on; what Triton, KServe and Seldon run) and PyTorch eager, on
ResNet-18, ResNet-50, MobileNetV2 and a small BERT-style encoder at batch 1 and 8, a 3-layer MLP
at batch 1 and 64. ONNX Runtime runs the very ONNX files ours runs. Prints a Markdown table of
throughput ratios (peer ms / ours: above 1 means we are faster), the median and range of the
ratios within each round (its sides ran back to back), and each side's peak RSS.

Each side runs in its own child process (so peak RSS is its own), with the same thread count,
alternating ours / each peer for several rounds so background load hits all alike; the figure
per side is the best round's mean latency.

    .cache/venv/bin/python bench/runtime/bench_vs_peers.py [--threads N] [--rounds 3] [--only mlp]
        [--peers onnxruntime,torch]
"""
import argparse
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import runtime_fixtures as rf  # noqa: E402

# Iterations per round: about a second of our runtime each, so that one slow iteration (this
# machine's neighbours) moves a round's mean by a few percent at most; with 2-5 iterations it
# moved whole rows across 1.00x between runs.
CASES = [("resnet18", 1, 60), ("resnet18", 8, 10), ("resnet50", 1, 30), ("resnet50", 8, 5),
         ("mobilenet_v2", 1, 200), ("mobilenet_v2", 8, 40), ("bert_encoder", 1, 1000), ("bert_encoder", 8, 300),
         ("mlp", 1, 20000), ("mlp", 64, 5000)]

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


ORT_CHILD = r"""
import sys, time
import numpy as np, onnxruntime as ort
options = ort.SessionOptions()
options.intra_op_num_threads = {threads}
options.inter_op_num_threads = 1
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
session = ort.InferenceSession({model!r}, options, providers=["CPUExecutionProvider"])
feed = {{session.get_inputs()[0].name: np.load({input!r})}}
for _ in range(2):
    session.run(None, feed)
t = time.perf_counter()
for _ in range({iters}):
    session.run(None, feed)
ms = (time.perf_counter() - t) * 1000 / {iters}
print(f"mean {{ms:.4f}} ms")
"""

PEER_NAMES = {"onnxruntime": "ONNX Runtime", "torch": "PyTorch"}


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
    parser.add_argument("--peers", default="onnxruntime,torch", help="comma-separated: onnxruntime, torch")
    opts = parser.parse_args()
    peers = [p for p in opts.peers.split(",") if p]
    if not peers or any(p not in PEER_NAMES for p in peers):
        parser.error(f"--peers must name some of {', '.join(PEER_NAMES)}")
    binary = pathlib.Path(opts.build) / "tools" / "run" / "modelfleet-run"
    versions = []
    for peer in peers:
        module = __import__(peer)
        versions.append(f"{PEER_NAMES[peer]} {module.__version__}")
    print(f"threads {opts.threads}, {opts.rounds} alternating rounds, {', '.join(versions)}, "
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
            sides = {"ours": [str(binary), str(exported[name]), "--input", str(inp), "--threads", str(opts.threads),
                              "--warmup", "2", "--iterations", str(iters), "--show", "0"]}
            child = {"onnxruntime": ORT_CHILD.format(threads=opts.threads, model=str(exported[name]), input=str(inp),
                                                     iters=iters),
                     "torch": TORCH_CHILD.format(e2e=str(ROOT / "tests" / "e2e"), threads=opts.threads, name=name,
                                                 input=str(inp), iters=iters)}
            for peer in peers:
                sides[peer] = [sys.executable, "-c", child[peer]]
            runs = {side: [] for side in sides}
            for _ in range(opts.rounds):
                for side, args in sides.items():
                    runs[side].append(timed(args))
            best = {side: (min(ms for ms, _ in r), max(rss for _, rss in r)) for side, r in runs.items()}
            # Each round runs every side back to back: its ratio cancels the drifts of a machine
            # whose neighbours come and go, which the best rounds of each side may not share.
            paired = {p: sorted(runs[p][i][0] / runs["ours"][i][0] for i in range(opts.rounds)) for p in peers}
            rows.append((name, batch, best, paired))
            print(f"  {name} batch {batch}: " + ", ".join(f"{side} {ms:.3f} ms" for side, (ms, _) in best.items()),
                  file=sys.stderr)
    header = ["model", "batch", "ModelFleet ms"] + [f"{PEER_NAMES[p]} ms" for p in peers]
    header += [f"ratio vs {PEER_NAMES[p]} (its ms / ours)" for p in peers]
    header += [f"per-round ratio vs {PEER_NAMES[p]}: median (range)" for p in peers]
    header += ["peak RSS ours MiB"] + [f"peak RSS {PEER_NAMES[p]} MiB" for p in peers]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for name, batch, best, paired in rows:
        ours_ms, ours_rss = best["ours"]
        cells = [name, str(batch), f"{ours_ms:.3f}"] + [f"{best[p][0]:.3f}" for p in peers]
        cells += [f"{best[p][0] / ours_ms:.2f}x" for p in peers]
        cells += [f"{statistics.median(paired[p]):.2f}x ({paired[p][0]:.2f}-{paired[p][-1]:.2f})" for p in peers]
        cells += [f"{ours_rss:.0f}"] + [f"{best[p][1]:.0f}" for p in peers]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
