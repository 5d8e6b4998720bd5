"""Expert residency: which routed experts sit in the GPU slot pool, and paging them in from storage."""
from .expert_streamer import ExpertStreamer, PoolExhausted, StreamerTuning, make_policy
from .hot_policy import HotPolicy
from .recency import LruPolicy
from .residency_map import ABSENT, ResidencyMap
from .slot_pool import SlotPoolLayout

__all__ = ["ExpertStreamer", "PoolExhausted", "StreamerTuning", "make_policy", "HotPolicy", "LruPolicy", "ABSENT",
           "ResidencyMap", "SlotPoolLayout"]
