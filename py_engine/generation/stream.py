"""`async for delta in generator.stream(...)`: the deltas of a generation as an async iterator.

The generation runs as a task that puts its deltas on a queue; the iterator hands them out in order and, at the
end, sets `.result` (or raises the generation's error). Breaking out early does not stop the task: pass an abort
signal for that.
"""
import asyncio

_END = object()


class GenerationStream:
    def __init__(self, run):
        """run: a function taking an on_delta callback and returning the generation coroutine."""
        self._run = run
        self._queue = None
        self._task = None
        self._finished = False
        self.result = None

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self._finished:
            raise StopAsyncIteration
        if self._task is None:
            self._queue = asyncio.Queue()
            self._task = asyncio.ensure_future(self._run(self._queue.put_nowait))
            self._task.add_done_callback(lambda _: self._queue.put_nowait(_END))
        item = await self._queue.get()
        if item is _END:
            self._finished = True
            self.result = self._task.result()  # re-raises what the generation raised
            raise StopAsyncIteration
        return item
