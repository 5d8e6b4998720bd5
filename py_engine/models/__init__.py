"""The architectures the engine runs, one folder each (registry.py lists them), and the blocks they share: the
per-token blocks (blocks.py), the prefill chunk's (chunk_blocks.py), the sequence's GPU state (cache.py)."""
