"""What keeps the host answering under abuse: a deadline for request headers, a cap on open connections, and an
allow-list of Host names (so a page on another origin cannot reach it through DNS rebinding).

uvicorn (0.55, h11) closes a keep-alive connection that stays silent for `timeout_keep_alive` seconds after a
response, but nothing closes a connection that never sends a request, or sends its headers a byte at a time
(slowloris): every data_received cancels the keep-alive timer. `GuardedH11Protocol` adds the missing deadline and
refuses connections past a cap, so a few hundred idle sockets can no longer use up the process's file handles.
"""
import ipaddress
import logging
import resource

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0  # from connect (or the end of the previous response) to a complete request head
MAX_CONNECTIONS = 128    # a browser opens 6 per origin; the reader workers and a test runner a few more
KEEP_ALIVE_S = 5
LOOPBACK_NAMES = ("localhost",)

log = logging.getLogger("diskformer.host")


class GuardedH11Protocol(H11Protocol):
    header_timeout = HEADER_TIMEOUT_S
    max_connections = MAX_CONNECTIONS

    def connection_made(self, transport):
        super().connection_made(transport)
        self._header_deadline = None
        if len(self.connections) > self.max_connections:
            log.warning("more than %d open connections: refusing a new one", self.max_connections)
            transport.close()
            return
        self._arm_header_deadline()

    def _arm_header_deadline(self):
        self._cancel_header_deadline()
        self._header_deadline = self.loop.call_later(self.header_timeout, self._header_deadline_passed)

    def _cancel_header_deadline(self):
        if getattr(self, "_header_deadline", None) is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _header_deadline_passed(self):
        self._header_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()  # no complete request head in time: idle or trickling

    def data_received(self, data: bytes):
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._cancel_header_deadline()  # the request head is complete

    def on_response_complete(self):
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_header_deadline()  # the next request's head must also arrive in time

    def connection_lost(self, exc):
        self._cancel_header_deadline()
        super().connection_lost(exc)


def raise_file_limit():
    """Lift the soft open-file limit to the hard one: a model host streams many files to many connections."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 65536, hard))
        except (ValueError, OSError):
            pass  # keep the soft limit: the connection cap still holds


def host_name(header: str) -> str:
    """The name part of a Host header: 'localhost:8765' -> 'localhost', '[::1]:80' -> '::1'."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def host_allowed(header, allowed_names) -> bool:
    """Whether a request's Host may be answered: any IP literal (a rebinding attack needs a domain name the attacker
    controls, so an address cannot be one), localhost and *.localhost, and the names the host was given."""
    if header is None:
        return True  # HTTP/1.0 without Host: no browser sends that, so no page can be behind it
    name = host_name(header).rstrip(".")
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    return name in LOOPBACK_NAMES or name.endswith(".localhost") or name in allowed_names
