"""The trainer's flags, named as BNS-GCN's (``args.n_hidden``, ``args.n_layers``, ...)."""

import argparse


def create_parser(argv=None):
    p = argparse.ArgumentParser(description="a BNS-GCN-shaped full-graph GCN trainer (CPU)")
    p.add_argument("--dataset", required=True, help="a gnn-benchmark npz file")
    p.add_argument("--part-path", "--part_path", required=True, help="where partitions go")
    p.add_argument("--graph-name", "--graph_name", default="")
    p.add_argument("--model", choices=["gcn", "graphsage", "gat"], default="gcn")
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--sampling-rate", "--sampling_rate", type=float, default=1.0)
    p.add_argument("--n-epochs", "--n_epochs", type=int, default=100)
    p.add_argument("--n-partitions", "--n_partitions", type=int, default=2)
    p.add_argument("--n-hidden", "--n_hidden", type=int, default=16)
    p.add_argument("--n-layers", "--n_layers", type=int, default=2)
    p.add_argument("--n-linear", "--n_linear", type=int, default=0)
    p.add_argument("--use-pp", "--use_pp", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="gloo")
    p.add_argument("--port", type=int, default=18118)
    p.add_argument("--log-every", "--log_every", type=int, default=10)
    p.add_argument("--skip-partition", action="store_true")
    p.add_argument("--out", help="rank 0 writes the run's figures here (JSON)")
    return p.parse_args(argv)
