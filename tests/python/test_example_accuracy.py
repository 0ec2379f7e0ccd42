"""examples/fashion_mnist.py reaches the accuracy of `frugal train --model cnn` with the same
settings (2 ranks, 2 epochs, batch 64 per rank, SGD lr 0.05 momentum 0.9): within one point.
Label `long` (a few minutes on 2 cores); FRUGAL is the `frugal` command, EXAMPLES the examples'
directory."""

import json
import os
import subprocess
import sys

FRUGAL = os.environ.get("FRUGAL", "frugal")
EXAMPLES = os.environ["EXAMPLES"]


def last_record(path, key):
    with open(path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    return [r for r in records if key in r][-1]


def test_example_matches_frugal_train(tmp_path):
    train_json = tmp_path / "train.jsonl"
    subprocess.run([FRUGAL, "train", "--np", "2", "--model", "cnn", "--epochs", "2",
                    "--progress", "none", "--json", str(train_json)], check=True, timeout=1500)
    frugal_accuracy = last_record(train_json, "test_accuracy")["test_accuracy"]
    example_json = tmp_path / "example.jsonl"
    subprocess.run([FRUGAL, "run", "--np", "2", "--", sys.executable,
                    os.path.join(EXAMPLES, "fashion_mnist.py"), "--epochs", "2", "--json",
                    str(example_json)], check=True, timeout=1500)
    example_accuracy = last_record(example_json, "accuracy")["accuracy"]
    print("frugal train %.4f, example %.4f" % (frugal_accuracy, example_accuracy))
    assert abs(example_accuracy - frugal_accuracy) <= 0.01
