"""Errors the chat page shows as they are: each message says what happened and what to do."""


class AppError(RuntimeError):
    """Base of the app's readable errors."""


class NoModelLoaded(AppError):
    def __init__(self):
        super().__init__("no model is loaded: pick one and press Load")


class BudgetTooSmall(AppError):
    """The model (all experts resident) plus its KV cache does not fit the GPU budget the user set."""


class BadModelFile(AppError):
    """Not a GGUF, a damaged one, or an architecture / tensor type the engine does not run."""


class DeviceLost(AppError):
    """The WebGPU device went away (driver reset, tab in the background for long, out of memory)."""


class Busy(AppError):
    """A load or a reply is running and the request would disturb it."""
