#!/usr/bin/env python3
"""Trains the digits MLP with tf.distribute.ParameterServerStrategy: the variables live on the
`ps` tasks, the `worker` tasks run training steps, and the `chief` coordinates.

- A `worker` or `ps` task starts a tf.distribute.Server and serves until it is stopped (as in
  TensorFlow's own examples; a TrainingJob's cleanPodPolicy removes these pods once the chief
  is done).
- The `chief` connects to them (tf.distribute.coordinator.ClusterCoordinator), schedules steps
  on whichever worker is free (asynchronous training), evaluates, prints
  `modelfleet-metric accuracy=<value>` and writes MODEL_DIR/model.onnx, then exits.

    TF_CONFIG='{"cluster": {"chief": [...], "worker": [...], "ps": [...]},
                "task": {"type": "ps", "index": 0}}' python examples/training/tf_digits_ps.py

examples/training/run_tf_local.py ps starts a whole cluster of these as local processes.
"""
import argparse
import os
import signal
import sys
import threading
import time

import tf_cluster
import tf_digits


def serve(tf, config: dict) -> None:
    task = config["task"]
    server = tf.distribute.Server(tf.train.ClusterSpec(config["cluster"]), job_name=task["type"],
                                  task_index=task.get("index", 0), protocol=config.get("rpc_layer") or "grpc",
                                  start=True)
    tf_digits.log(f"{task['type']} {task.get('index', 0)} serving at {server.target}")
    # Serve until stopped. Being stopped once the chief is done (cleanPodPolicy) is the normal
    # end of these tasks, so SIGTERM exits 0; server.join() would block signals in C++.
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    while not stopped.wait(1):
        pass
    tf_digits.log(f"{task['type']} {task.get('index', 0)} stopped")
    sys.stdout.flush()
    os._exit(0)  # without waiting for the gRPC server's threads


def coordinate(tf, config: dict, args: argparse.Namespace, started: float) -> None:
    import keras
    # Connecting to a task that is not listening yet fails at once, so wait for them first.
    tf_cluster.wait_for_listeners(config, ("worker", "ps"), args.cluster_timeout)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    workers, ps = len(config["cluster"]["worker"]), len(config["cluster"]["ps"])
    tf_digits.log(f"ParameterServerStrategy: {workers} worker(s), {ps} ps, ready after "
                  f"{time.monotonic() - started:.1f} s")

    x_train, y_train, x_test, y_test = tf_digits.load_data()

    def dataset_fn(_input_context):
        # Runs on each worker: every worker reads its own 1/n of the training set.
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        return (tf.data.Dataset.from_tensor_slices((x_train, y_train)).shard(workers, worker)
                .shuffle(len(x_train), seed=1).repeat().batch(args.batch_size, drop_remainder=True))

    with strategy.scope():
        model = tf_digits.build_model(args.hidden)
        optimizer = keras.optimizers.Adam(args.learning_rate)
    tf_digits.log(f"variables on {sorted({v.value.device for v in model.trainable_variables})}")
    # Each step is one worker's whole batch (num_replicas_in_sync is 1 under this strategy).
    replica_step = tf_digits.make_replica_step(tf, model, optimizer, args.batch_size)

    @tf.function
    def train_step(iterator):
        loss, correct = strategy.run(replica_step, args=next(iterator))
        # Where the step ran, so the log shows both workers training.
        return loss, correct, tf.distribute.coordinator.experimental_get_current_worker_index()

    per_worker_iterator = iter(coordinator.create_per_worker_dataset(
        strategy.distribute_datasets_from_function(dataset_fn)))
    steps_by_worker = [0] * workers
    for epoch in range(1, args.epochs + 1):
        results = [coordinator.schedule(train_step, args=(per_worker_iterator,))
                   for _ in range(args.steps_per_epoch)]
        coordinator.join()  # every scheduled step has run somewhere
        fetched = [r.fetch() for r in results]
        for _, _, worker in fetched:
            steps_by_worker[int(worker)] += 1
        loss = sum(float(f[0]) for f in fetched) / len(fetched)
        train_accuracy = sum(float(f[1]) for f in fetched) / (len(fetched) * args.batch_size)
        tf_digits.log(f"epoch {epoch}/{args.epochs}: loss {loss:.4f}, train accuracy {train_accuracy:.4f}")
    test_accuracy = tf_digits.accuracy(model, x_test, y_test)
    tf_digits.log(f"trained {sum(steps_by_worker)} steps on {workers} worker(s) in "
                  f"{time.monotonic() - started:.1f} s: test accuracy {test_accuracy:.4f}")
    tf_digits.log(f"steps by worker: {steps_by_worker}")
    tf_digits.report_metric("accuracy", test_accuracy)
    if args.model_dir:
        tf_digits.export(model, args.model_dir, args.export, x_test[:32])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    tf_digits.add_flags(parser)
    args = tf_digits.parse_flags(parser)
    started = time.monotonic()
    try:
        config = tf_cluster.prepare(args.cluster_timeout)
    except tf_cluster.ConfigError as e:
        tf_digits.fail(str(e))
    if not config:
        tf_digits.fail("ParameterServerStrategy needs a cluster: set TF_CONFIG with chief, worker and ps jobs")
    cluster, task_type = config["cluster"], config["task"]["type"]
    if "chief" not in cluster or not cluster.get("worker") or not cluster.get("ps"):
        tf_digits.fail(f"ParameterServerStrategy needs a chief (the coordinator), at least one worker and at "
                       f"least one ps; TF_CONFIG has {sorted(cluster)}")
    if task_type not in ("chief", "worker", "ps"):
        tf_digits.fail(f"this trainer has no {task_type!r} role (chief, worker and ps only)")

    import tensorflow as tf  # after TF_CONFIG is final: the resolver reads it

    try:
        if task_type == "chief":
            coordinate(tf, config, args, started)
        else:
            serve(tf, config)
    except tf_cluster.ConfigError as e:
        tf_digits.fail(str(e))


if __name__ == "__main__":
    main()
