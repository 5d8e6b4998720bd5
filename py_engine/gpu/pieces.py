"""Where a recorded list is cut into queue submits (the replay helper's recordSplit, py_engine/gpu/commands.py)."""


def split_bounds(n_ops: int, split: int, lead: int = 0) -> list:
    """The (start, end) of each piece of a list of `n_ops` operations: `split` ops each, the last piece what is left
    (split 0: one piece), and where the list is cut at all, `lead` ops first (0: as the others). Mirrors
    recordSplit."""
    every = split if split > 0 else n_ops
    size = min(lead, every) if lead > 0 and n_ops > every else every
    bounds, start = [], 0
    while n_ops - start > size:
        bounds.append((start, start + size))
        start += size
        size = every
    return bounds + [(start, n_ops)]
