"""The chat app's messages and GPU set-up bookkeeping under CPython: a user reads the first paragraph of an error
(what happened, what to do), the details follow a blank line; the page's stored pipeline list is checked before
use; the set-up counts each pipeline compiled once."""
import asyncio

from py_engine.app import gpu_setup
from py_engine.app.errors import BadModelFile, budget_too_small, fmt_mb
from py_engine.app.store_load import budget_refusal

ENGINE_REFUSAL = ("a GPU budget of 1048576 B (1.0 MiB) is too small for this model: dense weights 3000000 B + KV "
                  "cache/state 40000 B + work buffers 9000 B = 3049000 B, plus an expert pool of at least 2·top_k = "
                  "16 records of 160000 B = 2560000 B; give at least 5609000 B (5.3 MiB)")


def test_budget_refusal_says_how_much_to_give_and_keeps_the_formula_for_the_details():
    e = budget_refusal("micro.gguf", 1 << 20, ENGINE_REFUSAL)
    assert e.summary == ("GPU budget too small for micro.gguf: give at least 5.6 MB (raise the budget in Settings) "
                         "or lower the context size; the budget is 1.0 MB")
    assert e.details == ENGINE_REFUSAL
    assert str(e) == f"{e.summary}\n\n{ENGINE_REFUSAL}"
    assert "B +" not in e.summary


def test_budget_refusal_without_a_figure_still_says_what_to_do():
    e = budget_refusal("m", 1 << 20, "some other wording")
    assert "raise the budget" in e.summary and e.details == "some other wording"


def test_errors_without_details_are_one_paragraph():
    e = BadModelFile("not a usable GGUF file: choose a .gguf model file")
    assert str(e) == e.summary and "\n" not in str(e)
    assert "\n\n" in str(budget_too_small("m", 5, 1, "formula"))


def test_megabytes_for_people():
    assert [fmt_mb(n) for n in (999, 5_609_000, 2_500_000_000)] == ["999 B", "5.6 MB", "2.5 GB"]


def test_stored_pipeline_lists_are_checked_before_use():
    specs = [["rmsnorm", {"N": 4.0, "fast": True}], ["bad"], 3, ["x", {"a": [1]}], [5, {}], ["matvec", {}]]
    assert gpu_setup.clean_specs(specs) == [("rmsnorm", {"N": 4, "fast": True}), ("matvec", {})]
    assert gpu_setup.clean_specs({"not": "a list"}) == []
    assert gpu_setup.clean_specs([["s", {}]] * (gpu_setup.MAX_SPECS + 1)) == []


class CountingCache:
    """What ReportingPipelines wraps: a cache of pipelines by (name, consts), built on first use."""

    def __init__(self):
        self.built = {}
        self.gpu = "the device"

    def get(self, name, **consts):
        return self.built.setdefault(gpu_setup.spec_key(name, consts), f"pipeline {name}")

    async def prepare(self, specs, on_ready=None):
        todo = [s for s in specs if gpu_setup.spec_key(*s) not in self.built]
        for i, (name, consts) in enumerate(todo):
            self.get(name, **consts)
            if on_ready:
                on_ready(i + 1, len(todo))
        return len(todo)


def test_the_set_up_counts_each_pipeline_compiled_and_records_what_the_load_used():
    pipes = gpu_setup.ReportingPipelines(CountingCache())
    assert pipes.gpu == "the device"  # the rest is the wrapped object's
    events = []
    pipes.begin(gpu_setup.compiling_reporter(events.append))
    for name, n in [("a", 1), ("b", 2), ("a", 1), ("a", 3)]:
        pipes.get(name, N=n)
    pipes.end()
    assert pipes.compiled == 3
    assert [e["done"] for e in events] == [1, 2, 3] and events[-1]["total_steps"] is None
    assert pipes.specs() == [["a", {"N": 1}], ["b", {"N": 2}], ["a", {"N": 3}]]

    # the next Load of the model: its list compiled at once (here: only what is new), nothing one by one
    fresh = gpu_setup.ReportingPipelines(CountingCache())
    events.clear()
    prepared = asyncio.run(gpu_setup.set_up_pipelines(fresh, pipes.specs(), events.append))
    assert prepared == 3 and events[-1]["message"] == "compiling GPU kernels 3/3"
    fresh.begin(gpu_setup.compiling_reporter(events.append))
    for name, n in [("a", 1), ("b", 2), ("a", 3)]:
        fresh.get(name, N=n)
    assert fresh.compiled == 0


def test_a_list_the_browser_refuses_falls_back_to_compiling_as_it_goes():
    class Refusing(CountingCache):
        async def prepare(self, specs, on_ready=None):
            raise RuntimeError("no shader named 'renamed'")

    assert asyncio.run(gpu_setup.set_up_pipelines(gpu_setup.ReportingPipelines(Refusing()), [["renamed", {}]],
                                                  lambda e: None)) == 0


def test_streamed_rates_count_the_cpu_tier_reads_and_say_nothing_without_a_streamed_pool():
    from py_engine.app.session import streamed_rates
    streamer = {"bytes_read": 3_000_000, "read_ms": 1000.0, "upload_ms": 500.0}
    tier = {"share_of_misses": 0.25, "bytes_read": 1_000_000, "read_ms": 1000.0}
    assert streamed_rates({"cpu_tier": tier}, streamer) == {
        "cpu_share_of_misses": 0.25, "read_bytes_per_s": 2_000_000, "upload_bytes_per_s": 6_000_000}
    # the tier off: no share; nothing timed yet: no rate
    assert streamed_rates({"cpu_tier": None}, {"bytes_read": 0, "read_ms": 0.0, "upload_ms": 0.0}) == {
        "cpu_share_of_misses": None, "read_bytes_per_s": None, "upload_bytes_per_s": None}
    assert streamed_rates({}, None)["read_bytes_per_s"] is None


def test_a_load_refuses_a_bad_cpu_worker_count_in_words():
    import pytest

    from py_engine.app.session import Session
    with pytest.raises(ValueError, match="CPU expert workers -1: use a whole number from 0"):
        asyncio.run(Session().load({"kind": "served", "name": "m.gguf"}, {"cpu_tier": -1}))
