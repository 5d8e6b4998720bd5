"""The lab's tests use the repo tests' fixtures (the fixture models, llama.cpp's reference outputs) and paths.

pytest gives a conftest only to the tests of its own folder, so tests/conftest.py is loaded here and everything it
defines is this module's too. Both are imported as the module `conftest` (whichever pytest loaded last), so a test
of either folder that does `from conftest import REFS` finds the same names."""
import importlib.util
from pathlib import Path

_path = Path(__file__).resolve().parents[2] / "tests" / "conftest.py"
_spec = importlib.util.spec_from_file_location("repo_tests_conftest", _path)
_repo_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_repo_tests)
globals().update({name: value for name, value in vars(_repo_tests).items() if not name.startswith("_")})
