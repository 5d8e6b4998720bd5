"""Where a demanded miss is served: uploaded into a pool slot, or computed by another tier where the record lies.

The streamer asks its placement once per demanded miss (never for hits, late hits or prefetches). `True` keeps
the default path: a slot is taken, the record read and uploaded, the slot returned by ensure(). `False` sends the
expert elsewhere (e.g. a CPU tier that reads the record and computes the expert's output itself): ensure() gives
ELSEWHERE (-1) for it, takes no slot and reads nothing, and counts it in `placed_elsewhere`; the caller must then
have that expert computed by the other tier. A cost model fits here: upload when reuse is expected, compute
elsewhere for a one-off.
"""
ELSEWHERE = -1


class UploadEveryMiss:
    """The default placement: every miss goes into a slot."""

    name = "upload"

    def upload(self, layer: int, expert: int) -> bool:
        return True
