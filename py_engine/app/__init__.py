"""The chat app's engine side, inside the worker: one Session (model, tokenizer, generator) and the typed requests
the page sends (`models`, `load`, `generate`, `stop`, `stats`, `reset`, `remove`), registered into
py_engine.boot.REQUESTS. docs/chat.md describes the messages.
"""
