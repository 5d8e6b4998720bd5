"""One chat turn: render the template, reuse the cached prefix, prefill the rest, decode and stream text deltas.

    gen = Generator(backend, tokenizer, arch="qwen3moe")
    result = await gen.generate(messages, thinking=False, max_tokens=256,
                                sampling=SamplingParams(seed=1), on_delta=show)
    async for delta in gen.stream(messages, thinking=True):   # the same, as an async iterator
        ...

The Generator owns the backend's state between turns: it remembers which tokens the backend holds, so the next
prompt only prefills what differs (see prefix.py). A generation stops at a stop token (not part of the answer and
not fed to the model), at max_tokens, at an abort (the text so far is kept and the result marked), or when the
context is full (the text so far is kept and the result says so; a prompt that does not fit raises
ContextFullError before anything runs).
"""
import inspect
import time
from dataclasses import dataclass, field

from ..tokenizer import StreamDecoder, render_chat
from ..tokenizer.chat import turn_opener
from .abort import abort_checker
from .backend import check_backend
from .errors import ContextFullError, GeneratorBusyError
from .prefix import checkpoint_positions, plan_reuse, reuse_limit
from .sampling import Sampler, SamplingParams
from .stats import GenerationStats
from .stream import GenerationStream
from .thinking import THINKING, ThinkingSplitter, prompt_opens_thinking, thinking_tags

STOP, LENGTH, ABORT, CONTEXT_FULL = "stop", "length", "abort", "context_full"


@dataclass(frozen=True)
class Delta:
    kind: str  # 'thinking' or 'text'
    text: str


@dataclass
class GenerationResult:
    text: str  # the answer (concatenation of the 'text' deltas)
    thinking: str  # the reasoning (concatenation of the 'thinking' deltas)
    raw_text: str  # everything decoded, tags included (= tokenizer.decode(token_ids))
    token_ids: list  # generated ids, without the stop token
    stop_reason: str  # 'stop', 'length', 'abort' or 'context_full'
    stop_token: int = None
    message: str = ""  # for 'context_full': what happened, for the user
    stats: GenerationStats = field(default_factory=GenerationStats)

    @property
    def aborted(self) -> bool:
        return self.stop_reason == ABORT

    def as_message(self) -> dict:
        """The assistant message to append to the conversation for the next turn."""
        return {"role": "assistant", "content": self.text, "reasoning_content": self.thinking}


class Generator:
    def __init__(self, backend, tokenizer, arch: str, prefill_chunk: int = 512, clock=time.perf_counter):
        check_backend(backend)
        if prefill_chunk < 1:
            raise ValueError(f"prefill_chunk must be >= 1, got {prefill_chunk}")
        self.backend = backend
        self.tokenizer = tokenizer
        self.arch = arch
        self.prefill_chunk = prefill_chunk
        self._clock = clock
        self._cached = []  # the token ids the backend's state holds, in order
        self._busy = False
        # a backend with recurrent state may keep copies of it at turn boundaries (prefix.py says where)
        self._checkpoints = getattr(backend, "state_checkpoints", 0) > 0 and not backend.supports_truncate
        vocab = getattr(tokenizer, "token_to_id", None) or {}
        self._turn_id = vocab.get(turn_opener(arch)) if self._checkpoints else None

    @property
    def cached_ids(self) -> list:
        return list(self._cached)

    def reset(self):
        """Forget the conversation state (the next prompt is prefilled in full)."""
        self.backend.reset()
        self._cached = []

    # --- entry points -------------------------------------------------------------------------------------------
    async def generate(self, messages, *, thinking: bool = False, **options) -> GenerationResult:
        """Answer the chat `messages` (see generate_ids for the options)."""
        prompt = render_chat(messages, self.arch, thinking)
        ids = self.tokenizer.encode(prompt, parse_special=True)
        in_thinking = prompt_opens_thinking(prompt, thinking_tags(self.arch))
        return await self.generate_ids(ids, in_thinking=in_thinking, **options)

    async def complete(self, prompt_text: str, **options) -> GenerationResult:
        """Continue a raw prompt (special tokens in it are parsed)."""
        ids = self.tokenizer.encode(prompt_text, parse_special=True)
        in_thinking = prompt_opens_thinking(prompt_text, thinking_tags(self.arch))
        return await self.generate_ids(ids, in_thinking=in_thinking, **options)

    def stream(self, messages, *, thinking: bool = False, **options) -> GenerationStream:
        """generate() as an async iterator of Delta; the result is on the iterator's .result afterwards."""
        return GenerationStream(lambda put: self.generate(messages, thinking=thinking, on_delta=put, **options))

    async def generate_ids(self, prompt_ids, *, max_tokens=None, sampling: SamplingParams = None, stop_ids=None,
                           on_delta=None, abort=None, in_thinking: bool = False) -> GenerationResult:
        """Generate after `prompt_ids`.

        max_tokens: answer tokens at most (None: until a stop token or the context is full). sampling: a
        SamplingParams (default: llama.cpp's defaults with a fresh seed). stop_ids: ids that end the answer
        (default: the tokenizer's eos, <|im_end|>, <|endoftext|>). on_delta(Delta): called per shown piece; may be
        async. abort: see abort.py. in_thinking: the prompt ends inside '<think>'."""
        if self._busy:
            raise GeneratorBusyError("a generation is already running on this model; abort it or wait for it")
        prompt = self._check_prompt(prompt_ids)
        if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                                       or max_tokens < 1):
            raise ValueError(f"max_tokens must be a positive integer or None, got {max_tokens!r}")
        sampler = Sampler(sampling if sampling is not None else SamplingParams())
        stops = frozenset(self.tokenizer.stop_ids if stop_ids is None else (int(i) for i in stop_ids))
        aborted = abort_checker(abort)
        self._busy = True
        try:
            return await self._run(prompt, max_tokens, sampler, stops, on_delta, aborted, in_thinking)
        except BaseException:
            # an error (or cancellation) inside the backend leaves its state unknown: start clean next time
            self._cached = []
            try:
                self.backend.reset()
            except Exception:
                pass
            raise
        finally:
            self._busy = False

    # --- the turn -----------------------------------------------------------------------------------------------
    def _check_prompt(self, prompt_ids) -> list:
        ids = [int(i) for i in prompt_ids]
        if not ids:
            raise ValueError("the prompt is empty: nothing to generate from")
        vocab = self.backend.vocab_size
        bad = [i for i in ids if not 0 <= i < vocab]
        if bad:
            raise ValueError(f"prompt token ids outside the vocabulary 0..{vocab - 1}: {bad[:5]}")
        n_ctx = self.backend.n_ctx
        if len(ids) >= n_ctx:
            raise ContextFullError(len(ids), n_ctx, "the prompt leaves no room for an answer; start a new "
                                                    "conversation or shorten it")
        return ids

    async def _run(self, prompt, max_tokens, sampler, stops, on_delta, aborted, in_thinking):
        backend = self.backend
        t0 = self._clock()
        stats = GenerationStats(prompt_tokens=len(prompt), seed=sampler.seed)
        splitter = ThinkingSplitter(in_thinking, thinking_tags(self.arch))
        out = _Output(splitter, StreamDecoder(self.tokenizer), on_delta)

        k = sampler.candidates_needed(backend.max_candidates)
        hint = getattr(backend, "expect_candidates", None)  # optional: a GPU backend then reads back only what k needs
        if hint is not None:
            hint(k)
        try:
            return await self._generate(prompt, max_tokens, sampler, stops, aborted, k, stats, out, t0)
        finally:
            if hint is not None:
                hint(None)

    async def _generate(self, prompt, max_tokens, sampler, stops, aborted, k, stats, out, t0):
        backend, clock = self.backend, self._clock
        t_prefill = await self._prefill_prompt(prompt, stats, aborted)
        generated, history = [], list(prompt)
        complete = k >= backend.vocab_size
        reason, stop_token, message = None, None, ""
        t_first = t_last = None
        # optional backend methods: a decoded token fed apart from prompt parts (a GPU backend may queue the next
        # greedy step behind it), and the end of a generation (the token picked last, not fed)
        decode_step = getattr(backend, "decode_step", None) or (lambda t, pos: backend.prefill([t], pos))
        settle = getattr(backend, "settle", None)
        unfed = None
        while reason is None:
            if aborted():
                reason = ABORT
                break
            ids, logits = await backend.next_candidates(k)
            token = unfed = sampler.pick(ids, logits, history, complete)
            t_last = clock()
            if t_first is None:
                t_first = t_last
                stats.prefill_seconds = t_last - t_prefill  # the first token's logits end the prefill
                stats.first_token_seconds = t_last - t0
            if token in stops:
                reason, stop_token = STOP, token
                break
            generated.append(token)
            history.append(token)
            await out.token(token)
            if max_tokens is not None and len(generated) >= max_tokens:
                reason = LENGTH
            elif aborted():
                reason = ABORT
            elif len(self._cached) >= backend.n_ctx:
                reason = CONTEXT_FULL
                message = str(ContextFullError(len(self._cached), backend.n_ctx,
                                               "the answer was cut here; start a new conversation to go on"))
            else:
                await decode_step(token, len(self._cached))
                self._cached.append(token)
                unfed = None
                stats.decode_steps += 1
        if settle is not None and await settle(unfed):
            self._cached.append(unfed)  # the backend had already fed it (a greedy step queued ahead)
        if t_first is None:  # aborted before the first token
            stats.prefill_seconds = clock() - t_prefill
        await out.finish()
        stats.generated_tokens = len(generated)
        stats.decode_seconds = (t_last - t_first) if t_first is not None else 0.0
        stats.total_seconds = clock() - t0
        return GenerationResult(out.text, out.thinking, self.tokenizer.decode(generated), generated, reason,
                                stop_token, message, stats)

    async def _prefill_prompt(self, prompt, stats, aborted):
        backend = self.backend
        # a greedy step queued past the end of the last answer and not taken (settle) left one token more in a
        # recurrent state: a checkpoint at or before the cached tokens still holds
        step_past = self._checkpoints and backend.n_cached == len(self._cached) + 1
        if backend.n_cached != len(self._cached) and not step_past:  # someone else used the backend: trust nothing
            self._cached = []
            backend.reset()
        keep, reset = plan_reuse(self._cached, prompt, backend.supports_truncate)
        if (reset or step_past) and self._checkpoints:
            # the longest kept state at or before the shared prefix (0: none, the backend has reset)
            keep = backend.restore_checkpoint(reuse_limit(self._cached, prompt))
            reset = keep == 0
            stats.restored_checkpoint = keep
            del self._cached[keep:]
        elif reset:
            backend.reset()
            self._cached = []
        elif keep < len(self._cached):
            backend.truncate(keep)
            del self._cached[keep:]
        stats.cache_reset = reset
        stats.reused_tokens = keep
        t_start = self._clock()
        # parts of at most prefill_chunk tokens, also cut where a checkpoint is kept
        marks = checkpoint_positions(prompt, self._turn_id, keep)
        cuts = sorted(set(range(keep, len(prompt), self.prefill_chunk)) | set(marks)) + [len(prompt)]
        for start, end in zip(cuts, cuts[1:]):
            if aborted():
                break
            part = prompt[start:end]
            if end in marks:  # no logits needed here (prefill_checkpoint, optional, skips them)
                keep_at = getattr(backend, "prefill_checkpoint", None)
                if keep_at is not None:
                    await keep_at(part, len(self._cached))
                else:
                    await backend.prefill(part, len(self._cached))
                    backend.save_checkpoint()
            else:
                await backend.prefill(part, len(self._cached))
            self._cached.extend(part)
            stats.prefilled_tokens += len(part)
        return t_start


class _Output:
    """Token ids -> UTF-8-complete text -> thinking/text pieces -> on_delta, and the running totals."""

    def __init__(self, splitter, decoder, on_delta):
        self.splitter, self.decoder, self.on_delta = splitter, decoder, on_delta
        self._parts = {"text": [], THINKING: []}

    @property
    def text(self):
        return "".join(self._parts["text"])

    @property
    def thinking(self):
        return "".join(self._parts[THINKING])

    async def token(self, token_id):
        chunk = self.decoder.feed(token_id)
        if chunk:
            await self._send(self.splitter.feed(chunk))

    async def finish(self):
        tail = self.decoder.flush()
        pieces = self.splitter.feed(tail) if tail else []
        await self._send(pieces + self.splitter.flush())

    async def _send(self, pieces):
        for kind, text in pieces:
            self._parts[kind].append(text)
            if self.on_delta is not None:
                ret = self.on_delta(Delta(kind, text))
                if inspect.isawaitable(ret):
                    await ret
