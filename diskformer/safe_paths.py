"""Turn a request's raw path into a file strictly inside one served root, or say why not.

uvicorn percent-decodes `scope["path"]` before the app sees it, so `%2f` and `%2e%2e` would already look like
`/` and `..` there; we work from `scope["raw_path"]`, split it into segments *before* decoding and decode each
segment strictly (bad escape or invalid UTF-8 -> 400). A segment that decodes to a separator, `.`/`..`, a NUL, a
backslash or a hidden name is refused (404), and the final realpath must still lie under the root's realpath, which
also catches symlinks that lead out of it.
"""
import os
import re
import stat

_ESCAPE = re.compile(rb"%([0-9A-Fa-f]{2})")


class BadRequestPath(ValueError):
    """The raw path is not a valid percent-encoded UTF-8 path (-> 400)."""


class NotServed(LookupError):
    """No servable file answers this path (-> 404): missing, a directory, or outside the root."""


def decode_segment(raw: bytes) -> str:
    """Percent-decode one raw path segment; every '%' must start a two-hex-digit escape, the result must be UTF-8."""
    if b"%" in _ESCAPE.sub(b"", raw):
        raise BadRequestPath(f"bad percent-escape in {raw!r}")
    try:
        return _ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), raw).decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequestPath(f"path segment {raw!r} is not UTF-8 after decoding: {e.reason}") from None


def split_raw_path(raw_path: bytes) -> list:
    """Decode '/a/b%20c' into ['a', 'b c']; '/' gives []. Raises BadRequestPath (400) or NotServed (404)."""
    if not raw_path.startswith(b"/"):
        raise NotServed("path does not start with '/'")
    raw_segments = raw_path[1:].split(b"/")
    segments = [decode_segment(s) for s in raw_segments]  # decode everything first: a bad escape is a 400 anywhere
    if segments == [""]:
        return []
    for seg in segments:
        if seg == "":
            raise NotServed("empty path segment ('//' or a trailing '/')")
        if seg.startswith("."):
            raise NotServed(f"dot segment or hidden name {seg!r}")
        if any(c in seg for c in ("/", "\\", "\x00")):
            raise NotServed(f"segment {seg!r} holds a separator or NUL")
    return segments


def resolve_file(root, segments) -> tuple:
    """Return (realpath, os.stat_result) of the regular file `root/segments...`, never anything outside root."""
    if root is None:
        raise NotServed("this root is not configured")
    real_root = os.path.realpath(root)
    if not segments:
        raise NotServed("the root itself is a directory")
    candidate = os.path.realpath(os.path.join(real_root, *segments))
    if os.path.commonpath([real_root, candidate]) != real_root:
        raise NotServed("path resolves outside the served root")
    try:
        st = os.stat(candidate)
    except OSError:
        raise NotServed("no such file") from None
    if not stat.S_ISREG(st.st_mode):
        raise NotServed("not a regular file")
    return candidate, st
