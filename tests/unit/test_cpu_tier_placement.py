"""The CPU expert tier's placement (which misses the CPU computes) and its options on the command lines."""
import pytest

from diskformer import engine_run
from py_engine.residency.cpu_tier_placement import CpuTierPlacement, TierRates
from py_engine.engine.options import StoreOptions


def placement(cpu_ms, upload_ms=1.0, read_ms=0.5, reuse=0.0, per_layer=2, mode="cost"):
    return CpuTierPlacement(TierRates(read_ms, upload_ms, cpu_ms), per_layer, reuse, mode)


def test_decides_only_while_its_layer_is_claimed():
    p = placement(cpu_ms=0.1)
    assert p.upload(0, 3)  # no layer begun: every miss uploads (prefill chunks, other routing modes)
    p.begin(4)
    assert p.upload(5, 3)  # another layer's miss (a late claim) uploads
    assert not p.upload(4, 3) and not p.upload(4, 6)
    assert p.upload(4, 7)  # the tier holds two experts a layer
    assert p.placed == [3, 6]
    p.end()
    assert p.upload(4, 1)
    p.begin(5)
    assert p.placed == [] and not p.upload(5, 1)


@pytest.mark.parametrize("cpu_ms, reuse, cpu", [
    (0.2, 0.0, True),    # one-off, cheaper on the CPU
    (1.5, 0.0, False),   # the CPU is slower than the upload
    (0.5, 0.9, False),   # reused: the slot pays for itself (0.5 > 1.0 - 0.9 * (0.5 + 0.5))
    (0.2, 0.5, True),    # 0.2 < 1.0 - 0.5 * 0.7
])
def test_cost_model(cpu_ms, reuse, cpu):
    p = placement(cpu_ms=cpu_ms, reuse=reuse)
    p.begin(0)
    assert p.upload(0, 1) is not cpu


def test_all_mode_and_observations():
    p = placement(cpu_ms=5.0, mode="all")
    p.begin(0)
    assert not p.upload(0, 1)
    q = placement(cpu_ms=0.4, reuse=0.0)
    assert q.prefers_cpu()
    for _ in range(30):  # every pick reused token after token: the slot is worth it
        q.observe(2, 2)
    assert q.reuse > 0.99 and not q.prefers_cpu()
    q.observe(0, 0, cpu_ms_per_expert=1.2)
    assert q.rates.cpu_ms == pytest.approx(0.4 + 0.2 * (1.2 - 0.4))
    with pytest.raises(ValueError, match="use one of"):
        placement(cpu_ms=1.0, mode="fastest")


def test_store_options():
    assert StoreOptions().cpu_tier == 0  # off by default
    assert StoreOptions.make(cpu_tier=2, routing="auto").cpu_tier == 2
    with pytest.raises(ValueError, match="per-layer routing"):
        StoreOptions.make(cpu_tier=2, routing="early_stop")
    with pytest.raises(ValueError, match="cpu_tier_place"):
        StoreOptions.make(cpu_tier=1, cpu_tier_place="gpu")
    with pytest.raises(ValueError, match="number of CPU workers"):
        StoreOptions.make(cpu_tier=-1)


def test_run_command_passes_the_tier(tmp_path, capsys):
    args = engine_run.build_parser().parse_args(["--store", str(tmp_path), "--cpu-tier", "3", "--ids", "1,2"])
    run, _ = engine_run.engine_args(args)
    assert run["cpu_tier"] == 3 and run["cpu_tier_url"].endswith("/web/cpu_tier/pool.js")
    assert engine_run.CPU_TIER_POOL.is_file()
    assert engine_run.main([str(tmp_path / "m.gguf"), "--cpu-tier", "1", "--ids", "1"]) == 2
    assert "--cpu-tier applies to --store runs" in capsys.readouterr().err
