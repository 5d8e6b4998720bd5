"""diskformer host side: the command line, the Starlette host, the numpy reference model and tools (CPython only)."""
