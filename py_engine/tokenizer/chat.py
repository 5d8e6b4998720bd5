"""ChatML prompts for Qwen3 (qwen3moe) and Qwen3.5/3.6 (qwen35moe), as their own chat templates render them
(Gemma 4's turns are in chat_gemma4.py; render_chat picks by architecture).

    <|im_start|>{role}\\n{content}<|im_end|>\\n     per message
    <|im_start|>assistant\\n                        generation prompt, then
        thinking off:              <think>\\n\\n</think>\\n\\n   (Qwen3's enable_thinking=false)
        thinking on, qwen35moe:    <think>\\n                 (Qwen3.5 opens the reasoning block itself)
        thinking on, qwen3moe:     nothing                  (the model opens it)

No BOS is added; generation stops at eos, <|im_end|> or <|endoftext|> (Tokenizer.stop_ids).

Like Qwen3's template, assistant turns before the last user query lose their reasoning: only the text after
'</think>' is kept, so old thoughts do not fill the context. Assistant turns after the last user query (a
continued answer) keep it as <think>\\n...\\n</think>\\n\\n. Tool results (role "tool") are wrapped in
<tool_response> inside a user turn, as Qwen3 does; tool *definitions* are not rendered (no tools block).

Checked against llama.cpp's /apply-template of [user "Hello"] on the fixture models (refs' apply_template_hello):
equal to render_chat(..., "qwen3moe", thinking=True). The qwen35moe fixture files carry Qwen3's template, so
llama.cpp renders no '<think>\\n' for them; this module follows Qwen3.5's own template there.
"""
from .chat_gemma4 import render_gemma4

ARCHS = ("qwen3moe", "qwen35moe", "gemma4")
# the special token that opens every turn (message) of a rendered conversation, per architecture
TURN_OPENERS = {"qwen3moe": "<|im_start|>", "qwen35moe": "<|im_start|>", "gemma4": "<|turn>"}


def turn_opener(arch: str):
    """The text of the special token that opens each turn in `arch`'s template (None: unknown architecture)."""
    return TURN_OPENERS.get(arch)


def _split_reasoning(content: str):
    """(reasoning, answer) of an assistant message written as '<think>...</think>answer'."""
    if "</think>" not in content:
        return "", content
    before, _, _ = content.partition("</think>")
    reasoning = before.rstrip("\n").split("<think>")[-1].lstrip("\n")
    answer = content.split("</think>")[-1].lstrip("\n")
    return reasoning, answer


def _is_tool_result(message) -> bool:
    content = message.get("content") or ""
    return content.startswith("<tool_response>") and content.endswith("</tool_response>")


def render_chat(messages, arch: str, thinking: bool, add_generation_prompt: bool = True) -> str:
    """Prompt text for `messages` (dicts with 'role' and 'content'; assistant may carry 'reasoning_content')."""
    if arch not in ARCHS:
        raise ValueError(f"no chat template for architecture {arch!r} (known: {', '.join(ARCHS)})")
    if arch == "gemma4":
        return render_gemma4(messages, thinking, add_generation_prompt)
    last_query = len(messages) - 1
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user" and not _is_tool_result(messages[i]):
            last_query = i
            break
    out = []
    for i, message in enumerate(messages):
        role = message.get("role")
        content = message.get("content") or ""
        if role in ("system", "user"):
            out.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
        elif role == "assistant":
            reasoning = message.get("reasoning_content")
            if reasoning is None:
                reasoning, content = _split_reasoning(content)
            if i > last_query and (i == len(messages) - 1 or reasoning):
                reasoning = reasoning.strip("\n")
                out.append(f"<|im_start|>assistant\n<think>\n{reasoning}\n</think>\n\n{content.lstrip(chr(10))}")
            else:
                out.append(f"<|im_start|>assistant\n{content}")
            out.append("<|im_end|>\n")
        elif role == "tool":
            if i == 0 or messages[i - 1].get("role") != "tool":
                out.append("<|im_start|>user")
            out.append(f"\n<tool_response>\n{content}\n</tool_response>")
            if i == len(messages) - 1 or messages[i + 1].get("role") != "tool":
                out.append("<|im_end|>\n")
        else:
            raise ValueError(f"message {i}: unknown role {role!r} (system, user, assistant or tool)")
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
        if not thinking:
            out.append("<think>\n\n</think>\n\n")
        elif arch == "qwen35moe":
            out.append("<think>\n")
    return "".join(out)
