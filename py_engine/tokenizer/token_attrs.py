"""Token attributes as llama.cpp derives them from the GGUF token types and, for some texts, from the text itself.

GGUF `tokenizer.ggml.token_type`: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte (0 undefined).
They become llama.cpp's attribute bits (llama.h LLAMA_TOKEN_ATTR_*). After that llama.cpp's vocabulary loader
(llama_vocab::impl::load) marks tokens *by their text* as control: end-of-turn / fill-in-the-middle / end-of-
generation markers. That is why Qwen3's plain BPE token "</s>" (id 128247) is matched as one special token when
special parsing is on. The end-of-generation list also becomes the EOG set.

Deviation: llama.cpp promotes only the first token found (in hash-map order) per end-of-turn / FIM kind when the
GGUF does not name that id; here every listed text is promoted. Both agree whenever a vocabulary holds at most one
candidate per kind, as Qwen's do.
"""
UNDEFINED, UNKNOWN, UNUSED, NORMAL, CONTROL, USER_DEFINED, BYTE = 0, 1, 2, 4, 8, 16, 32

TYPE_TO_ATTR = {0: UNDEFINED, 1: NORMAL, 2: UNKNOWN, 3: CONTROL, 4: USER_DEFINED, 5: UNUSED, 6: BYTE}

# texts llama.cpp treats as control when present (end-of-turn, end-of-message, FIM prefix/suffix/middle/pad/repo/sep)
CONTROL_BY_TEXT = frozenset([
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>", "<|eom_id|>",
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>",
    "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>",
    "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>",
    "<|middle|>",
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
    "<|file_sep|>",
])

# end-of-generation texts (also made control)
EOG_BY_TEXT = frozenset([
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
])
FIM_EOG_TEXTS = ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>",
                 "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>")

# gpt-oss: always rendered, matched like user-defined tokens
USER_DEFINED_BY_TEXT = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")


def derive_attrs(tokens: list, token_types, token_to_id: dict, named_ids) -> tuple:
    """(attrs per id, end-of-generation id set). `named_ids`: eos/eot/eom ids named by the GGUF (None if absent)."""
    n = len(tokens)
    if token_types is None:
        attrs = [NORMAL] * n
    else:
        if len(token_types) < n:
            raise ValueError(f"tokenizer.ggml.token_type has {len(token_types)} entries for {n} tokens")
        attrs = [TYPE_TO_ATTR.get(int(t), UNDEFINED) for t in token_types[:n]]

    for text in CONTROL_BY_TEXT:
        tid = token_to_id.get(text)
        if tid is not None:
            attrs[tid] |= CONTROL

    eog = set()
    for text in FIM_EOG_TEXTS:
        tid = token_to_id.get(text)
        if tid is not None:
            eog.add(tid)
    for text in EOG_BY_TEXT:
        tid = token_to_id.get(text)
        if tid is not None:
            eog.add(tid)
            attrs[tid] |= CONTROL
    for text in USER_DEFINED_BY_TEXT:
        tid = token_to_id.get(text)
        if tid is not None:
            attrs[tid] = USER_DEFINED
    eog.update(i for i in named_ids if i is not None)

    texts = {tokens[i]: i for i in eog}
    # o200k_harmony / solar-open: "<|end|>" ends a message, not the generation
    if "<|end|>" in texts and ("<|call|>" in texts or "<|calls|>" in texts) and (
            "<|return|>" in texts or "<|flush|>" in texts):
        end_id = texts["<|end|>"]
        eog.discard(end_id)
        attrs[end_id] = USER_DEFINED
    # gemma4 / plamo: their "</s>" is an ordinary token
    if "</s>" in texts and ("<|tool_response>" in texts or "<|plamo:eos|>" in texts):
        eog.discard(texts["</s>"])
        attrs[texts["</s>"]] = NORMAL
    return attrs, eog
