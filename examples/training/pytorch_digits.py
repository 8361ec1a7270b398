"""Data-parallel PyTorch training of a small MLP on scikit-learn's digits, for a TrainingJob with
framework: pytorch (examples/training/trainingjob-pytorch-local.yaml).

Every pod runs this script; the operator gives each one MASTER_ADDR, MASTER_PORT, WORLD_SIZE and
RANK (Kubeflow's PyTorchJob env), so torch.distributed's env:// rendezvous finds rank 0 (the
Master). Each rank trains on its own shard of the training set and DistributedDataParallel
averages the gradients (gloo, on CPUs) every step, so all ranks hold the same model. Rank 0
checkpoints every epoch into AIP_CHECKPOINT_DIR, so a restarted cluster carries on from there,
evaluates on the held-out 20 %, prints `modelfleet-metric accuracy=<value>` (the line the
operator's studies read) and exports MODEL_DIR/model.onnx, which a ModelDeployment can serve.

Flags are `--name=value`, as a study passes trial parameters.
"""
import argparse
import os
import socket
import sys
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def log(message):
    print(f"[rank {os.environ.get('RANK', '0')}] {message}", flush=True)


def resolve_master(deadline_s):
    """Rank 0's Service name resolves only once its pod runs, and torch's C++ store client does
    not retry a name that does not resolve yet: wait for it here (Python's resolver, which on
    modelfleet-local also reads the cluster's hosts file) and hand torch the address."""
    host = os.environ.get("MASTER_ADDR", "127.0.0.1")
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            address = socket.gethostbyname(host)
            os.environ["MASTER_ADDR"] = address
            return address
        except OSError as e:
            if time.monotonic() > deadline:
                raise SystemExit(f"MASTER_ADDR {host} did not resolve within {deadline_s}s: {e}")
            time.sleep(0.5)


def model(hidden):
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--epoch_seconds", type=float, default=0.0,
                        help="sleep this long after each epoch (to make a tiny job last, for demos and tests)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    distributed = world > 1
    if distributed:
        address = resolve_master(120)
        log(f"joining {world} ranks at {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} ({address})")
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=60))

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(x, digits.target, test_size=0.2, random_state=0,
                                                        stratify=digits.target)
    # This rank's shard of the training set.
    x_shard, y_shard = torch.from_numpy(x_train[rank::world]), torch.from_numpy(y_train[rank::world]).long()

    torch.manual_seed(args.seed)
    net = model(args.hidden)
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    start_epoch = 0
    checkpoint_dir = os.environ.get("AIP_CHECKPOINT_DIR", "")
    checkpoint = os.path.join(checkpoint_dir, "checkpoint.pt") if checkpoint_dir else ""
    if checkpoint and os.path.exists(checkpoint):
        state = torch.load(checkpoint)
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"] + 1
        log(f"resuming from {checkpoint} after epoch {state['epoch']}")
    ddp = DistributedDataParallel(net) if distributed else net
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(args.seed + rank)
    # The same number of steps on every rank, or the all-reduces would not pair up.
    steps = -(-len(x_train[0::world]) // args.batch_size)
    for epoch in range(start_epoch, args.epochs):
        order = torch.randperm(len(x_shard), generator=generator)
        total = 0.0
        for step in range(steps):
            batch = order[(step * args.batch_size) % len(order):][:args.batch_size]
            optimizer.zero_grad()
            loss = loss_fn(ddp(x_shard[batch]), y_shard[batch])
            loss.backward()
            optimizer.step()
            total += loss.item()
        if rank == 0:
            log(f"epoch {epoch + 1}/{args.epochs} loss {total / steps:.4f}")
            if checkpoint:
                os.makedirs(checkpoint_dir, exist_ok=True)
                torch.save({"model": net.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch},
                           checkpoint + ".tmp")
                os.replace(checkpoint + ".tmp", checkpoint)
        if args.epoch_seconds:
            time.sleep(args.epoch_seconds)

    if rank == 0:
        net.eval()
        with torch.no_grad():
            predicted = net(torch.from_numpy(x_test)).argmax(dim=1).numpy()
        accuracy = float((predicted == y_test).mean())
        log(f"validation accuracy {accuracy:.4f} on {len(y_test)} held-out digits")
        print(f"modelfleet-metric accuracy={accuracy:.4f}", flush=True)
        model_dir = os.environ.get("MODEL_DIR", "")
        if model_dir:
            export(net, model_dir)
    if distributed:
        dist.barrier()  # no rank leaves while rank 0 still needs the group
        dist.destroy_process_group()


def export(net, model_dir):
    """MODEL_DIR/model.onnx: input `images` [batch, 64] (pixels 0-16, as the serving example's
    requests send them), output `scores` [batch, 10] (softmax)."""
    os.makedirs(model_dir, exist_ok=True)
    serving = nn.Sequential(ScaleInput(), net, nn.Softmax(dim=1)).eval()
    path = os.path.join(model_dir, "model.onnx")
    torch.onnx.export(serving, torch.zeros(1, 64), path + ".tmp", input_names=["images"], output_names=["scores"],
                      dynamic_axes={"images": {0: "batch"}, "scores": {0: "batch"}}, opset_version=13)
    os.replace(path + ".tmp", path)
    log(f"exported {path}")


class ScaleInput(nn.Module):
    def forward(self, x):
        return x / 16.0


if __name__ == "__main__":
    sys.exit(main())
