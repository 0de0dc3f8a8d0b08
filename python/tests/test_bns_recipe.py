"""docs/python.md's BNS-GCN recipe, end to end: its diff (read from the docs) applies to a
BNS-GCN-shaped trainer (bns_trainer/) and the patched trainer runs unchanged, training Cora
like the stock gloo trainer, with and without boundary sampling. The runs need the
DGL environment of scripts/dgl.sh and the shared datasets: without them they skip with the
reason, or fail under CI=true."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from conftest import dataset
from recipe import apply, docs_diff, parse, trainer_copy
from test_dgl import dgl_python

# As in test_dgl.py: fixed point and another summation order move the loss by about 1e-7.
LOSS_TOLERANCE = 1e-5
EPOCHS = 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train(folder, parts, out, *extra, timeout=600):
    """Run the trainer in ``folder`` on Cora; the finished process."""
    args = [dgl_python(), "main.py", "--dataset", str(dataset("cora.npz")), "--part-path",
            str(folder.parent / "parts"), "--n-partitions", str(parts), "--n-epochs",
            str(EPOCHS), "--use-pp", "--dropout", "0", "--port", str(free_port()), "--out",
            str(out), *extra]
    env = dict(os.environ, DGLBACKEND="pytorch")
    return subprocess.run(args, cwd=folder, capture_output=True, text=True, env=env,
                          timeout=timeout)


def succeeded(done):
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
    assert done.returncode == 0, f"the trainer failed with exit code {done.returncode}"


def test_docs_diff_touches_main_and_train_only():
    files = parse(docs_diff())
    assert sorted(files) == ["main.py", "train.py"]
    added = [line for hunks in files.values() for _, new in hunks for line in new]
    assert any("switchgnn.dgl.serve(" in line for line in added)


def test_docs_diff_applies_to_the_shaped_trainer(tmp_path):
    folder = trainer_copy(tmp_path / "switch", with_switchgnn=True)
    text = (folder / "train.py").read_text()
    assert "bns.construct_graph(in_graph, ctx.buffer)" in text
    assert "data_transfer(selected" not in text.split("def run(")[1]
    assert "sampling=args.sampling_rate < 1" in (folder / "main.py").read_text()
    # Applied twice, the removed lines are gone: the applier refuses rather than guesses.
    try:
        apply(docs_diff(), folder)
    except ValueError as e:
        assert "matches 0 times" in str(e)
    else:
        raise AssertionError("the diff applied twice")


def test_recipe_trains_like_the_stock_trainer(tmp_path):
    stock = trainer_copy(tmp_path / "stock", with_switchgnn=False)
    switch = trainer_copy(tmp_path / "switch", with_switchgnn=True)
    succeeded(train(stock, 2, tmp_path / "stock.json"))
    done = train(switch, 2, tmp_path / "switch.json")
    succeeded(done)
    theirs = json.loads((tmp_path / "stock.json").read_text())
    mine = json.loads((tmp_path / "switch.json").read_text())
    compare(mine, theirs, EPOCHS)
    assert mine["loss"][-1] < 0.5 * mine["loss"][0], "the model did not learn"
    # BNS-GCN's Comm(s) column: the buffer's exchanges went into the trainer's comm_timer.
    assert all(c > 0 for c in mine["comm_s"]), mine["comm_s"]
    assert "Comm(s) 0.0000" not in done.stdout
    assert (tmp_path / "parts" / "cora-2" / "switchgnn-plan").is_dir()


def compare(mine, theirs, epochs):
    assert len(mine["loss"]) == len(theirs["loss"]) == epochs
    for epoch, (a, b) in enumerate(zip(mine["loss"], theirs["loss"])):
        assert abs(a - b) <= LOSS_TOLERANCE * abs(b), f"epoch {epoch}: {a} vs stock {b}"
    assert mine["test_acc"] == theirs["test_acc"]


@pytest.mark.parametrize("rate", [0.1, 0.01])
def test_recipe_samples_the_boundary_as_the_stock_trainer(tmp_path, rate):
    """BNS-GCN's point, p < 1: every epoch each worker samples its boundary rows per peer
    (BNS's select_node, seeded as BNS seeds it) and scales them by 1 / ratio. Three parts, so
    that vertices with neighbours on two peers get two factors. The switch's run matches the
    stock run's every epoch, so it sampled and scaled the same rows; and it differs from the
    unsampled run, so the sample mattered."""
    stock = trainer_copy(tmp_path / "stock", with_switchgnn=False)
    switch = trainer_copy(tmp_path / "switch", with_switchgnn=True)
    sampled = ("--sampling-rate", str(rate))
    succeeded(train(stock, 3, tmp_path / "stock.json", *sampled))
    succeeded(train(switch, 3, tmp_path / "switch.json", *sampled))
    succeeded(train(stock, 3, tmp_path / "full.json"))
    mine = json.loads((tmp_path / "switch.json").read_text())
    compare(mine, json.loads((tmp_path / "stock.json").read_text()), EPOCHS)
    full = json.loads((tmp_path / "full.json").read_text())
    assert any(abs(a - b) > 100 * LOSS_TOLERANCE * abs(b)
               for a, b in zip(mine["loss"], full["loss"])), "sampling changed nothing"
    assert (tmp_path / "parts" / "cora-3" / "switchgnn-plan-sampling").is_dir()
