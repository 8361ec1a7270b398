"""What the two TensorFlow trainers share: scikit-learn's 8x8 digits (no download), the Keras MLP,
the hyperparameter flags, the metric line and the model export.

The model has the signature of examples/models/digits: input "images" [N, 64] float32 (pixel
values 0..16 as load_digits gives them), output "scores" [N, 10] float32 logits, so a trained
model can be served as a new version of the `digits` ModelDeployment.
"""
import argparse
import os
import pathlib
import sys

import numpy as np

import keras_onnx


def log(message: str) -> None:
    print(message, flush=True)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Hyperparameters arrive as --name=value (API.md, TrainingJob trials)."""
    parser.add_argument("--hidden", type=int, default=32, help="units of the hidden layer")
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps_per_epoch", type=int, default=25)
    parser.add_argument("--batch_size", type=int, default=64, help="global batch size")
    parser.add_argument("--model_dir", default=os.environ.get("MODEL_DIR", ""),
                        help="where the chief writes model.onnx (default: $MODEL_DIR; empty: no export)")
    parser.add_argument("--export", choices=["onnx", "savedmodel"], default="onnx",
                        help="onnx (falls back to a SavedModel without the onnx package) or savedmodel")
    parser.add_argument("--cluster_timeout", type=float, default=120,
                        help="seconds to wait for the other tasks (DNS, servers, collective setup)")


def parse_flags(parser: argparse.ArgumentParser) -> argparse.Namespace:
    args = parser.parse_args()
    for name in ("hidden", "epochs", "steps_per_epoch", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if not args.learning_rate > 0:
        parser.error("--learning_rate must be positive")
    return args


def load_data(seed: int = 0):
    """(x_train, y_train, x_test, y_test): a fixed stratified 80/20 split of the 1,797 digits."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    digits = load_digits()
    x = digits.data.astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    return x_train, y_train, x_test, y_test


def build_model(hidden: int):
    import keras
    return keras.Sequential([
        keras.Input(shape=(64,), name="images"),
        keras.layers.Rescaling(1.0 / 16.0),
        keras.layers.Dense(hidden, activation="relu"),
        keras.layers.Dense(10),
    ], name="digits_mlp")


def make_replica_step(tf, model, optimizer, global_batch_size: int):
    """One training step on one replica's share of a global batch, for strategy.run. The loss is
    averaged over the global batch (tf.nn.compute_average_loss), so the gradients the Keras
    optimizer sums across replicas are those of the global mean. Returns (loss, correct): the
    replica's share of the mean loss and its count of right answers, both for a SUM reduce."""
    import keras
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.nn.compute_average_loss(loss_fn(y, logits), global_batch_size=global_batch_size)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1), y), tf.float32))
        return loss, correct

    return step


def accuracy(model, x: np.ndarray, y: np.ndarray) -> float:
    """Computed in this process from its copy of the weights (no collective)."""
    logits = np.asarray(model(x, training=False))
    return float(np.mean(np.argmax(logits, axis=1) == y))


def report_metric(name: str, value: float) -> None:
    """The line the operator reads (the last one counts)."""
    print(f"modelfleet-metric {name}={value:.4f}", flush=True)


def export(model, model_dir: str, how: str, sample: np.ndarray) -> pathlib.Path:
    out = pathlib.Path(model_dir)
    out.mkdir(parents=True, exist_ok=True)
    if how == "onnx" and not keras_onnx.available():
        log("the onnx package is not installed, so no model.onnx: writing a SavedModel instead")
        how = "savedmodel"
    if how == "onnx":
        # Keras's own ONNX export needs tf2onnx, which is not installed here; keras_onnx writes
        # this MLP directly and the result is checked against Keras in ONNX Runtime.
        proto = keras_onnx.mlp_to_onnx(model)
        diff = keras_onnx.check_against(proto, model, sample)
        path = out / "model.onnx"
        tmp = path.with_suffix(".onnx.tmp")
        tmp.write_bytes(proto.SerializeToString())
        tmp.replace(path)  # readers never see half a model
        log(f"exported {path} ({path.stat().st_size} bytes; ONNX Runtime vs Keras max |diff| "
            f"{'%.2e' % diff if diff >= 0 else 'not checked, no onnxruntime'})")
        return path
    path = out / "saved_model"
    model.export(str(path), format="tf_saved_model", verbose=False)
    log(f"exported SavedModel {path}")
    return path


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)
    sys.exit(1)
