"""Errors the chat page shows as they are: each message says what happened and what to do, in the user's words.

A message's first paragraph is what the page shows; anything technical (a byte count formula, the bytes a file
starts with) goes after a blank line as `details`, which the page folds into its collapsible part.
"""


class AppError(RuntimeError):
    """Base of the app's readable errors."""

    def __init__(self, message: str, details: str = ""):
        self.summary, self.details = message, details
        super().__init__(f"{message}\n\n{details}" if details else message)


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


def fmt_mb(n: int) -> str:
    """Bytes as the page writes them (decimal MB / GB), for messages a user reads."""
    n = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def budget_too_small(name: str, need_bytes: int, budget_bytes: int, details: str) -> BudgetTooSmall:
    """The budget refusal, remedy first: how much to give, then what it was."""
    return BudgetTooSmall(f"GPU budget too small for {name}: give at least {fmt_mb(need_bytes)} (raise the budget in "
                          f"Settings) or lower the context size; the budget is {fmt_mb(budget_bytes)}", details)
