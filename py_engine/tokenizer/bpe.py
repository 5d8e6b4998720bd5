"""Byte-level BPE over one pre-tokenized word, with llama.cpp's merge order (llm_tokenizer_bpe_session).

A word is its UTF-8 bytes written in the byte-level alphabet (byte_map), one symbol per byte to start. Adjacent
symbol pairs that appear in the merge list are queued by (rank, left position); the best pair is merged, its
neighbours re-queued, and stale queue entries (a side already merged away) skipped, until no queued pair is left.
Each final symbol is a vocabulary token; one that is not (possible only with odd merge lists) falls back to the
tokens of its single ASCII bytes, dropping the rest, as llama.cpp does.

Results are cached per word: English text repeats its words, so the merge loop runs once per distinct word.
"""
from heapq import heapify, heappop, heappush

from .byte_map import text_to_symbols


class BytePairEncoder:
    def __init__(self, token_to_id: dict, merges, cache_limit: int = 1 << 16):
        self.token_to_id = token_to_id
        self.ranks = {}
        for rank, merge in enumerate(merges):
            # llama.cpp splits at the first space after position 0; the first rank of a repeated pair wins
            cut = merge.find(" ", 1)
            pair = (merge[:cut], merge[cut + 1:]) if cut >= 0 else ("", "")
            self.ranks.setdefault(pair, rank)
        self.cache = {}
        self.cache_limit = cache_limit

    def encode_word(self, word: str) -> list:
        """Token ids of one pre-tokenized word (the returned list is shared with the cache: do not modify it)."""
        ids = self.cache.get(word)
        if ids is None:
            ids = self._encode_uncached(word)
            if len(self.cache) >= self.cache_limit:
                self.cache.clear()
            self.cache[word] = ids
        return ids

    def _encode_uncached(self, word: str) -> list:
        return self._ids(self._merge(text_to_symbols(word)))

    def _merge(self, word: str) -> list:
        sym = list(word)
        n = len(sym)
        if n < 2:
            return sym
        ranks = self.ranks
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        prv = list(range(-1, n - 1))
        queue = []
        for i in range(n - 1):
            rank = ranks.get((sym[i], sym[i + 1]))
            if rank is not None:
                queue.append((rank, i, i + 1, sym[i] + sym[i + 1]))
        heapify(queue)
        while queue:
            _, left, right, text = heappop(queue)
            a, b = sym[left], sym[right]
            if not a or not b or a + b != text:
                continue  # outdated: one side was merged into something else
            sym[left] = text
            sym[right] = ""
            after = nxt[right]
            nxt[left] = after
            if after >= 0:
                prv[after] = left
            before = prv[left]
            if before >= 0:
                rank = ranks.get((sym[before], text))
                if rank is not None:
                    heappush(queue, (rank, before, left, sym[before] + text))
            if after >= 0:
                rank = ranks.get((text, sym[after]))
                if rank is not None:
                    heappush(queue, (rank, left, after, text + sym[after]))
        return [s for s in sym if s]

    def _ids(self, pieces: list) -> list:
        token_to_id = self.token_to_id
        ids = []
        for piece in pieces:
            tid = token_to_id.get(piece)
            if tid is not None:
                ids.append(tid)
                continue
            for byte in piece.encode("utf-8"):
                if byte < 0x80:
                    tid = token_to_id.get(chr(byte))
                    if tid is not None:
                        ids.append(tid)
        return ids
