"""One ingest per store folder at a time: an exclusive, non-blocking lock on the folder itself.

The lock is flock(2) on the directory's descriptor, so no lock file joins the store's files, and it goes away with
the process however it ends (a killed ingest never leaves a stale lock behind).
"""
import fcntl
import os
from contextlib import contextmanager
from pathlib import Path


class FolderBusy(Exception):
    """Another process holds the folder's lock."""


@contextmanager
def folder_lock(folder: Path, doing: str):
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FolderBusy(f"another process is {doing} {folder}; wait for it to finish (or stop it) and run this "
                             "again") from None
        yield
    finally:
        os.close(fd)
