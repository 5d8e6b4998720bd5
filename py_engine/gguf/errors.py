"""Exceptions of the GGUF reader.

`GGUFError` (and its subclasses) means "this file is not something we can read"; its message names the problem.
`NeedMoreBytes` is not an error: the sans-IO parser raises it to ask its driver for a longer prefix of the file.
"""


class GGUFError(ValueError):
    """The file is not a valid GGUF, or not one this engine can use; the message says why."""


class TruncatedGGUF(GGUFError):
    """The file ends before a structure it declares (a read past the real end of the file)."""


class UnsupportedGGUF(GGUFError):
    """A valid GGUF that the engine cannot run (architecture, tensor type, dimensions, byte order)."""


class NeedMoreBytes(Exception):
    """The buffer given to `parse_header` is a prefix too short to hold the header.

    `needed` is the total prefix length (from byte 0) that the parser knows it needs; the header may need more
    after that. Drivers fetch at least that much and parse again. Deliberately not a GGUFError: nothing is wrong
    with the file, so `except GGUFError` must never swallow it.
    """

    def __init__(self, needed: int):
        super().__init__(f"the GGUF header needs at least the first {needed} bytes of the file")
        self.needed = needed
