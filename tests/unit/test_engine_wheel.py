"""The engine wheel the page installs holds the engine and its kernels only: nothing of the lab (the bench's
engine side, its kernels, the probes), which the Node runner adds beside the engine for bench runs alone."""
import zipfile
from io import BytesIO
from pathlib import Path

from diskformer import engine_wheel

REPO = Path(__file__).resolve().parents[2]


def _wheel_names(root) -> list:
    data = engine_wheel.build_wheel(engine_wheel.source_files(root))
    return zipfile.ZipFile(BytesIO(data)).namelist()


def test_repo_wheel_holds_no_lab_or_bench_file():
    files = engine_wheel.source_files(REPO)
    lab = (REPO / "lab").resolve()
    assert files and not [name for name, path in files if Path(path).resolve().is_relative_to(lab)]
    names = _wheel_names(REPO)
    assert "py_engine/boot.py" in names and "py_engine/shaders/matvec/matvec.wgsl" in names
    assert all(n.startswith(("py_engine/", f"{engine_wheel.DIST_INFO}/")) for n in names)
    # the bench's code and kernels exist, in the lab, and none of them is packed
    bench_kernels = sorted(p.name for p in (lab / "engine_bench" / "shaders").glob("*.wgsl"))
    assert "bench_stream_read.wgsl" in bench_kernels and (lab / "engine_bench" / "entry.py").is_file()
    assert not [n for n in names if "bench" in n.rsplit("/", 1)[-1] or "/bench/" in n or "lab" in n.split("/")]


def test_lab_beside_the_engine_stays_out(tmp_path):
    (tmp_path / "py_engine").mkdir()
    (tmp_path / "py_engine" / "boot.py").write_text("BOOT = 1\n")
    (tmp_path / "shaders").mkdir()
    (tmp_path / "shaders" / "matvec.wgsl").write_text("// kernel\n")
    (tmp_path / "lab" / "engine_bench" / "shaders").mkdir(parents=True)
    (tmp_path / "lab" / "__init__.py").write_text("")
    (tmp_path / "lab" / "engine_bench" / "entry.py").write_text("ENTRY = 1\n")
    (tmp_path / "lab" / "engine_bench" / "shaders" / "bench_empty.wgsl").write_text("// stand-in\n")
    names = set(_wheel_names(tmp_path))
    assert {"py_engine/boot.py", "py_engine/shaders/matvec.wgsl"} <= names
    assert not [n for n in names if "bench" in n or "entry" in n]
