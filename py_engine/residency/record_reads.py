"""Record reads of the expert streamer, batched: the loads started together go to the reader together.

Each load carries a future (`load.read`) that its upload awaits. Per layer, `read_records(layer, experts)` calls
of at most MAX_BATCH records, all issued at once, where the reader has it (one await for the whole batch: the Node reader reads the records in parallel on
libuv's threads, the browser's reader pool on its workers), else one `read_record` task per load, all in flight
at once. A load cancelled meanwhile keeps its future cancelled; a failed read fails the loads of its batch.
"""
import asyncio

# records per reader call: a batch resolves as a whole, so a prefill chunk's union of a layer's experts (up to all
# of them) goes in pieces whose uploads start while the later pieces are still being read
MAX_BATCH = 8


def _retrieve_exception(task):
    if not task.cancelled():
        task.exception()


def start_reads(reader, loads, counters):
    batches = {}
    for ld in loads:
        batches.setdefault(ld.layer, []).append(ld)
    many = getattr(reader, "read_records", None)
    for layer, of_layer in batches.items():
        if many is not None:
            coros = [_read_batch(layer, of_layer[i:i + MAX_BATCH], many, counters)
                     for i in range(0, len(of_layer), MAX_BATCH)]
        else:
            coros = [_read_one(reader, ld, counters) for ld in of_layer]
        for coro in coros:
            asyncio.ensure_future(coro).add_done_callback(_retrieve_exception)


async def _read_batch(layer, batch, read_records, counters):
    counters.read_batches[layer] += 1
    try:
        datas = await read_records(layer, [ld.expert for ld in batch])
        if len(datas) != len(batch):
            raise ValueError(f"the reader returned {len(datas)} records for {len(batch)} experts of layer {layer}")
    except Exception as exc:
        for ld in batch:
            if not ld.read.done():
                ld.read.set_exception(exc)
        return
    for ld, data in zip(batch, datas):
        if not ld.read.done():  # its load may have been cancelled meanwhile
            ld.read.set_result(data)


async def _read_one(reader, ld, counters):
    counters.read_batches[ld.layer] += 1
    try:
        data = await reader.read_record(ld.layer, ld.expert)
    except Exception as exc:
        if not ld.read.done():
            ld.read.set_exception(exc)
        return
    if not ld.read.done():
        ld.read.set_result(data)
