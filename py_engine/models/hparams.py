"""Reading an architecture's hyper-parameters from its GGUF header (the `{arch}.*` keys). Pure Python: the
numpy reference (diskformer/reference) reads its config through the same classes."""


def arch_value(header, suffix: str, default=None, kind=int):
    """metadata[f"{arch}.{suffix}"] converted by `kind`; `default` when absent (None: required)."""
    key = f"{header.architecture}.{suffix}"
    if key in header.metadata:
        return kind(header.metadata[key])
    if default is None:
        raise ValueError(f"the GGUF has no {key!r} key")
    return default


def check_architecture(header, arch: str) -> None:
    if header.architecture != arch:
        raise ValueError(f"not a {arch} model: general.architecture = {header.architecture!r}")
