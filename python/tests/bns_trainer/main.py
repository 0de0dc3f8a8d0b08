"""Launcher of a BNS-GCN-shaped full-graph trainer, written for switchgnn's tests and bench:
partition once (DGL's partition_graph, plus a meta.json of n_feat, n_class, n_train as BNS-GCN
writes it), then one process per partition over gloo. Its communication is the stock one
(halo copies); docs/python.md's diff turns it to switchgnn's, as it does BNS-GCN's own main.py
and train.py. CPU only."""
import os
import random
import torch.multiprocessing as mp
import sys
import time

from helper.parser import create_parser
from helper.utils import graph_partition
import train

# Seconds the other ranks get to leave after rank 0 has.
TEARDOWN_GRACE = 10.0

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
        # And once rank 0 has left cleanly, every rank is past the final barrier (training
        # and results done), so a rank still alive TEARDOWN_GRACE seconds later is stuck in
        # torch 2.2's gloo teardown: destroy_process_group waits on the TCP store that rank 0
        # hosted and took with it (seen 1 run in about 10 on Cora x 2). Stop it.
        ended, stuck = None, []
        while True:
            alive = [p for p in processes if p.is_alive()]
            if not alive:
                break
            if any(p.exitcode not in (None, 0) for p in processes):
                for p in processes:
                    p.terminate()
            if processes[0].exitcode == 0:
                ended = ended or time.monotonic()
                if time.monotonic() - ended > TEARDOWN_GRACE:
                    stuck = sorted(set(stuck) | {processes.index(p) for p in alive})
                    for p in alive:
                        p.terminate()
            # Wait on a rank still running: one that has exited returns at once.
            alive[0].join(0.2)
        for p in processes:
            p.join()
        if stuck:
            print(f"ranks {stuck} were stopped {TEARDOWN_GRACE:.0f} s after rank 0 left: stuck "
                  "in gloo's teardown after training", flush=True)
        failed = {rank: p.exitcode for rank, p in enumerate(processes)
                  if p.exitcode != 0 and rank not in stuck}
        if failed:
            sys.exit(f"workers failed (rank: exit code): {failed}")
    else:
        raise ValueError(f"backend {args.backend!r}: this trainer runs over gloo")
