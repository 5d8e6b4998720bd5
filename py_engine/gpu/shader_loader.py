"""WGSL sources from the shaders folder, with `#include "name.wgsl"` and `{{NAME}}` constants.

Where the shaders are: `py_engine/shaders/` when the engine is installed (the wheel in the browser, the Pyodide
file system in Node), else the repo's `shaders/` beside `py_engine/` (a development checkout under CPython).
The folder is grouped into subfolders by concern (shaders/README.md); a shader is named by its file name alone,
which is unique in the whole tree, so kernels and includes do not depend on where a file sits. A name holding a
"/" is a path inside the folder instead.
Placeholders are substituted before includes are resolved, so an include name may carry one
(`#include "kv_{{KV}}.wgsl"`); every included file is inserted once (later includes of it are dropped).
"""
import re
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1]
SHADER_DIRS = (_PACKAGE / "shaders", _PACKAGE.parent / "shaders")

_INCLUDE = re.compile(r'^[ \t]*#include[ \t]+"([^"]+)"[ \t]*$', re.M)
_PLACEHOLDER = re.compile(r"\{\{([A-Z][A-Z0-9_]*)\}\}")


class ShaderError(Exception):
    """A shader could not be found or assembled (missing file, unknown placeholder, a name used twice)."""


def default_shader_dir() -> Path:
    for d in SHADER_DIRS:
        if d.is_dir() and any(d.rglob("*.wgsl")):
            return d
    raise ShaderError("no shaders folder found; looked in " + ", ".join(str(d) for d in SHADER_DIRS))


def shader_index(directory) -> dict:
    """{file name: path} of every .wgsl under `directory`; refuses a file name found in two places."""
    directory = Path(directory)
    index = {}
    for path in sorted(directory.rglob("*.wgsl")):
        if path.name in index:
            first, second = (p.relative_to(directory).as_posix() for p in (index[path.name], path))
            raise ShaderError(f"two shaders are named {path.name} ({first} and {second}); shader file names must "
                              f"be unique across {directory}")
        index[path.name] = path
    return index


class ShaderLoader:
    def __init__(self, directory=None):
        self.directory = Path(directory) if directory else default_shader_dir()
        self._index = None
        self._texts = {}

    def path(self, name: str) -> Path:
        """The file of shader `name` (a file name, or a path inside the shaders folder)."""
        if "/" in name:
            path = self.directory / name
            if ".." in name.split("/") or not path.is_file():
                raise ShaderError(f"shader {name!r} not found in {self.directory}")
            return path
        if self._index is None:
            self._index = shader_index(self.directory)
        path = self._index.get(name)
        if path is None:
            raise ShaderError(f"shader {name!r} not found in {self.directory}")
        return path

    def text(self, name: str) -> str:
        if name not in self._texts:
            self._texts[name] = self.path(name).read_text()
        return self._texts[name]

    def source(self, name: str, consts: dict | None = None) -> str:
        """The complete WGSL of `name` with its includes inserted and its placeholders replaced by `consts`."""
        consts = {k: str(v) for k, v in (consts or {}).items()}
        return self._assemble(name, consts, seen=set())

    def _assemble(self, name, consts, seen):
        seen.add(name)  # include-once also makes include cycles harmless
        text = self._substitute(self.text(name), consts, name)

        def include(m):
            inc = m.group(1)
            if inc in seen:
                return f"// {inc} already included"
            return self._assemble(inc, consts, seen)

        return _INCLUDE.sub(include, text)

    @staticmethod
    def _substitute(text, consts, name):
        def value(m):
            key = m.group(1)
            if key not in consts:
                raise ShaderError(f"{name}: no value given for {{{{{key}}}}}")
            return consts[key]

        return _PLACEHOLDER.sub(value, text)
