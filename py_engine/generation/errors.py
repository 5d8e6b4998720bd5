"""Errors of the generation layer."""


class ContextFullError(Exception):
    """The conversation does not fit in the model's context window."""

    def __init__(self, n_tokens: int, n_ctx: int, detail: str = ""):
        self.n_tokens, self.n_ctx = n_tokens, n_ctx
        msg = f"context full: {n_tokens} tokens of {n_ctx}"
        super().__init__(f"{msg} ({detail})" if detail else msg)


class GeneratorBusyError(RuntimeError):
    """A second generation was started while one is running on the same backend state."""
