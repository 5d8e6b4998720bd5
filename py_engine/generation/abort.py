"""Abort signals the generator accepts, checked between prefill chunks and between tokens.

Any of: an object with an `aborted` attribute (a JS AbortSignal seen through Pyodide's FFI, or AbortFlag below),
one with `is_set()` (asyncio.Event, threading.Event), or a callable returning a bool.
"""


class AbortFlag:
    def __init__(self):
        self.aborted = False

    def abort(self):
        self.aborted = True


def abort_checker(signal):
    """A function returning True once `signal` asks to stop."""
    if signal is None:
        return lambda: False
    if hasattr(signal, "aborted"):
        return lambda: bool(signal.aborted)
    if callable(getattr(signal, "is_set", None)):
        return lambda: bool(signal.is_set())
    if callable(signal):
        return lambda: bool(signal())
    raise TypeError(f"abort must be an object with .aborted, one with .is_set(), or a callable, not "
                    f"{type(signal).__name__}")
