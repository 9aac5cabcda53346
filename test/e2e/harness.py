"""Shared pieces of eft's end-to-end tests: start a real eftd on a free
loopback port, open every connection to it (open_socket), parse STOMP
frames out of bytes (parse_frames), and a raw STOMP client that sends exact
bytes and reads frames back (RawClient).  Every test that reads frames goes
through parse_frames, and every socket a test opens to eftd itself comes
from open_socket (the client libraries and programs the tests run open
their own).  Every wait is bounded; every process started is stopped."""

import collections
import errno
import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", "build")
EFTD = os.environ.get("EFTD", os.path.join(ROOT, BUILD, "eftd"))
# e.g. "valgrind --error-exitcode=99 -q" (make valgrind)
WRAPPER = os.environ.get("EFTD_WRAPPER", "").split()
SLOW = 10 if WRAPPER else 1  # valgrind runs everything ~10x slower


def wait_for(pred, timeout, what):
    """Poll pred until it is true, for at most timeout seconds (x SLOW)."""
    deadline = time.time() + timeout * SLOW
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_socket(port, host="127.0.0.1", timeout=5, sockopts=()):
    """A TCP connection to eftd at host:port: the one place every test opens
    one.  timeout is in seconds, as given (callers scale it by SLOW); 0 starts
    a non-blocking connect and returns at once.  sockopts are (level, option,
    value) triples set before connecting (SO_RCVBUF must be, or the kernel
    tunes the buffer itself); anything else a test does to the socket it
    does to what this returns."""
    error = None
    for family, kind, proto, _, addr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        s = socket.socket(family, kind, proto)
        try:
            for level, option, value in sockopts:
                s.setsockopt(level, option, value)
            s.settimeout(timeout)
            if timeout == 0:
                err = s.connect_ex(addr)
                if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                    raise OSError(err, os.strerror(err))
            else:
                s.connect(addr)
            return s
        except OSError as e:
            s.close()
            error = e
    raise error


class Broker:
    """An eftd process.  Use as a context manager, or start()/stop()."""

    def __init__(self, config=None, args=(), bind="127.0.0.1"):
        self.port = free_port()
        self.bind = bind
        self.config_text = config
        self.args = list(args)
        self.proc = None
        self.log_path = None
        self.config_path = None

    def start(self):
        fd, self.log_path = tempfile.mkstemp(prefix="eftd-", suffix=".log")
        os.close(fd)
        cmd = WRAPPER + [EFTD, "-b", self.bind, "-p", str(self.port)] + self.args
        if self.config_text is not None:
            fd, self.config_path = tempfile.mkstemp(prefix="eftd-", suffix=".conf")
            with os.fdopen(fd, "w") as f:
                f.write(self.config_text)
            cmd += ["-c", self.config_path]
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        deadline = time.time() + 10 * SLOW
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("eftd exited early:\n" + self.read_log())
            try:
                with open_socket(self.port, self.bind, timeout=1):
                    return self
            except OSError:
                time.sleep(0.02)
        self.kill()
        raise RuntimeError("eftd did not start listening:\n" + self.read_log())

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=10):
        """SIGTERM, wait; returns the exit code (kills and returns None on timeout)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout * SLOW)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = None
        self.cleanup()
        return rc

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.cleanup()

    def cleanup(self):
        if getattr(self, "log", None):
            self.log.close()
            self.log = None
        for p in (self.config_path,):
            if p and os.path.exists(p):
                os.unlink(p)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        rc = self.stop()
        if exc[0] is None and rc != 0:
            raise AssertionError("eftd exit code %r; log:\n%s" % (rc, self.read_log()))
        if self.log_path and os.path.exists(self.log_path):
            os.unlink(self.log_path)


class Frame:
    def __init__(self, command, headers, body):
        self.command = command
        self.headers = headers      # list of (name, value), in order, raw (escaped) text;
                                    # value None for a line without a colon
        self.body = body            # bytes

    def get(self, name, default=None):
        for k, v in self.headers:
            if k == name:
                return v
        return default

    def __getitem__(self, name):
        v = self.get(name)
        if v is None:
            raise KeyError("%s frame has no %r header: %r" % (self.command, name, self.headers))
        return v

    def __repr__(self):
        return "Frame(%r, %r, %r)" % (self.command, self.headers, self.body[:80])


def frame(command, headers=(), body=b""):
    """Encode a frame; headers is a list of (name, value) or a dict, used as given."""
    if isinstance(headers, dict):
        headers = list(headers.items())
    out = command.encode() + b"\n"
    for k, v in headers:
        out += (k.encode() if isinstance(k, str) else k) + b":" + \
               (v.encode() if isinstance(v, str) else v) + b"\n"
    if isinstance(body, str):
        body = body.encode()
    return out + b"\n" + body + b"\0"


def _eols(buf, pos):
    """Where the run of EOLs (LF or CRLF) at pos ends, and how many it holds."""
    n = 0
    while True:
        if buf.startswith(b"\n", pos):
            pos += 1
        elif buf.startswith(b"\r\n", pos):
            pos += 2
        else:
            return pos, n
        n += 1


def _parse_frame(buf, pos):
    """The frame starting at pos: (Frame, where the next one starts), or None
    if it is not complete yet."""
    lf = buf.find(b"\n\n", pos)
    crlf = buf.find(b"\n\r\n", pos, len(buf) if lf < 0 else lf + 2)
    if crlf >= 0:
        head_end, start = crlf, crlf + 3
    elif lf >= 0:
        head_end, start = lf, lf + 2
    else:
        return None
    lines = [line[:-1] if line.endswith(b"\r") else line
             for line in bytes(buf[pos:head_end]).split(b"\n")]
    headers, length = [], None
    for line in lines[1:]:
        name, colon, value = line.decode("utf-8", "replace").partition(":")
        headers.append((name, value if colon else None))
        if name == "content-length" and colon and length is None:
            length = int(value)
    if length is not None:
        if len(buf) < start + length + 1:
            return None
        if buf[start + length] != 0:
            raise AssertionError("no NUL after content-length body: %r"
                                 % bytes(buf[pos:start + length + 1])[:200])
        stop = start + length
    else:
        stop = buf.find(b"\0", start)
        if stop < 0:
            return None
    command = lines[0].decode("utf-8", "replace")
    return Frame(command, headers, bytes(buf[start:stop])), stop + 1


def parse_frames(buf):
    """The complete frames at the start of buf (bytes or bytearray).  Returns
    (frames, rest, eols): rest is what follows the last complete frame (the
    start of an incomplete one, or b""); eols counts the heart-beat EOLs
    (LF or CRLF) before, between and after the frames, which are consumed.

    Header lines may end in LF or CRLF.  The body is content-length bytes
    and a NUL when that header is there (the first one counts), else
    everything up to the first NUL.  Header text is kept as sent (escapes
    are not undone).  A malformed frame (content-length not a number, no
    NUL after the body it gives) raises, once the frames before it have
    been returned."""
    frames, eols, pos = [], 0, 0
    while True:
        pos, n = _eols(buf, pos)
        eols += n
        try:
            parsed = _parse_frame(buf, pos)
        except (AssertionError, ValueError):
            if frames:
                break
            raise
        if parsed is None:
            break
        f, pos = parsed
        frames.append(f)
    return frames, bytes(buf[pos:]), eols


def expect_receipt(c, rid, timeout=None):
    """The next frame is the RECEIPT for rid."""
    f = c.expect("RECEIPT", timeout)
    if f.get("receipt-id") != rid:
        raise AssertionError("expected RECEIPT receipt-id:%s, got %r" % (rid, f))
    return f


def subscribe(c, dest, sid="0", ack=None, headers=()):
    """SUBSCRIBE and wait for its RECEIPT, so the subscription is in place."""
    h = [("destination", dest), ("id", sid)]
    if ack:
        h.append(("ack", ack))
    h += list(headers)
    h.append(("receipt", "sub-" + sid))
    c.send_frame("SUBSCRIBE", h)
    expect_receipt(c, "sub-" + sid)


class Closed(Exception):
    pass


class RawClient:
    """A STOMP client speaking exact bytes over a socket from open_socket.
    What arrives is parsed by parse_frames as it comes; read_frame hands the
    frames out in order."""

    RECV = 1 << 18

    def __init__(self, port, host="127.0.0.1", timeout=5, sockopts=()):
        self.timeout = timeout * SLOW
        self.sock = open_socket(port, host, self.timeout, sockopts)
        self.buf = b""                          # received, not a complete frame yet
        self.pending = collections.deque()      # complete frames not read yet
        self.heartbeats = 0                     # EOLs seen between frames

    def send(self, data):
        self.sock.sendall(data)

    def send_frame(self, command, headers=(), body=b""):
        self.send(frame(command, headers, body))

    def connect(self, version="1.2", headers=None):
        h = [("accept-version", version), ("host", "/")] if version else []
        h += list((headers or {}).items())
        self.send_frame("CONNECT", h)
        f = self.read_frame()
        if f.command != "CONNECTED":
            raise AssertionError("expected CONNECTED, got %r" % f)
        return f

    def _fill(self, deadline):
        """One receive (bounded by deadline), parsed into pending."""
        remaining = deadline - time.time()
        if remaining <= 0:
            raise socket.timeout("no complete frame in time; have %r" % self.buf[:200])
        self.sock.settimeout(remaining)
        data = self.sock.recv(self.RECV)
        if not data:
            raise Closed("connection closed; unparsed %r" % self.buf[:200])
        frames, self.buf, eols = parse_frames(self.buf + data)
        self.pending.extend(frames)
        self.heartbeats += eols

    def read_frame(self, timeout=None):
        """The next frame; socket.timeout after timeout seconds (default
        self.timeout), Closed when the server has closed the connection."""
        deadline = time.time() + (timeout if timeout is not None else self.timeout)
        while not self.pending:
            self._fill(deadline)
        return self.pending.popleft()

    def poll(self, timeout):
        """The frames already here, or else those one receive brings within
        timeout seconds; [] if none came.  Closed at EOF."""
        if not self.pending:
            try:
                self._fill(time.time() + timeout)
            except socket.timeout:
                pass
        frames = list(self.pending)
        self.pending.clear()
        return frames

    def drain(self, timeout, idle=None):
        """Every frame until the server closes (returns frames, True), or until
        none came for `idle` seconds or `timeout` passed (returns frames, False)."""
        out = []
        deadline = time.time() + timeout
        while True:
            remaining = deadline - time.time()
            if remaining <= 0:
                return out, False
            try:
                out.append(self.read_frame(min(remaining, idle) if idle else remaining))
            except socket.timeout:
                return out, False
            except (Closed, ConnectionResetError):
                return out, True

    def read_frames(self, n, timeout=None):
        return [self.read_frame(timeout) for _ in range(n)]

    def expect(self, command, timeout=None):
        f = self.read_frame(timeout)
        if f.command != command:
            raise AssertionError("expected %s, got %r" % (command, f))
        return f

    def expect_error_and_close(self, timeout=None):
        """An ERROR frame, then the server closes the connection."""
        f = self.expect("ERROR", timeout)
        self.expect_closed(timeout)
        return f

    def expect_closed(self, timeout=None):
        """The server ends the connection; then we close our end, as real
        clients do (eftd's lingering close waits for that, up to 2 s)."""
        deadline = time.time() + (timeout if timeout is not None else self.timeout)
        while True:
            try:
                self._fill(deadline)
            except (Closed, ConnectionResetError):
                self.close()
                return

    def expect_nothing(self, wait=0.2):
        """No frame arrives within `wait` seconds (heart-beat EOLs are ignored)."""
        try:
            f = self.read_frame(timeout=wait)
        except socket.timeout:
            return
        raise AssertionError("expected nothing, got %r" % f)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class BrokerTest(unittest.TestCase):
    """A test case with a fresh eftd per test and clients closed afterwards."""

    config = None
    args = ()

    def setUp(self):
        self.broker = Broker(config=self.config, args=self.args).start()
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        rc = self.broker.stop()
        log = self.broker.read_log()
        if os.path.exists(self.broker.log_path):
            os.unlink(self.broker.log_path)
        self.assertEqual(rc, 0, "eftd did not exit cleanly; log:\n" + log[-4000:])

    def client(self, connect="1.2", **kw):
        c = RawClient(self.broker.port, **kw)
        self.clients.append(c)
        if connect:
            c.connect(connect)
        return c
