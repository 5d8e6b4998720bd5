"""Bytes of weights on their way to the GPU, for a Load's progress ("uploading weights: X MB of Y MB").

The loaders (gpu_weights.py, store_weights.py, expert_pool.py `load_all`) add what each write moved; the meter tells
`report(done, total)` at most once per `interval` seconds (the page redraws a few times a second, a message per
write would be thousands) and always when the last byte is in. Only the load uses it: the token loop never does.

The total is known before the upload for a stored model (the planned planes and records) but only estimated for a
GGUF loaded directly (its tensors' bytes: a tensor the model also uploads inside a stacked matrix counts twice, an
unused one not at all), so the total never stays below what is done, and `finish` makes it what was uploaded.
"""
import time

REPORT_INTERVAL = 0.1  # at most ~10 events a second reach the page


class UploadMeter:
    def __init__(self, report, total: int, interval: float = REPORT_INTERVAL, clock=time.perf_counter):
        self.report, self.total = report, int(total)
        self.interval, self.clock = interval, clock
        self.done = 0
        self.reports = 0
        self._last_at = None
        self._last_done = None

    def add(self, nbytes: int):
        self.done += int(nbytes)
        self.total = max(self.total, self.done)
        now = self.clock()
        if self.done >= self.total or self._last_at is None or now - self._last_at >= self.interval:
            self._tell(now)

    def finish(self):
        """The upload is over: its total is what was uploaded; report that unless it was the last figure told."""
        if self.total != self.done:
            self.total = self.done
            self._last_done = None
        if self._last_done != self.done:
            self._tell(self.clock())

    def _tell(self, now):
        if self._last_done == self.done:  # nothing new since the last report
            return
        self._last_at, self._last_done = now, self.done
        self.reports += 1
        self.report(self.done, self.total)


def meter_for(report, total: int):
    """An UploadMeter when someone listens (`report` not None), else None: loaders skip the counting."""
    return UploadMeter(report, total) if report is not None else None
