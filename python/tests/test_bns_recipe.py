"""docs/python.md's BNS-GCN recipe, end to end: its diff (read from the docs) applies to a
BNS-GCN-shaped trainer (bns_trainer/) and the patched trainer runs unchanged, training Cora
like the stock gloo trainer; boundary sampling is refused with its message. The runs need the
DGL environment of scripts/dgl.sh and the shared datasets: without them they skip with the
reason, or fail under CI=true."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

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
    assert "select_node(boundary, send_size)\n" not in text.split("def run(")[1]
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
    assert len(mine["loss"]) == len(theirs["loss"]) == EPOCHS
    for epoch, (a, b) in enumerate(zip(mine["loss"], theirs["loss"])):
        assert abs(a - b) <= LOSS_TOLERANCE * abs(b), f"epoch {epoch}: {a} vs stock {b}"
    assert mine["loss"][-1] < 0.5 * mine["loss"][0], "the model did not learn"
    assert mine["test_acc"] == theirs["test_acc"]
    # BNS-GCN's Comm(s) column: the buffer's exchanges went into the trainer's comm_timer.
    assert all(c > 0 for c in mine["comm_s"]), mine["comm_s"]
    assert "Comm(s) 0.0000" not in done.stdout
    assert (tmp_path / "parts" / "cora-2" / "switchgnn-plan").is_dir()


def test_recipe_refuses_boundary_sampling(tmp_path):
    switch = trainer_copy(tmp_path / "switch", with_switchgnn=True)
    done = train(switch, 2, tmp_path / "out.json", "--sampling-rate", "0.5", timeout=300)
    assert done.returncode != 0, "a sampling rate of 0.5 was accepted"
    assert "boundary sampling" in done.stderr and "not supported by the switch" in done.stderr, (
        done.stderr[-3000:])

