"""The one helper of the stomp.py real-client scripts (stomp_py_client.py,
stomp_py_rpc.py): connections with stomp.py 8 (Debian's python3-stomp) to
an eftd on 127.0.0.1, a listener that collects what a connection receives
with bounded waits that fail early on an ERROR frame, failure checks, and
the scenario runner that prints "PASS name" / "FAIL name: why" per scenario
and "LABEL: N passed, N failed".  Frames are read by stomp.py.
EFT_CLIENT_DEBUG=1 prints each frame sent and received.  Over TLS
(EFT_TLS_CA) each connection's TLS calls run one at a time (stomp.py 8's
receiver thread and sender share one SSL object unguarded: see
test/e2e/shared_tls.py)."""

import faulthandler
import os
import sys
import threading
import time
import traceback

import stomp

# shared_tls (test/e2e): stomp.py's receiver thread and the sender must not
# call into one SSL object at once.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "e2e"))
from shared_tls import share_stomp_py_tls  # noqa: E402

HOST = "127.0.0.1"
WAIT = 10              # seconds for any one expected frame
SCENARIO_LIMIT = 40    # seconds for a whole scenario (watchdog)
DEBUG = bool(os.environ.get("EFT_CLIENT_DEBUG"))
# Destination names include this, so reruns against one long-lived eftd do not meet leftovers.
RUN = "%d-%d" % (os.getpid(), int(time.time() * 1000) % 1000000)

# EFT_TLS_CA=FILE: eftd listens with TLS; its certificate is checked against FILE.
TLS_CA = os.environ.get("EFT_TLS_CA")
CLASSES = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def eq(actual, expected, what):
    if actual != expected:
        raise Failure("%s: expected %r, got %r" % (what, expected, actual))


class Collector(stomp.ConnectionListener):
    """Collects what one connection receives; waits are bounded and fail
    early if an ERROR frame arrives."""

    def __init__(self, name):
        self.name = name
        self.cond = threading.Condition()
        self.messages = []
        self.receipts = {}
        self.errors = []
        self.connected = threading.Event()
        self.disconnected = threading.Event()
        self.connected_frame = None
        self.heartbeats = 0
        self.heartbeat_timeouts = 0

    def _debug(self, what, frame):
        if DEBUG:
            body = frame.body if frame.body is not None else ""
            print("  [%s] %s %s %r %r" % (self.name, what, frame.cmd, frame.headers, body[:60]),
                  flush=True)

    def on_connected(self, frame):
        self._debug("<<", frame)
        self.connected_frame = frame
        self.connected.set()

    def on_message(self, frame):
        self._debug("<<", frame)
        with self.cond:
            self.messages.append(frame)
            self.cond.notify_all()

    def on_receipt(self, frame):
        self._debug("<<", frame)
        with self.cond:
            self.receipts[frame.headers.get("receipt-id")] = frame
            self.cond.notify_all()

    def on_error(self, frame):
        self._debug("<<", frame)
        with self.cond:
            self.errors.append(frame)
            self.cond.notify_all()

    def on_send(self, frame):
        if frame.cmd:
            self._debug(">>", frame)

    def on_disconnected(self):
        if DEBUG:
            print("  [%s] disconnected" % self.name, flush=True)
        self.disconnected.set()
        with self.cond:
            self.cond.notify_all()

    def on_heartbeat(self):
        self.heartbeats += 1

    def on_heartbeat_timeout(self):
        self.heartbeat_timeouts += 1

    def wait(self, pred, what, timeout=WAIT):
        """Until pred() is true, at most timeout seconds; Failure on an ERROR frame."""
        deadline = time.time() + timeout
        with self.cond:
            while True:
                if self.errors:
                    e = self.errors[0]
                    raise Failure("[%s] ERROR frame while waiting for %s: %r %r"
                                  % (self.name, what, e.headers, e.body))
                if pred():
                    return
                remaining = deadline - time.time()
                if remaining <= 0:
                    raise Failure("[%s] timed out after %ss waiting for %s (have %d messages)"
                                  % (self.name, timeout, what, len(self.messages)))
                self.cond.wait(remaining)

    def next_message(self, timeout=WAIT, what="a MESSAGE"):
        self.wait(lambda: self.messages, what, timeout)
        with self.cond:
            return self.messages.pop(0)

    def receipt(self, rid, timeout=WAIT):
        self.wait(lambda: rid in self.receipts, "RECEIPT %s" % rid, timeout)
        return self.receipts[rid]

    def no_errors(self):
        with self.cond:
            if self.errors:
                e = self.errors[0]
                raise Failure("[%s] ERROR frame: %r %r" % (self.name, e.headers, e.body))


OPEN = []  # (conn, collector) to close at the end of a scenario


def bounded(fn, secs, what):
    """Run fn in a daemon thread; fail if it takes longer than secs."""
    box = {}

    def run():
        try:
            box["r"] = fn()
        except BaseException as e:  # noqa: B902 - re-raised below
            box["e"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(secs)
    if t.is_alive():
        raise Failure("%s took over %ss" % (what, secs))
    if "e" in box:
        raise box["e"]
    return box.get("r")


def connect(port, version, name, heartbeats=(0, 0), connect_kw=None, listener=None, **kw):
    """A connection of stomp.py's class for version, CONNECTED (its version
    header checked); returns (conn, listener).  listener(conn) makes the
    listener (default a Collector called name); kw go to the class."""
    cls = CLASSES[version]
    args = dict(reconnect_attempts_max=1, timeout=5)
    if version != "1.0":
        args["heartbeats"] = heartbeats
    args.update(kw)
    conn = cls([(HOST, port)], **args)
    if TLS_CA:
        conn.set_ssl(for_hosts=[(HOST, port)], ca_certs=TLS_CA)
        share_stomp_py_tls(conn)
    col = listener(conn) if listener else Collector(name)
    conn.set_listener("collector", col)
    OPEN.append((conn, col))
    bounded(lambda: conn.connect("guest", "guest", wait=False, **(connect_kw or {})), 10,
            "%s connect" % name)
    if not col.connected.wait(WAIT):
        col.no_errors()
        raise Failure("[%s] no CONNECTED within %ss" % (name, WAIT))
    f = col.connected_frame
    if version == "1.0":
        check(f.headers.get("version") in (None, "1.0"),
              "CONNECTED version for a 1.0 client: %r" % f.headers)
    else:
        eq(f.headers.get("version"), version, "[%s] CONNECTED version" % name)
    return conn, col


def disconnect(conn, col, rid="bye"):
    """DISCONNECT with a receipt; the RECEIPT must come and the socket close."""
    bounded(lambda: conn.disconnect(receipt=rid), 10, "[%s] disconnect" % col.name)
    r = col.receipt(rid, timeout=1)  # disconnect() returns only after it arrived or the socket closed
    eq(r.headers.get("receipt-id"), rid, "DISCONNECT receipt-id")
    check(col.disconnected.wait(WAIT), "[%s] socket not closed after DISCONNECT" % col.name)
    OPEN[:] = [(c, l) for c, l in OPEN if c is not conn]


def close_all():
    for conn, col in OPEN:
        try:
            if conn.is_connected():
                bounded(lambda: conn.disconnect(receipt="cleanup"), 5, "cleanup")
        except BaseException:
            pass
    OPEN[:] = []


def run(label, all_sc):
    """The script's main: `script PORT [SCENARIO]` runs every scenario of
    all_sc (name -> (function(port, version) returning a note, version)), or
    just SCENARIO, each under a faulthandler watchdog of SCENARIO_LIMIT;
    prints "LABEL: N passed, N failed"; returns the exit status (1 if any
    failed, 2 on bad arguments)."""
    try:
        port = int(sys.argv[1])
    except (IndexError, ValueError):
        print("usage: %s PORT [SCENARIO]" % os.path.basename(sys.argv[0]), file=sys.stderr)
        print("%s: 0 passed, 1 failed" % label)
        return 2
    names = sys.argv[2:3] or list(all_sc)
    passed = failed = 0
    for name in names:
        if name not in all_sc:
            print("FAIL %s: no such scenario (have %s)" % (name, ", ".join(all_sc)), flush=True)
            failed += 1
            continue
        fn, ver = all_sc[name]
        t0 = time.time()
        faulthandler.dump_traceback_later(SCENARIO_LIMIT, exit=True)
        try:
            note = fn(port, ver)
            print("PASS %s (%.2fs): %s" % (name, time.time() - t0, note), flush=True)
            passed += 1
        except Exception as e:
            print("FAIL %s (%.2fs): %s: %s" % (name, time.time() - t0, type(e).__name__, e), flush=True)
            traceback.print_exc(file=sys.stdout, limit=6)
            failed += 1
        finally:
            close_all()
            faulthandler.cancel_dump_traceback_later()
    print("%s: %d passed, %d failed" % (label, passed, failed), flush=True)
    return 0 if failed == 0 else 1


