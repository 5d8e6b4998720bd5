"""The engine's JS programs live as .js files in py_engine/js_programs/, loaded by one loader and shipped in the
engine wheel (CPython, no browser)."""
import re
from pathlib import Path

from diskformer.engine_wheel import source_files

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "py_engine"
PROGRAMS = ENGINE / "js_programs"
_LOAD = re.compile(r'load_program\("([^"]+)"\)')


def _engine_sources():
    return {p: p.read_text() for p in ENGINE.rglob("*.py") if "__pycache__" not in p.parts}


def test_every_loaded_program_exists_and_ships():
    sources = _engine_sources()
    loaded = {name for text in sources.values() for name in _LOAD.findall(text)}
    files = {p.name for p in PROGRAMS.glob("*.js")}
    assert {"replay.js", "write_view.js", "early_stop.js"} <= loaded
    assert loaded == files, f"loaded but missing: {loaded - files}; present but unused: {files - loaded}"
    shipped = {name for name, _ in source_files(ROOT)}
    for name in files:
        assert f"py_engine/js_programs/{name}" in shipped


def test_engine_evaluates_js_only_through_the_loader():
    """run_js is called in one place (jsutil.load_program), outside the benchmark modules."""
    callers = sorted(str(p.relative_to(ROOT)) for p, text in _engine_sources().items()
                     if "run_js(" in text and "bench" not in p.relative_to(ENGINE).parts)
    assert callers == ["py_engine/gpu/jsutil.py"]
