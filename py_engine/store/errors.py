"""Errors of the store. Backends (OPFS, files, memory) raise `QuotaExceeded`; the ingest engine turns it into a
`StoreQuotaError` whose message says how much space the model needs and how far the download got."""


class StoreError(Exception):
    """Base of every store failure; the message is meant for the user."""


class QuotaExceeded(StoreError):
    """Raised by a storage backend when the browser (or disk) refuses to grow a file."""


class StoreQuotaError(StoreError):
    """The model does not fit in the storage quota; the store stays resumable from its last checkpoint."""


class StoreIntegrityError(StoreError):
    """The bytes stored or downloaded do not match their recorded or pinned checksums."""


class IngestAborted(StoreError):
    """The ingest was stopped on request; it resumes from the checkpoint written at the stop."""


class SourceChanged(StoreError):
    """The source no longer matches the file the store was started from (size, ETag or header)."""
