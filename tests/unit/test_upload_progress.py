"""The weights upload's progress ("uploading weights: X MB of Y MB"): UploadMeter tells at most ~10 figures a second
however many writes there are, always the last one, never the same figures twice; the app's WeightsReporter turns
them into the page's 'gpu' / 'weights' events with bytes and total, then names the next step."""
from py_engine.app.gpu_setup import WeightsReporter
from py_engine.engine.upload_meter import REPORT_INTERVAL, UploadMeter, meter_for


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_meter_is_throttled_and_ends_on_the_total():
    clock, told = Clock(), []
    total = 1000 * 4096
    meter = UploadMeter(lambda done, of: told.append((done, of)), total, clock=clock)
    for _ in range(1000):  # 1000 writes over 2 s
        clock.now += 0.002
        meter.add(4096)
    meter.finish()
    assert REPORT_INTERVAL == 0.1
    assert len(told) <= 2 / REPORT_INTERVAL + 2
    assert len(told) >= 2 / REPORT_INTERVAL - 1  # and it does keep telling while the upload goes on
    assert told[0] == (4096, total)  # the first write is told at once
    assert told[-1] == (total, total)
    assert [d for d, _ in told] == sorted(set(d for d, _ in told))  # rising, never the same figures twice
    gaps = [b[0] - a[0] for a, b in zip(told, told[1:])]
    assert min(gaps[:-1]) >= (REPORT_INTERVAL / 0.002 - 1) * 4096  # ~0.1 s of writes between reports


def test_finish_tells_a_short_upload_once():
    clock, told = Clock(), []
    meter = UploadMeter(lambda done, of: told.append((done, of)), 300, clock=clock)
    meter.add(100)
    meter.add(100)  # within the interval: not told
    meter.add(100)  # the last byte: told at once
    meter.finish()  # nothing new: not told again
    assert told == [(100, 300), (300, 300)]
    told.clear()
    meter = UploadMeter(lambda done, of: told.append((done, of)), 300, clock=clock)
    meter.add(100)
    meter.add(100)
    meter.finish()
    meter.finish()
    assert told == [(100, 300), (200, 200)]
    assert meter_for(None, 300) is None  # nobody listens: the loaders skip the counting


def test_an_estimated_total_follows_what_was_uploaded():
    clock, told = Clock(), []
    meter = UploadMeter(lambda done, of: told.append((done, of)), 300, clock=clock)
    meter.add(250)
    clock.now += 1
    meter.add(100)  # a tensor uploaded twice: past the estimate, the total follows
    meter.finish()
    assert told == [(250, 300), (350, 350)]
    told.clear()
    meter = UploadMeter(lambda done, of: told.append((done, of)), 300, clock=clock)
    meter.add(250)
    meter.finish()  # a tensor never uploaded: the last figure says what was
    assert told == [(250, 300), (250, 250)]


def test_reporter_events_for_the_page():
    events = []
    reporter = WeightsReporter(events.append)
    meter = UploadMeter(reporter, 8_600_000, clock=Clock())
    meter.add(4_300_000)
    meter.add(4_300_000)
    meter.finish()
    weights = [e for e in events if e.get("step") == "weights"]
    assert weights == [{"stage": "gpu", "step": "weights", "message": "uploading weights", "bytes": b,
                        "total": 8_600_000} for b in (4_300_000, 8_600_000)]
    assert events[-1] == {"stage": "gpu", "step": "record", "message": "recording the token's GPU commands"}
