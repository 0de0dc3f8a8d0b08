"""The trainer's communication timer, shaped as BNS-GCN's ``helper/timer``: one interval per
name per epoch (a name twice is an error), summed by ``tot_time`` and cleared every epoch."""

import time
from contextlib import contextmanager


class CommTimer:
    def __init__(self):
        self._time = {}

    @contextmanager
    def timer(self, name):
        if name in self._time:
            raise KeyError(f"communication timer {name!r} was already used this epoch")
        start = time.time()
        yield
        self._time[name] = (start, time.time())

    def tot_time(self):
        return sum(end - start for start, end in self._time.values())

    def clear(self):
        self._time = {}


comm_timer = CommTimer()
