#!/usr/bin/python3
"""RPC over eftd's temp-queues with stomp.py 8 (Debian's python3-stomp).

    /usr/bin/python3 test/clients/stomp_py_rpc.py PORT [SCENARIO]

A service on its own connection answers every request to its reply-to
header, copying correlation-id.  Clients send requests with
reply-to:/temp-queue/replies and a correlation-id, either
  (a) subscribing to /temp-queue/replies themselves first (ActiveMQ style):
      replies arrive on that subscription, with its id; or
  (b) not subscribing at all (RabbitMQ style): replies arrive through the
      subscription eftd makes, subscription:/temp-queue/replies.

Runs every scenario (or just SCENARIO) against an eftd on 127.0.0.1:PORT,
prints "PASS name" / "FAIL name: why" per scenario and ends with
"stomp.py-rpc: N passed, N failed"; exits 1 if any failed.  Every wait is
bounded; a scenario that hangs anyway is ended by a faulthandler watchdog.
"""

import faulthandler
import os
import re
import sys
import threading
import time
import traceback

import stomp

HOST = "127.0.0.1"
WAIT = 10              # seconds for any one expected frame
SCENARIO_LIMIT = 40    # seconds for a whole scenario (watchdog)
N = 200                # requests per client
REPLY_RE = re.compile(r"^/reply-queue/eft\.gen-[A-Za-z0-9_-]{22}$")
RUN = "%d-%d" % (os.getpid(), int(time.time() * 1000) % 1000000)
CLASSES = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def eq(actual, expected, what):
    if actual != expected:
        raise Failure("%s: expected %r, got %r" % (what, expected, actual))


def compute(body):
    """What the service answers: the number plus one."""
    return str(int(body) + 1)


class Collector(stomp.ConnectionListener):
    """What one connection receives; bounded waits that fail on ERROR."""

    def __init__(self, name):
        self.name = name
        self.cond = threading.Condition()
        self.messages = []
        self.receipts = set()
        self.errors = []
        self.connected = threading.Event()

    def on_connected(self, frame):
        self.connected.set()

    def on_message(self, frame):
        with self.cond:
            self.messages.append(frame)
            self.cond.notify_all()

    def on_receipt(self, frame):
        with self.cond:
            self.receipts.add(frame.headers.get("receipt-id"))
            self.cond.notify_all()

    def on_error(self, frame):
        with self.cond:
            self.errors.append(frame)
            self.cond.notify_all()

    def wait(self, pred, what, timeout=WAIT):
        deadline = time.time() + timeout
        with self.cond:
            while True:
                if self.errors:
                    e = self.errors[0]
                    raise Failure("[%s] ERROR frame while waiting for %s: %r %r"
                                  % (self.name, what, e.headers, e.body))
                if pred():
                    return
                left = deadline - time.time()
                if left <= 0:
                    raise Failure("[%s] timed out after %ss waiting for %s (have %d messages)"
                                  % (self.name, timeout, what, len(self.messages)))
                self.cond.wait(left)


class Service(Collector):
    """Answers each request to its reply-to, from the receiving thread."""

    def __init__(self, conn):
        super().__init__("service")
        self.conn = conn
        self.reply_tos = []
        self.failures = []

    def on_message(self, frame):
        try:
            rt = frame.headers.get("reply-to")
            self.reply_tos.append(rt)
            headers = {}
            if "correlation-id" in frame.headers:
                headers["correlation-id"] = frame.headers["correlation-id"]
            self.conn.send(rt, compute(frame.body), headers=headers)
        except Exception as e:  # reported by the scenario
            self.failures.append(repr(e))
        super().on_message(frame)


OPEN = []


def bounded(fn, secs, what):
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


def connect(port, version, listener_factory):
    kw = dict(reconnect_attempts_max=1, timeout=5)
    if version != "1.0":
        kw["heartbeats"] = (0, 0)
    conn = CLASSES[version]([(HOST, port)], **kw)
    col = listener_factory(conn)
    conn.set_listener("l", col)
    OPEN.append(conn)
    bounded(lambda: conn.connect("guest", "guest", wait=False), 10, "%s connect" % col.name)
    if not col.connected.wait(WAIT):
        raise Failure("[%s] no CONNECTED within %ss" % (col.name, WAIT))
    return conn, col


def close_all():
    for conn in OPEN:
        try:
            if conn.is_connected():
                bounded(lambda: conn.disconnect(receipt="bye"), 5, "disconnect")
        except BaseException:
            pass
    OPEN[:] = []


def receipt(conn, col, rid):
    """Wait (bounded) for the RECEIPT of a frame sent with receipt=rid."""
    col.wait(lambda: rid in col.receipts, "RECEIPT " + rid)


def start_service(port, version, queue):
    conn, svc = connect(port, version, Service)
    conn.subscribe(queue, id="rpc-service", ack="auto", receipt="svc-sub")
    receipt(conn, svc, "svc-sub")
    return conn, svc


def run_client(port, version, queue, sub_first, tag, n=N, first=1):
    """n requests from one client; returns (client collector, expected by cid)."""
    conn, col = connect(port, version, lambda c: Collector(tag))
    if sub_first:
        conn.subscribe("/temp-queue/replies", id="replies-" + tag, ack="auto", receipt="sub")
        receipt(conn, col, "sub")
    want = {}
    for i in range(first, first + n):
        cid = "%s-%d" % (tag, i)
        want[cid] = compute(str(i))
        conn.send(queue, str(i), headers={"reply-to": "/temp-queue/replies", "correlation-id": cid})
    return conn, col, want


def check_client(col, want, sub_id):
    col.wait(lambda: len(col.messages) >= len(want), "%d replies" % len(want))
    time.sleep(0.2)  # anything more would be a duplicate or someone else's
    with col.cond:
        msgs = list(col.messages)
    eq(len(msgs), len(want), "[%s] number of replies" % col.name)
    got = {}
    dests = set()
    for m in msgs:
        cid = m.headers.get("correlation-id")
        check(cid not in got, "[%s] duplicate reply %s" % (col.name, cid))
        got[cid] = m.body
        eq(m.headers.get("subscription"), sub_id, "[%s] subscription of reply %s" % (col.name, cid))
        dests.add(m.headers.get("destination"))
    eq(got, want, "[%s] replies by correlation-id" % col.name)
    eq(len(dests), 1, "[%s] reply destinations" % col.name)
    dest = dests.pop()
    check(REPLY_RE.match(dest or ""), "[%s] reply destination %r" % (col.name, dest))
    return dest


def check_service(svc, count, dests):
    check(not svc.failures, "service failed: %r" % svc.failures[:3])
    eq(len(svc.reply_tos), count, "requests the service answered")
    eq(set(svc.reply_tos), set(dests), "reply-to names the service saw")


# ------------------------------------------------------------------ scenarios

def sc_subscribe_first(port, version):
    """(a) The client subscribes to /temp-queue/replies itself, with a listener."""
    q = "/queue/py-rpc-a-%s-%s" % (version, RUN)
    _, svc = start_service(port, version, q)
    _, col, want = run_client(port, version, q, True, "a")
    dest = check_client(col, want, "replies-a")
    check_service(svc, N, [dest])
    return "%d replies on the client's own subscription (%s)" % (N, version)


def sc_auto(port, version):
    """(b) The client never subscribes: replies come through eftd's subscription."""
    q = "/queue/py-rpc-b-%s-%s" % (version, RUN)
    _, svc = start_service(port, version, q)
    _, col, want = run_client(port, version, q, False, "b")
    dest = check_client(col, want, "/temp-queue/replies")
    check_service(svc, N, [dest])
    return "%d replies with subscription:/temp-queue/replies (%s)" % (N, version)


def sc_two_clients(port, version):
    """Both styles at once with the same temp-queue name: replies kept apart."""
    q = "/queue/py-rpc-two-%s" % RUN
    _, svc = start_service(port, "1.2", q)
    _, ca, wa = run_client(port, version, q, True, "x")
    _, cb, wb = run_client(port, version, q, False, "y", first=1001)
    da = check_client(ca, wa, "replies-x")
    db = check_client(cb, wb, "/temp-queue/replies")
    check(da != db, "two connections share reply queue %s" % da)
    check_service(svc, 2 * N, [da, db])
    return "two %s clients, same temp-queue name, separate queues" % version


def scenarios():
    return {
        "subscribe_first_12": (sc_subscribe_first, "1.2"),
        "subscribe_first_11": (sc_subscribe_first, "1.1"),
        "auto_12": (sc_auto, "1.2"),
        "auto_11": (sc_auto, "1.1"),
        "auto_10": (sc_auto, "1.0"),
        "two_clients_12": (sc_two_clients, "1.2"),
    }


def main():
    try:
        port = int(sys.argv[1])
    except (IndexError, ValueError):
        print("usage: stomp_py_rpc.py PORT [SCENARIO]", file=sys.stderr)
        print("stomp.py-rpc: 0 passed, 1 failed")
        return 2
    all_sc = scenarios()
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
            print("FAIL %s (%.2fs): %s: %s" % (name, time.time() - t0, type(e).__name__, e),
                  flush=True)
            traceback.print_exc(file=sys.stdout, limit=6)
            failed += 1
        finally:
            close_all()
            faulthandler.cancel_dump_traceback_later()
    print("stomp.py-rpc: %d passed, %d failed" % (passed, failed), flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
