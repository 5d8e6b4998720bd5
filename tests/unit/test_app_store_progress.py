"""The store load path's progress as the chat page sees it: a first load downloads (stage 'download', bytes up to
the file's size), a second load of the same source downloads nothing and says so (stage 'stored', "loaded from
disk"), and a pinned sha256 that does not match refuses to mark the model complete."""
import asyncio
import hashlib

import pytest

from py_engine.app import store_load
from py_engine.store.catalogue import list_models
from py_engine.store.errors import StoreIntegrityError
from py_engine.store.local import BytesSource, MemoryStorage


@pytest.fixture(scope="module")
def model_bytes(fixture_models):
    return (fixture_models / "micro-qwen3moe.gguf").read_bytes()


def run_ingest(storage, data, expected=None):
    events = []
    asyncio.run(store_load.ingest_into(storage, "m.gguf", BytesSource(data, name="m.gguf"), events.append,
                                       expected_sha256=expected))
    return events


def test_second_load_of_a_stored_model_downloads_nothing(model_bytes):
    storage = MemoryStorage()
    first = run_ingest(storage, model_bytes)
    stages = {e["stage"] for e in first}
    assert "download" in stages and "stored" not in stages
    assert first[-1]["bytes"] == first[-1]["total"] == len(model_bytes)

    again = run_ingest(storage, model_bytes)
    assert [e["stage"] for e in again] == ["stored"]
    assert again[0]["message"] == store_load.FROM_DISK_MESSAGE and "loaded from disk" in again[0]["message"]
    assert again[0]["bytes"] == again[0]["total"] == len(model_bytes)
    listed = asyncio.run(list_models(storage))
    assert [(m["name"], m["complete"]) for m in listed] == [("m.gguf", True)]


def test_a_pinned_sha256_is_checked(model_bytes):
    good = hashlib.sha256(model_bytes).hexdigest()
    storage = MemoryStorage()
    run_ingest(storage, model_bytes, expected=good)
    assert asyncio.run(list_models(storage))[0]["complete"]

    wrong = MemoryStorage()
    with pytest.raises(StoreIntegrityError, match="not the pinned one"):
        run_ingest(wrong, model_bytes, expected="0" * 64)
    assert not asyncio.run(list_models(wrong))[0]["complete"]
