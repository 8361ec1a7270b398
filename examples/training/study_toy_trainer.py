"""A stand-in trainer for hyperparameter studies: it "trains" for a few short steps and reports an
accuracy computed from its arguments, so a study's search can be checked against a known answer
(best at --learning_rate=0.01, --layers=4, --optimizer=adam) in seconds.

Each step prints an intermediate metric line, `modelfleet-metric accuracy=<value>`, which the
operator reads from the pod's log (the last line is the trial's metric; earlier ones feed the
median early-stopping rule). With --report=file the final value goes to the file named by
MODELFLEET_METRICS_FILE instead (the operator points it at the container's terminationMessagePath);
--report=none reports nothing, as a trainer with a bug would."""
import argparse
import math
import os
import time


def accuracy(learning_rate: float, layers: int, optimizer: str) -> float:
    penalty = {"adam": 0.0, "rmsprop": 0.05, "sgd": 0.1}[optimizer]
    return 0.95 - 0.1 * (math.log10(learning_rate) + 2) ** 2 - 0.01 * (layers - 4) ** 2 - penalty


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--learning_rate", type=float, required=True)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--optimizer", choices=["adam", "rmsprop", "sgd"], required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--step_seconds", type=float, default=0.3)
    parser.add_argument("--report", choices=["log", "file", "none"], default="log")
    args = parser.parse_args()

    final = accuracy(args.learning_rate, args.layers, args.optimizer)
    for step in range(1, args.steps + 1):
        time.sleep(args.step_seconds)
        value = final - 0.2 * (args.steps - step) / args.steps  # climbs to `final` at the last step
        if args.report == "log":
            print(f"modelfleet-metric accuracy={value!r}", flush=True)
        else:
            print(f"step {step}", flush=True)
    if args.report == "file":
        with open(os.environ["MODELFLEET_METRICS_FILE"], "w") as f:
            f.write(f"accuracy={final!r}\n")


if __name__ == "__main__":
    main()
