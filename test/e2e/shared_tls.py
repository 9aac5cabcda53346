"""A TLS socket that one thread may send on while another receives.

OpenSSL allows one call on a connection at a time, and CPython does not
serialize an SSLSocket's calls (python/cpython#85763: recv in one thread and
sendall in another run SSL_read and SSL_write on one SSL object at once).
The tests' raw clients (harness.open_socket) and the stomp.py clients (a
receiver thread and the caller's sends) both do that, so both go through
SharedTLS: each call runs non-blocking under a lock, and the wait for the
socket is outside it."""

import select
import socket
import ssl
import threading
import time


class SharedTLS:
    """Wraps an SSLSocket; timeout (seconds, None for none) as a socket's:
    a call that cannot finish in it raises socket.timeout.  Anything not
    defined here goes to the SSLSocket."""

    def __init__(self, sock, timeout):
        self._sock = sock
        self._lock = threading.Lock()
        self._timeout = timeout
        sock.setblocking(False)

    def settimeout(self, timeout):
        self._timeout = timeout

    def gettimeout(self):
        return self._timeout

    def _io(self, call, *args):
        deadline = None if self._timeout is None else time.time() + self._timeout
        while True:
            with self._lock:
                try:
                    return call(*args)
                except ssl.SSLWantReadError:
                    if self._timeout == 0:
                        raise
                    want_write = False
                except ssl.SSLWantWriteError:
                    if self._timeout == 0:
                        raise
                    want_write = True
            wait = 0.05  # short: the other thread may have moved the connection on
            if deadline is not None:
                left = deadline - time.time()
                if left <= 0:
                    raise socket.timeout("timed out")
                wait = min(wait, left)
            select.select([self._sock], [self._sock] if want_write else [], [], wait)

    def recv(self, n):
        return self._io(self._sock.recv, n)

    def send(self, data):
        return self._io(self._sock.send, data)

    def sendall(self, data):
        view = memoryview(data)
        while view:
            view = view[self.send(view):]

    def unwrap(self):
        """The TLS shutdown (close_notify both ways); the plain socket."""
        return self._io(self._sock.unwrap)

    def __getattr__(self, name):
        return getattr(self._sock, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._sock.close()


def share_stomp_py_tls(conn):
    """Make stomp.py connection conn's socket a SharedTLS as soon as its
    transport has opened it (before the receiver thread starts), when it is
    TLS: stomp.py 8 sends under its own lock but receives without it."""
    transport = conn.transport
    attempt = transport.attempt_connection

    def attempt_connection():
        attempt()
        if isinstance(transport.socket, ssl.SSLSocket):
            transport.socket = SharedTLS(transport.socket, transport.socket.gettimeout())

    transport.attempt_connection = attempt_connection
    return conn
