"""A damaged store is found, named and repaired: verify(), the checks made when a store is run (open_checked,
CheckedSink), `diskformer ingest` / `diskformer verify` on the command line, and one ingest per folder."""
import asyncio
import json
import shutil

import pytest

from diskformer.cli import main as cli
from diskformer.commands.store_lock import folder_lock
from py_engine.store import verify
from py_engine.store.check import StoreDamaged, open_checked
from py_engine.store.layout import DENSE_FILE, EXPERTS_FILE, HEADER_FILE, MANIFEST_FILE, RECORD_PLANES
from py_engine.store.local import DirectorySink


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def clean_store(fixture_models, tmp_path_factory):
    folder = tmp_path_factory.mktemp("stores") / "clean"
    assert cli(["ingest", "--quiet", str(fixture_models / "tiny-qwen35moe.gguf"), str(folder)]) == 0
    return folder


@pytest.fixture
def store(clean_store, tmp_path):
    folder = tmp_path / "store"
    shutil.copytree(clean_store, folder)
    return folder


def manifest_of(folder):
    return json.loads((folder / MANIFEST_FILE).read_text())


def put_manifest(folder, m):
    (folder / MANIFEST_FILE).write_text(json.dumps(m))


def flip(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([b ^ 0x10]))


def record_plane_offset(m, layer, expert, plane):
    ex = m["layout"]["experts"]
    return (layer * ex["n_experts"] + expert) * ex["record_size"] + ex["planes"][plane][0]


def damage(folder, kind):
    """One of the damage cases a probe found passing silently; returns the text the error must name."""
    m = manifest_of(folder)
    plane = m["layout"]["dense"]["planes"][3]
    key = f"{plane['tensor']}:{plane['kind']}"
    if kind == "experts byte":
        flip(folder / EXPERTS_FILE, record_plane_offset(m, 1, 2, "down_codes") + 7)
        return "layer 1, expert 2"
    if kind == "record scale byte":
        flip(folder / EXPERTS_FILE, record_plane_offset(m, 0, 3, "up_scales") + 1)
        return "layer 0, expert 3"
    if kind == "dense byte":
        flip(folder / DENSE_FILE, plane["offset"] + 5)
        return key
    if kind == "header byte":
        flip(folder / HEADER_FILE, 200)
        return HEADER_FILE
    if kind == "plane offset moved":
        plane["offset"] += 256
        put_manifest(folder, m)
        return "layout"
    if kind == "dense checksum edited":
        m["checksums"]["dense"][key] ^= 1
        put_manifest(folder, m)
        return key
    if kind == "record checksum edited":
        m["checksums"]["records"][5] ^= 1
        put_manifest(folder, m)
        return "layer 0, expert 0"
    if kind == "header checksum edited":
        m["source"]["header_sha256"] = "0" * 64
        put_manifest(folder, m)
        return HEADER_FILE
    raise AssertionError(kind)


DAMAGE = ["experts byte", "record scale byte", "dense byte", "header byte", "plane offset moved",
          "dense checksum edited", "record checksum edited", "header checksum edited"]


async def read_every_record(folder):
    """What a run does: check at load, then read each record through the checking sink."""
    sink = await open_checked(DirectorySink(folder), str(folder))
    ex = sink.manifest["layout"]["experts"]
    for layer in ex["layers"]:
        for e in range(ex["n_experts"]):
            await sink.read(EXPERTS_FILE, (layer * ex["n_experts"] + e) * ex["record_size"], ex["record_size"])
    return sink


def test_a_sound_store_passes_every_check(clean_store):
    assert run(verify(DirectorySink(clean_store))).ok
    sink = run(read_every_record(clean_store))
    ex = sink.manifest["layout"]["experts"]
    assert sink.stats["records_checked"] == len(ex["layers"]) * ex["n_experts"]


@pytest.mark.parametrize("kind", DAMAGE)
def test_damage_is_found_by_verify_and_by_the_run_checks_then_repaired(store, fixture_models, kind, capsys):
    named = damage(store, kind)
    report = run(verify(DirectorySink(store)))
    assert not report.ok
    with pytest.raises(StoreDamaged) as caught:
        run(read_every_record(store))
    msg = str(caught.value)
    assert named in msg and "damaged" in msg and "re-ingest" in msg and "remove" in msg
    assert cli(["verify", str(store)]) == 1
    assert "damaged" in capsys.readouterr().err
    # the repair: ingest again from the same GGUF rewrites what is damaged
    assert cli(["ingest", "--quiet", str(fixture_models / "tiny-qwen35moe.gguf"), str(store)]) == 0
    assert cli(["verify", str(store)]) == 0
    run(read_every_record(store))


EDITED_MANIFESTS = {
    "a list": lambda m: [m],
    "header_size 10^12": lambda m: {**m, "layout": {**m["layout"], "header_size": 10 ** 12}},
    "no experts count": lambda m: _experts(m, n_experts=0),
    "record size zero": lambda m: _experts(m, record_size=0),
    "layers as text": lambda m: _experts(m, layers=["0", "1"]),
    "checksums cut short": lambda m: {**m, "checksums": {**m["checksums"], "records": m["checksums"]["records"][:3]}},
    "planes not a list": lambda m: {**m, "layout": {**m["layout"], "dense": {"size": 1, "planes": 5}}},
    "plane past the end": lambda m: _first_plane(m, nbytes=1 << 40),
    "checksum a string": lambda m: {**m, "checksums": {**m["checksums"], "header": "abc"}},
}


def _experts(m, **kw):
    return {**m, "layout": {**m["layout"], "experts": {**m["layout"]["experts"], **kw}}}


def _first_plane(m, **kw):
    planes = [dict(p) for p in m["layout"]["dense"]["planes"]]
    planes[0].update(kw)
    return {**m, "layout": {**m["layout"], "dense": {**m["layout"]["dense"], "planes": planes}}}


@pytest.mark.parametrize("edit", sorted(EDITED_MANIFESTS))
def test_an_edited_manifest_is_reported_not_crashed_on(store, edit, capsys):
    put_manifest(store, EDITED_MANIFESTS[edit](manifest_of(store)))
    report = run(verify(DirectorySink(store)))
    assert not report.ok and report.problem
    with pytest.raises(StoreDamaged):
        run(read_every_record(store))
    assert cli(["verify", str(store)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_second_ingest_into_a_busy_folder_is_refused(fixture_models, tmp_path, capsys):
    folder = tmp_path / "busy"
    with folder_lock(folder, "ingesting into"):
        assert cli(["ingest", "--quiet", str(fixture_models / "tiny-qwen35moe.gguf"), str(folder)]) == 1
    err = capsys.readouterr().err
    assert "another process is ingesting into" in err
    assert not (folder / "manifest.json.tmp").exists() and not (folder / MANIFEST_FILE).exists()
    assert cli(["ingest", "--quiet", str(fixture_models / "tiny-qwen35moe.gguf"), str(folder)]) == 0


def test_ingest_never_empties_a_folder_holding_other_files(fixture_models, tmp_path, capsys):
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    assert cli(["ingest", "--quiet", str(fixture_models / "tiny-qwen35moe.gguf"), str(folder)]) == 1
    assert "holds other files (notes.txt)" in capsys.readouterr().err
    assert (folder / "notes.txt").read_text() == "mine"


def test_ingest_and_verify_refuse_what_is_not_there(tmp_path, capsys):
    assert cli(["ingest", str(tmp_path / "none.gguf"), str(tmp_path / "s")]) == 1
    assert cli(["verify", str(tmp_path / "nothing")]) == 1
    (tmp_path / "empty").mkdir()
    assert cli(["verify", str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and "no such file" in err[0] and "not a folder" in err[1] and "no manifest" in err[2]



def test_a_failed_check_marks_the_store_and_the_next_ingest_from_the_source_repairs_it(store, fixture_models):
    """The browser's path (no verify on every load): the check that fails notes the damage in the manifest, and
    the ingest, which would skip a complete store, repairs it from the source instead."""
    from py_engine.store import ingest
    from py_engine.store.local import FileSource

    damage(store, "experts byte")
    with pytest.raises(StoreDamaged):
        run(read_every_record(store))
    assert "layer 1, expert 2" in manifest_of(store)["state"]["damaged"]
    source = FileSource(fixture_models / "tiny-qwen35moe.gguf")
    try:
        manifest = run(ingest(source, DirectorySink(store)))
    finally:
        source.close()
    assert "damaged" not in manifest["state"] and "damaged" not in manifest_of(store)["state"]
    assert run(verify(DirectorySink(store))).ok
    run(read_every_record(store))
