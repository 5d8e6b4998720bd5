"""The policy lab: traces carry the published reuse statistics, and the simulator drives the real streamer."""
import pytest

from lab.policy_lab import cli
from lab.policy_lab.simulate import guesses_for, simulate
from lab.policy_lab.traces import ARCHS, ArchShape, TraceParams, generate, measure

SMALL = ArchShape("small", 6, 32, 4, 1000)


@pytest.mark.parametrize("arch", ["qwen3moe", "qwen35moe"])
def test_default_traces_match_the_published_reuse_statistics(arch):
    a = ARCHS[arch]
    trace = generate(a, 300, seed=5)
    assert len(trace) == 300 and len(trace[0]) == a.layers
    assert all(len(set(p)) == a.top_k and all(0 <= e < a.experts for e in p) for row in trace for p in row)
    st = measure(trace, a.experts)
    assert st["repeat_prev"] == pytest.approx(0.45, abs=0.02)
    assert st["repeat_within_8"] == pytest.approx(0.80, abs=0.02)
    assert generate(a, 20, seed=5) == trace[:20]  # reproducible from the seed


def test_uniform_traces_have_no_reuse_beyond_chance():
    trace = generate(SMALL, 400, TraceParams(0.0, 0.0), seed=1)
    st = measure(trace, SMALL.experts)
    assert st["repeat_prev"] == pytest.approx(SMALL.top_k / SMALL.experts, abs=0.03)
    assert st["popularity_max_over_mean"] < 1.3  # long run: flat
    with pytest.raises(ValueError):
        TraceParams(0.7, 0.5)


def _share_from_t9_to_t16(trace):
    inside = total = 0
    for t in range(40, len(trace)):
        for layer in range(SMALL.layers):
            recent = set().union(*(trace[t - d][layer] for d in range(1, 9)))
            older = set().union(*(trace[t - d][layer] for d in range(9, 17))) - recent
            total += SMALL.top_k
            inside += sum(e in older for e in trace[t][layer])
    return inside / total


def test_long_range_reuse_comes_from_beyond_the_recent_window():
    long_only = _share_from_t9_to_t16(generate(SMALL, 120, TraceParams(0.0, 0.0, 1.0, long_window=16), seed=3))
    uniform = _share_from_t9_to_t16(generate(SMALL, 120, TraceParams(0.0, 0.0, 0.0), seed=3))
    assert long_only > 0.7 and uniform < 0.3  # misses: the window can run out of candidates on this tiny shape
    with pytest.raises(ValueError):
        TraceParams(0.1, 0.1, 0.1, long_window=8)


def test_guesses_follow_the_accuracy():
    import random
    rng = random.Random(0)
    picks = list(range(8))
    assert guesses_for(picks, 128, 1.0, rng) == picks
    right = sum(len(set(guesses_for(picks, 10_000, 0.5, rng)) & set(picks)) for _ in range(500))
    assert right / (500 * 8) == pytest.approx(0.5, abs=0.05)


def test_simulator_bounds_and_orderings():
    trace = generate(SMALL, 200, seed=2)
    whole = simulate(SMALL, trace, 1.0, "lru", warmup=40)
    # everything fits: the only misses are first uses after the warm-up
    seen_early = {(l, e) for row in trace[:40] for l, p in enumerate(row) for e in p}
    first_uses = {(l, e) for row in trace[40:] for l, p in enumerate(row) for e in p} - seen_early
    assert whole.stalls_per_token * whole.tokens == len(first_uses)
    small = simulate(SMALL, trace, 0.2, "lru")
    large = simulate(SMALL, trace, 0.6, "lru")
    assert small.hit_rate < large.hit_rate < 1.0
    assert small.bytes_per_token == pytest.approx(small.stalls_per_token * SMALL.record_bytes)
    perfect = simulate(SMALL, trace, 0.6, "lru", accuracy=1.0)
    assert perfect.stalls_per_token < large.stalls_per_token and perfect.prefetch_issued_per_token > 0
    assert perfect.prefetch_used_fraction > 0.9
    hot = simulate(SMALL, trace, 0.4, "hot", half_life_tokens=4)
    assert 0 < hot.hit_rate < 1


def test_cli_prints_a_table(capsys):
    assert cli.main(["--arch", "qwen35moe", "--tokens", "12", "--warmup", "4", "--pool", "0.2",
                     "--policy", "lru", "--prefetch-accuracy", "0,0.9"]) == 0
    out = capsys.readouterr().out
    assert "picks seen at t-1" in out and "hit rate" in out
    rows = [line for line in out.splitlines() if line.startswith("lru ")]
    assert len(rows) == 2 and "off" in rows[0] and "90%" in rows[1]
    with pytest.raises(SystemExit):
        cli.main(["--pool", "1.5"])
