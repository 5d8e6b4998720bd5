"""The kernels' launch shapes by adapter (py_engine/gpu/workgroups.py: pure arithmetic, no WebGPU)."""
import pytest

from py_engine.gpu.workgroups import argmax_workgroup


def test_argmax_lanes_by_adapter():
    assert argmax_workgroup({"maxComputeInvocationsPerWorkgroup": 1024, "maxComputeWorkgroupSizeX": 1024}) == 1024
    assert argmax_workgroup({"maxComputeInvocationsPerWorkgroup": 256, "maxComputeWorkgroupSizeX": 1024}) == 256
    assert argmax_workgroup({"maxComputeInvocationsPerWorkgroup": 1024, "maxComputeWorkgroupSizeX": 512}) == 256
    assert argmax_workgroup({}, 64) == 64
    for bad in (2, 8, 128, 512, 96):  # its tree takes two levels a step: these would leave candidates unreduced
        with pytest.raises(ValueError, match="power of 4"):
            argmax_workgroup({}, bad)
