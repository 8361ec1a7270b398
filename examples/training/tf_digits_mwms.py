#!/usr/bin/env python3
"""Trains the digits MLP with tf.distribute.MultiWorkerMirroredStrategy across the tasks that
TF_CONFIG names (chief + workers, or workers alone): a Keras model and optimizer in a custom loop.

Every task holds a full copy of the model; each step, every task trains on its shard of the
global batch and the gradients are summed across tasks with collective all-reduce, so the copies
stay identical. The chief (worker 0 when there is no chief) prints the test accuracy as
`modelfleet-metric accuracy=<value>` and writes MODEL_DIR/model.onnx.

    TF_CONFIG='{"cluster": {...}, "task": {"type": "worker", "index": 1}}' \\
        python examples/training/tf_digits_mwms.py --epochs=4 [--hidden=32 --learning_rate=0.01]

Without TF_CONFIG it trains alone in this process. examples/training/run_tf_local.py starts a
whole cluster of these as local processes.
"""
import argparse
import time

import tf_cluster
import tf_digits


def configure_coordination(tf, config: dict, timeout_s: float) -> None:
    """The coordination service MultiWorkerMirroredStrategy would configure itself, but with a
    registration deadline: by default a task whose peer never starts waits forever."""
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context
    cluster = config["cluster"]
    jobs = [coordination_config_pb2.CoordinatedJob(name=job, num_tasks=len(cluster[job]))
            for job in ("chief", "worker") if job in cluster]
    context.context().configure_coordination_service(
        service_type="standalone",
        service_leader=multi_worker_util.coordination_leader(tf.train.ClusterSpec(cluster)),
        coordinated_jobs=jobs,
        cluster_register_timeout_in_ms=int(timeout_s * 1000),
        heartbeat_timeout_in_ms=int(timeout_s * 1000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    tf_digits.add_flags(parser)
    args = tf_digits.parse_flags(parser)
    started = time.monotonic()
    try:
        config = tf_cluster.prepare(args.cluster_timeout)
    except tf_cluster.ConfigError as e:
        tf_digits.fail(str(e))
    if config and config["task"]["type"] not in ("chief", "worker"):
        tf_digits.fail(f"MultiWorkerMirroredStrategy trains on chief and worker tasks only; this task is "
                       f"{config['task']['type']!r} (use tf_digits_ps.py for parameter servers)")

    import tensorflow as tf  # after TF_CONFIG is final: the strategy reads it

    if config:
        configure_coordination(tf, config, args.cluster_timeout)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING,
            timeout_seconds=args.cluster_timeout))
    workers = strategy.num_replicas_in_sync
    chief = tf_cluster.is_chief(config)
    tf_digits.log(f"MultiWorkerMirroredStrategy: {workers} replica(s) in sync, chief={chief}, "
                  f"ready after {time.monotonic() - started:.1f} s")

    x_train, y_train, x_test, y_test = tf_digits.load_data()
    tf.random.set_seed(1)
    dataset = (tf.data.Dataset.from_tensor_slices((x_train, y_train))
               .shuffle(len(x_train), seed=1).repeat().batch(args.batch_size, drop_remainder=True))
    options = tf.data.Options()
    # Each task reads a different 1/n of every global batch.
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    iterator = iter(strategy.experimental_distribute_dataset(dataset.with_options(options)))

    import keras
    with strategy.scope():
        model = tf_digits.build_model(args.hidden)
        optimizer = keras.optimizers.Adam(args.learning_rate)
    replica_step = tf_digits.make_replica_step(tf, model, optimizer, args.batch_size)

    # A custom loop rather than model.fit: Keras 3's fit tries to MEAN-reduce a whole distributed
    # input batch before its first step, which MultiWorkerMirroredStrategy's cross-device ops
    # refuse (ValueError "Attempt to convert a value (PerReplica...)").
    @tf.function
    def train_step(iterator):
        loss, correct = strategy.run(replica_step, args=next(iterator))
        return (strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
                strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None))

    for epoch in range(1, args.epochs + 1):
        total_loss, total_correct = 0.0, 0.0
        for _ in range(args.steps_per_epoch):
            loss, correct = train_step(iterator)
            total_loss += float(loss)
            total_correct += float(correct)
        train_accuracy = total_correct / (args.steps_per_epoch * args.batch_size)
        tf_digits.log(f"epoch {epoch}/{args.epochs}: loss {total_loss / args.steps_per_epoch:.4f}, "
                      f"train accuracy {train_accuracy:.4f}")
    test_accuracy = tf_digits.accuracy(model, x_test, y_test)
    tf_digits.log(f"trained {args.epochs * args.steps_per_epoch} steps on {workers} replica(s) in "
                  f"{time.monotonic() - started:.1f} s: train accuracy {train_accuracy:.4f}, "
                  f"test accuracy {test_accuracy:.4f}")
    if chief:
        tf_digits.report_metric("accuracy", test_accuracy)
        if args.model_dir:
            tf_digits.export(model, args.model_dir, args.export, x_test[:32])


if __name__ == "__main__":
    main()
