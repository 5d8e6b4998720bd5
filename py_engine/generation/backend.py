"""What a model backend offers the generation layer (the GPU engine, or the NumPy reference on the host).

The generator owns the conversation and the sampling; the backend owns the model state (KV cache, recurrent
state) and computes logits. The interface is shaped for a GPU behind an asynchronous readback:

    n_ctx: int                 the most positions the cache can hold
    vocab_size: int            rows of the output head
    max_candidates: int        the largest k next_candidates serves (a GPU top-k kernel has a fixed width;
                               the generator never asks for more)
    supports_truncate: bool    True when truncate() can roll the state back to any shorter prefix (attention-only
                               models: drop KV rows). False for models with recurrent layers (qwen35moe's
                               Gated DeltaNet state folds every token in and cannot be un-folded): the generator
                               then calls reset() and prefills again whenever the new prompt diverges from the
                               cached tokens.
    n_cached: int              tokens currently held in the state (= the next position)

    async prefill(ids, start_pos) -> None
        Run the tokens `ids` at positions start_pos, start_pos+1, ... after what is cached and keep the logits of
        the last one. start_pos must equal n_cached (the generator tracks it; a mismatch is a bug and should
        raise). Decoding one token is a prefill of one id.
    async next_candidates(k) -> (ids, logits)
        The k highest logits of the position after the last prefilled token, as two Python lists sorted by logit,
        highest first, ties by lower id (so k=1 is llama.cpp's greedy argmax). Only these k values cross the
        GPU->CPU boundary: sampling runs in pure Python over at most `max_candidates` (64) candidates, never over
        a 150k-250k vocabulary. Returning the full sorted vocabulary (k >= vocab_size) is allowed and makes
        sampling exact.
    expect_candidates(k) -> None   (optional)
        The generator says which k its next_candidates calls will ask for until the next hint (None: unknown), so a
        backend can read back only that much (the GPU backend reads just the argmax and its logit for k = 1).
    async decode_step(token, start_pos) -> None   (optional)
        prefill([token], start_pos) for a token the generator decoded (prompt parts always go through prefill). A
        greedy backend may queue the next step, fed on the device with its own argmax, before this one is read
        back; n_cached does not count a queued step.
    async settle(token) -> bool   (optional)
        The generation ended with `token` picked but not fed (None: nothing picked since the last step). True when
        a step queued by decode_step fed exactly that token, so the state holds it and the generator counts it as
        cached; otherwise the queued step is undone where the state can be truncated, or left counted in n_cached
        (the generator then starts over).
    state_checkpoints: int     (optional, with the two methods below) copies of its state a backend that cannot
                               truncate keeps at the turn boundaries the generator names (0: none)
    save_checkpoint() -> None   (optional)
        Keep a copy of the state as it is (n_cached tokens), after a prefill; the oldest copy makes room.
    async prefill_checkpoint(ids, start_pos) -> None   (optional)
        prefill(ids, start_pos) then save_checkpoint(), where the logits of the last id are not needed.
    restore_checkpoint(at_most) -> int   (optional)
        Go back to the longest kept copy of at most `at_most` tokens (which must be the generator's cached tokens'
        prefix) and return its token count; 0: none was kept and the state is reset. Copies past it are dropped.
        Called instead of reset() when the new prompt diverges, so only the rest is prefilled.
    truncate(n_tokens) -> None
        Keep only the first n_tokens positions (n_tokens <= n_cached). Only called when supports_truncate.
    reset() -> None
        Forget everything (n_cached = 0).

Everything here is pure Python so the engine in Pyodide and the host share it.
"""
import heapq

REQUIRED_ATTRIBUTES = ("n_ctx", "vocab_size", "max_candidates", "supports_truncate", "n_cached")
REQUIRED_METHODS = ("prefill", "next_candidates", "truncate", "reset")


def check_backend(backend) -> None:
    """Raise TypeError naming what a backend object lacks (early, instead of failing mid-generation)."""
    missing = [a for a in REQUIRED_ATTRIBUTES if not hasattr(backend, a)]
    missing += [f"{m}()" for m in REQUIRED_METHODS if not callable(getattr(backend, m, None))]
    if missing:
        raise TypeError(f"{type(backend).__name__} is not a model backend: it lacks {', '.join(missing)} "
                        f"(see py_engine/generation/backend.py)")
    if int(backend.n_ctx) < 1 or int(backend.vocab_size) < 1 or int(backend.max_candidates) < 1:
        raise ValueError(f"{type(backend).__name__}: n_ctx, vocab_size and max_candidates must be >= 1 "
                         f"(got {backend.n_ctx}, {backend.vocab_size}, {backend.max_candidates})")


def top_candidates(logits, k: int):
    """(ids, logits) of the k largest values of a flat sequence, highest first, ties by lower id.

    For backends that hold a full logits row in Python (tests, a CPU fallback); O(n log k)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    best = heapq.nsmallest(k, range(len(logits)), key=lambda i: (-logits[i], i))
    return best, [float(logits[i]) for i in best]
