"""The CPU expert tier: routed experts computed on the CPU (web/cpu_tier) instead of uploaded to the GPU."""
from .expert_tier import CpuExpertTier

__all__ = ["CpuExpertTier"]
