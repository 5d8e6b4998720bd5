"""Gemma 4 prompts, as Gemma 4's chat template renders them.

    <bos>                                              always first (the template writes it)
    <|turn>system\\n[<|think|>\\n]{system}<turn|>\\n     when thinking is on or a system message comes first
    <|turn>{role}\\n{content}<turn|>\\n                   per message; 'assistant' is written 'model'
    <|turn>model\\n                                     generation prompt, then
        thinking off:  <|channel>thought\\n<channel|>    (an empty thought channel: the model answers at once)
        thinking on:   nothing                         (the model opens <|channel>thought\\n ... <channel|> itself)

Contents are trimmed of surrounding whitespace. A model turn's reasoning (anything up to its last '<channel|>')
is not rendered again, so old thoughts do not fill the context. Generation stops at '<turn|>' (or '<eos>').

Checked against llama.cpp's /apply-template of [user "Hello"] on the fixture models (refs' apply_template_hello),
which prints the same text without the leading '<bos>': llama.cpp adds BOS when it tokenizes, this engine
parses the '<bos>' text as the BOS token.
"""
BOS = "<bos>"
CHANNEL_CLOSE = "<channel|>"


def _answer(content: str) -> str:
    """A model message without its thought channel."""
    if CHANNEL_CLOSE in content:
        content = content.rsplit(CHANNEL_CLOSE, 1)[1]
    return content


def render_gemma4(messages, thinking: bool, add_generation_prompt: bool = True) -> str:
    """Prompt text for `messages` (dicts with 'role' and 'content')."""
    out = [BOS]
    rest = list(messages)
    has_system = bool(rest) and rest[0].get("role") in ("system", "developer")
    if thinking or has_system:
        out.append("<|turn>system\n")
        if thinking:
            out.append("<|think|>\n")
        if has_system:
            out.append((rest.pop(0).get("content") or "").strip())
        out.append("<turn|>\n")
    for i, message in enumerate(rest):
        role = message.get("role")
        content = message.get("content") or ""
        if role == "assistant":
            role, content = "model", _answer(content)
        elif role not in ("system", "developer", "user", "tool"):
            raise ValueError(f"message {i}: unknown role {role!r} (system, user, assistant or tool)")
        out.append(f"<|turn>{role}\n{content.strip()}<turn|>\n")
    if add_generation_prompt:
        out.append("<|turn>model\n")
        if not thinking:
            out.append("<|channel>thought\n<channel|>")
    return "".join(out)
