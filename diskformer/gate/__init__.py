"""The llama.cpp gate: the chat page, run headless, must reply what llama.cpp replies greedily (docs/gate.md)."""
