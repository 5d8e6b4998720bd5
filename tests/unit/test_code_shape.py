"""The shape rules of the codebase: no Python file over ~500 lines, no function over ~10 parameters, and the engine
(py_engine) never imports numpy (it runs in Pyodide in the browser, where numpy is not to be had)."""
import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 500
MAX_PARAMS = 10
CHECKED = ("py_engine", "diskformer", "lab", "tests")


def python_files():
    for top in CHECKED:
        for path in sorted((REPO / top).rglob("*.py")):
            if not any(part.startswith(".") or part in ("node_modules", "__pycache__") for part in path.parts):
                yield path


def _params(node) -> list:
    a = node.args
    return [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]


def test_files_and_functions_stay_small():
    too_long, too_wide = [], []
    for path in python_files():
        src = path.read_text()
        rel = path.relative_to(REPO)
        if src.count("\n") > MAX_LINES:
            too_long.append(f"{rel}: {src.count(chr(10))} lines")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(_params(node)) > MAX_PARAMS:
                too_wide.append(f"{rel}:{node.lineno} {node.name} takes {len(_params(node))} parameters")
    assert not too_long, f"split these files (at most {MAX_LINES} lines): {too_long}"
    assert not too_wide, f"give these a small options or shape object (at most {MAX_PARAMS}): {too_wide}"


def test_the_engine_never_imports_numpy():
    offenders = []
    for path in python_files():
        if path.parts[len(REPO.parts)] != "py_engine":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "numpy" or n.startswith("numpy.") for n in names):
                offenders.append(str(path.relative_to(REPO)))
    assert not offenders, f"the engine runs where numpy is not to be had: {offenders}"
