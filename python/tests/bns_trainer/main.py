"""Launcher of a BNS-GCN-shaped full-graph trainer, written for switchgnn's tests and bench:
partition once (DGL's partition_graph, plus a meta.json of n_feat, n_class, n_train as BNS-GCN
writes it), then one process per partition over gloo. Its communication is the stock one
(halo copies); docs/python.md's diff turns it to switchgnn's, as it does BNS-GCN's own main.py
and train.py. CPU only."""
import os
import random
import torch.multiprocessing as mp
import sys

from helper.parser import create_parser
from helper.utils import graph_partition
import train

if __name__ == '__main__':
    args = create_parser()
    random.seed(args.seed)
    if args.graph_name == '':
        stem = os.path.splitext(os.path.basename(args.dataset))[0]
        args.graph_name = f"{stem}-{args.n_partitions}"
    if not args.skip_partition:
        graph_partition(args)
    print(args, flush=True)

    if args.backend == 'gloo':
        mp.set_start_method('spawn', force=True)
        processes = [mp.Process(target=train.init_processes, args=(rank, args.n_partitions, args))
                     for rank in range(args.n_partitions)]
        for p in processes:
            p.start()
        # Unlike the published launcher, stop the others once one fails: a rank that dies
        # before or during gloo's rendezvous would leave the rest waiting for it for good (and
        # a test with them, until its own timeout).
        while any(p.is_alive() for p in processes):
            if any(p.exitcode not in (None, 0) for p in processes):
                for p in processes:
                    p.terminate()
            processes[0].join(0.2)
        for p in processes:
            p.join()
        failed = {rank: p.exitcode for rank, p in enumerate(processes) if p.exitcode != 0}
        if failed:
            sys.exit(f"workers failed (rank: exit code): {failed}")
    else:
        raise ValueError(f"backend {args.backend!r}: this trainer runs over gloo")
