"""lab/logit_bits.py, the bit-identity check between engine states: a dump of one fixture model runs (so the tool
cannot rot), two dumps of one state agree bit for bit, and a changed bit, a missing file or a shorter file is found."""

import numpy as np

from lab import logit_bits


def test_dump_twice_gives_the_same_bits_and_compare_finds_changes(fixture_models, tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    n = logit_bits.dump(a, ["micro-qwen35moe"], "q8", "f16", fixture_models)
    assert n == 5 and len(list(a.glob("*.f32"))) == 5
    logit_bits.dump(b, ["micro-qwen35moe"], "q8", "f16", fixture_models)  # a second run of the same state
    assert logit_bits.compare(a, b) == []
    first = sorted(b.glob("*.f32"))
    words = np.fromfile(first[0], "<u4")
    assert words.size > 0 and np.isfinite(words.view("<f4")).all()
    words[words.size // 2] ^= 1  # one bit of one logit
    words.tofile(first[0])
    first[1].unlink()
    np.fromfile(first[2], "<u4")[:-1].tofile(first[2])
    bad = logit_bits.compare(a, b)
    assert len(bad) == 3
    assert "1 values differ" in bad[0] and "missing" in bad[1] and "values against" in bad[2]
    assert logit_bits.main(["compare", str(a), str(b)]) == 1
    assert logit_bits.main(["compare", str(a), str(a)]) == 0
