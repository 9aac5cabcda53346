#!/usr/bin/python3
"""Real-client checks of eftd with stomp.py 8 (Debian's python3-stomp).

    /usr/bin/python3 test/clients/stomp_py_client.py PORT [SCENARIO]

Runs every scenario (or just SCENARIO) against an eftd listening on
127.0.0.1:PORT, prints "PASS name" / "FAIL name: why" per scenario and ends
with "stomp.py: N passed, N failed"; exits 1 if any failed.  Every wait is
bounded; a scenario that hangs anyway is ended by a faulthandler watchdog
(which dumps every thread's stack and exits 1).  EFT_CLIENT_DEBUG=1 prints
each frame stomp.py sends and receives.
"""

import faulthandler
import os
import sys
import threading
import time
import traceback

import stomp

HOST = "127.0.0.1"
WAIT = 10              # seconds for any one expected frame
SCENARIO_LIMIT = 40    # seconds for a whole scenario (watchdog)
DEBUG = bool(os.environ.get("EFT_CLIENT_DEBUG"))
# Destination names include this, so reruns against one long-lived eftd do not meet leftovers.
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

    def _wait(self, pred, timeout, what):
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
                    raise Failure("[%s] timed out after %ss waiting for %s"
                                  % (self.name, timeout, what))
                self.cond.wait(remaining)

    def next_message(self, timeout=WAIT, what="a MESSAGE"):
        self._wait(lambda: self.messages, timeout, what)
        with self.cond:
            return self.messages.pop(0)

    def receipt(self, rid, timeout=WAIT):
        self._wait(lambda: rid in self.receipts, timeout, "RECEIPT %s" % rid)
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


def connect(port, version, name, heartbeats=(0, 0), connect_kw=None, **kw):
    cls = CLASSES[version]
    args = dict(reconnect_attempts_max=1, timeout=5)
    if version != "1.0":
        args["heartbeats"] = heartbeats
    args.update(kw)
    conn = cls([(HOST, port)], **args)
    col = Collector(name)
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


def ack(conn, version, msg, sub_id, **kw):
    if version == "1.2":
        ackid = msg.headers.get("ack")
        check(ackid, "1.2 MESSAGE in a client ack mode has no ack header: %r" % msg.headers)
        conn.ack(ackid, **kw)
    elif version == "1.1":
        conn.ack(msg.headers["message-id"], sub_id, **kw)
    else:
        conn.ack(msg.headers["message-id"], **kw)


def nack(conn, version, msg, sub_id, **kw):
    if version == "1.2":
        conn.nack(msg.headers["ack"], **kw)
    else:
        conn.nack(msg.headers["message-id"], sub_id, **kw)


def subscribe(conn, col, version, dest, sub_id, ack_mode="auto"):
    """SUBSCRIBE and wait for its RECEIPT (so it is active before anyone sends)."""
    rid = "sub-%s" % sub_id
    conn.subscribe(dest, id=sub_id, ack=ack_mode, receipt=rid)
    col.receipt(rid)


def unsubscribe(conn, col, version, dest, sub_id):
    rid = "unsub-%s" % sub_id
    if version == "1.0":
        conn.unsubscribe(destination=dest, id=sub_id, receipt=rid)
    else:
        conn.unsubscribe(sub_id, receipt=rid)
    col.receipt(rid)


def expect_empty(port, version, dest, tag):
    """A fresh connection finds dest empty: a sentinel is the first message."""
    conn, col = connect(port, version, "check-" + tag)
    subscribe(conn, col, version, dest, "empty-" + tag)
    conn.send(dest, "sentinel")
    m = col.next_message(what="the sentinel on " + dest)
    if m.body != "sentinel":
        raise Failure("%s should be empty, but got %r %r" % (dest, m.headers, m.body))
    disconnect(conn, col, "bye-check-" + tag)


def tag(version):
    return version.replace(".", "")


# ------------------------------------------------------------------ scenarios

def sc_basic(port, version):
    v = tag(version)
    dest = "/queue/py-basic-%s-%s" % (v, RUN)
    conn, col = connect(port, version, "basic" + v)
    subscribe(conn, col, version, dest, "s" + v)
    n = 20
    for i in range(n):
        conn.send(dest, "body %d" % i, headers={"x-custom": "v:%d:x" % i, "x-seq": str(i)})
    ids = set()
    for i in range(n):
        m = col.next_message(what="message %d" % i)
        eq(m.body, "body %d" % i, "body %d" % i)
        eq(m.headers.get("destination"), dest, "destination")
        eq(m.headers.get("x-custom"), "v:%d:x" % i, "custom header %d" % i)
        eq(m.headers.get("x-seq"), str(i), "x-seq %d" % i)
        if version != "1.0" or "subscription" in m.headers:
            eq(m.headers.get("subscription"), "s" + v, "subscription header")
        mid = m.headers.get("message-id")
        check(mid and mid not in ids, "missing or repeated message-id %r" % mid)
        ids.add(mid)
    # Non-ASCII text, a NUL inside the body (content-length framing), and for
    # 1.1/1.2 header values that need escaping.
    hdrs = {"x-uni": "ünïcödé ✓"}
    if version != "1.0":
        hdrs.update({"x-nl": "line1\nline2", "x-bs": "back\\slash", "x-colon": "a:b"})
    body = "héllo ✓ nul\x00inside ✓"
    conn.send(dest, body, headers=hdrs)
    m = col.next_message(what="the non-ASCII message")
    eq(m.body, body, "non-ASCII body with a NUL")
    for k, val in hdrs.items():
        eq(m.headers.get(k), val, "header %s" % k)
    # A large body, which stomp.py reads in 1 KB pieces.
    big = "".join(chr(ord("a") + i % 26) for i in range(200 * 1024))
    conn.send(dest, big)
    m = col.next_message(what="the 200 KB message")
    eq(len(m.body), len(big), "length of the 200 KB body")
    check(m.body == big, "200 KB body differs")
    unsubscribe(conn, col, version, dest, "s" + v)
    conn.send(dest, "after unsubscribe", receipt="after")
    col.receipt("after")
    time.sleep(0.2)
    with col.cond:
        check(not col.messages, "MESSAGE after UNSUBSCRIBE: %r" % [(f.headers, f.body) for f in col.messages])
    disconnect(conn, col)
    # what was sent after the UNSUBSCRIBE waits on the queue
    c2, l2 = connect(port, version, "basic%s-2" % v)
    subscribe(c2, l2, version, dest, "t" + v)
    eq(l2.next_message().body, "after unsubscribe", "message queued after UNSUBSCRIBE")
    disconnect(c2, l2)
    return "%d messages + 200 KB body, unsubscribe, disconnect receipt" % n


def sc_ack_client(port, version):
    """client (cumulative) mode: ACK the 3rd of 5; 4 and 5 come back redelivered."""
    v = tag(version)
    dest = "/queue/py-ack-client-%s-%s" % (v, RUN)
    conn, col = connect(port, version, "ackc" + v)
    subscribe(conn, col, version, dest, "c" + v, "client")
    for i in range(5):
        conn.send(dest, "m%d" % i)
    msgs = [col.next_message(what="message %d" % i) for i in range(5)]
    eq([m.body for m in msgs], ["m%d" % i for i in range(5)], "bodies")
    for m in msgs:
        check("redelivered" not in m.headers, "first delivery marked redelivered: %r" % m.headers)
    ack(conn, version, msgs[2], "c" + v, receipt="ack3")
    col.receipt("ack3")
    disconnect(conn, col)

    c2, l2 = connect(port, version, "ackc%s-2" % v)
    subscribe(c2, l2, version, dest, "d" + v, "client")
    got = [l2.next_message(what="redelivery %d" % i) for i in range(2)]
    eq([m.body for m in got], ["m3", "m4"], "messages left after a cumulative ACK of m2")
    for m in got:
        eq(m.headers.get("redelivered"), "true", "redelivered header on " + m.body)
    ack(c2, version, got[1], "d" + v, receipt="ack-all")
    l2.receipt("ack-all")
    time.sleep(0.1)
    with l2.cond:
        check(not l2.messages, "extra messages: %r" % [(f.headers, f.body) for f in l2.messages])
    disconnect(c2, l2)
    expect_empty(port, version, dest, "ackc" + v)
    return "cumulative ACK; the rest redelivered with redelivered:true"


def sc_ack_individual(port, version):
    """client-individual: ACK m0 and m2 only; m1 and m3 come back."""
    v = tag(version)
    dest = "/queue/py-ack-ind-%s-%s" % (v, RUN)
    conn, col = connect(port, version, "acki" + v)
    subscribe(conn, col, version, dest, "i" + v, "client-individual")
    for i in range(4):
        conn.send(dest, "m%d" % i)
    msgs = [col.next_message(what="message %d" % i) for i in range(4)]
    eq([m.body for m in msgs], ["m0", "m1", "m2", "m3"], "bodies")
    ack(conn, version, msgs[2], "i" + v)
    ack(conn, version, msgs[0], "i" + v, receipt="acked")
    col.receipt("acked")
    disconnect(conn, col)

    c2, l2 = connect(port, version, "acki%s-2" % v)
    subscribe(c2, l2, version, dest, "j" + v, "client-individual")
    got = [l2.next_message(what="redelivery %d" % i) for i in range(2)]
    eq(sorted(m.body for m in got), ["m1", "m3"], "redelivered set")
    eq([m.body for m in got], ["m1", "m3"], "redelivery order")
    for m in got:
        eq(m.headers.get("redelivered"), "true", "redelivered header on " + m.body)
        ack(c2, version, m, "j" + v)
    c2.send("/topic/py-sync-" + RUN, "x", receipt="sync")
    l2.receipt("sync")
    disconnect(c2, l2)
    expect_empty(port, version, dest, "acki" + v)
    return "individual ACKs; only unacked messages redelivered"


def sc_nack(port, version):
    v = tag(version)
    dest = "/queue/py-nack-%s-%s" % (v, RUN)
    conn, col = connect(port, version, "nack" + v)
    subscribe(conn, col, version, dest, "n" + v, "client-individual")
    conn.send(dest, "nack me", headers={"x-keep": "k:1"})
    m = col.next_message()
    eq(m.body, "nack me", "body")
    nack(conn, version, m, "n" + v)
    m2 = col.next_message(what="redelivery after NACK")
    eq(m2.body, "nack me", "body after NACK")
    eq(m2.headers.get("redelivered"), "true", "redelivered after NACK")
    eq(m2.headers.get("x-keep"), "k:1", "custom header after NACK")
    eq(m2.headers.get("message-id"), m.headers.get("message-id"), "message-id kept on redelivery")
    ack(conn, version, m2, "n" + v, receipt="acked")
    col.receipt("acked")
    disconnect(conn, col)
    expect_empty(port, version, dest, "nack" + v)
    return "NACK → redelivered, then ACK"


def sc_tx(port, version):
    v = tag(version)
    dest = "/queue/py-tx-%s-%s" % (v, RUN)
    conn, col = connect(port, version, "tx" + v)
    subscribe(conn, col, version, dest, "x" + v)
    tx = conn.begin("abort-me")
    for i in range(3):
        conn.send(dest, "aborted %d" % i, transaction=tx)
    conn.abort(tx)
    conn.send(dest, "marker 1")
    eq(col.next_message().body, "marker 1", "first message after ABORT")

    tx = conn.begin("commit-me")
    for i in range(3):
        conn.send(dest, "committed %d" % i, transaction=tx, headers={"x-i": str(i)})
    conn.send(dest, "marker 2")
    eq(col.next_message().body, "marker 2", "first message while a transaction is open")
    conn.commit(tx, receipt="committed")
    for i in range(3):
        m = col.next_message(what="committed message %d" % i)
        eq(m.body, "committed %d" % i, "committed message %d" % i)
        eq(m.headers.get("x-i"), str(i), "x-i")
        check("transaction" not in m.headers, "MESSAGE carries a transaction header: %r" % m.headers)
    col.receipt("committed")
    conn.send(dest, "marker 3")
    eq(col.next_message().body, "marker 3", "nothing extra after COMMIT")
    disconnect(conn, col)
    return "ABORT drops, COMMIT delivers in order"


def sc_receipts(port, version):
    v = tag(version)
    dest = "/queue/py-rcpt-%s-%s" % (v, RUN)
    # 1.1/1.2 stomp.py sends STOMP by default; here the CONNECT form.
    kw = {} if version == "1.0" else {"with_connect_command": True}
    conn, col = connect(port, version, "rcpt" + v, connect_kw=kw)
    conn.send(dest, "r", receipt="r-send")
    col.receipt("r-send")
    subscribe(conn, col, version, dest, "r" + v, "client")   # waits for its receipt
    m = col.next_message()
    ack(conn, version, m, "r" + v, receipt="r-ack")
    col.receipt("r-ack")
    conn.begin("t", receipt="r-begin")
    col.receipt("r-begin")
    conn.abort("t", receipt="r-abort")
    col.receipt("r-abort")
    unsubscribe(conn, col, version, dest, "r" + v)
    if version != "1.0":   # a receipt id that 1.1/1.2 escape on the wire
        conn.send(dest, "odd", receipt="odd:id")
        col.receipt("odd:id")
    col.no_errors()
    disconnect(conn, col, "r-bye")
    return "SEND/SUBSCRIBE/ACK/BEGIN/ABORT/UNSUBSCRIBE/DISCONNECT receipts"


def sc_heartbeats(port, version="1.2"):
    conn, col = connect(port, version, "hb", heartbeats=(1000, 1000))
    hb = col.connected_frame.headers.get("heart-beat", "")
    parts = hb.split(",")
    check(len(parts) == 2 and all(p.isdigit() for p in parts), "CONNECTED heart-beat %r" % hb)
    sx, sy = int(parts[0]), int(parts[1])
    check(0 < sx <= 1000, "server send interval %d (client asked for 1000 ms)" % sx)
    check(0 < sy <= 1000, "server receive interval %d (client offered 1000 ms)" % sy)
    time.sleep(3.5)
    check(conn.is_connected() and not col.disconnected.is_set(), "disconnected while idle")
    check(col.heartbeats >= 1, "no heart-beats received from eftd in 3.5 s")
    eq(col.heartbeat_timeouts, 0, "stomp.py heart-beat timeouts")
    dest = "/queue/py-hb-" + RUN
    subscribe(conn, col, version, dest, "hb")
    conn.send(dest, "still alive")
    eq(col.next_message().body, "still alive", "body after idle")
    disconnect(conn, col)
    return "heart-beat %s; %d beats received while idle 3.5 s" % (hb, col.heartbeats)


def sc_topic_fanout(port, version=None):
    topic = "/topic/py-fanout-" + RUN
    subs = []
    for k, ver in enumerate(("1.2", "1.1")):
        c, l = connect(port, ver, "fan%d" % k)
        subscribe(c, l, ver, topic, "f%d" % k)
        subs.append((c, l))
    pub, pl = connect(port, "1.2", "fanpub")
    n = 20
    for i in range(n):
        pub.send(topic, "fan %d" % i, headers={"x-i": str(i)})
    pub.send(topic, "fan end", receipt="pub-done")
    pl.receipt("pub-done")
    for k, (c, l) in enumerate(subs):
        for i in range(n):
            m = l.next_message(what="subscriber %d message %d" % (k, i))
            eq(m.body, "fan %d" % i, "subscriber %d body %d" % (k, i))
            eq(m.headers.get("x-i"), str(i), "x-i")
            eq(m.headers.get("subscription"), "f%d" % k, "subscription")
        eq(l.next_message().body, "fan end", "subscriber %d: message after the %d" % (k, n))
    with pl.cond:
        check(not pl.messages, "publisher (not subscribed) got messages")
    for c, l in subs + [(pub, pl)]:
        disconnect(c, l)
    return "%d topic messages to a 1.2 and a 1.1 subscriber" % n


def sc_bulk(port, version="1.2"):
    """A consumer that falls behind: 1000 x 8 KB (past eftd's 512 KB output
    high-water mark) sent by another connection, all delivered in order."""
    dest = "/queue/py-bulk-" + RUN
    n = 1000
    cons, cl = connect(port, version, "bulk-consumer")
    subscribe(cons, cl, version, dest, "bulk", "client-individual")
    pub, pl = connect(port, version, "bulk-publisher")
    pad = "y" * 8000
    for i in range(n):
        pub.send(dest, "%d %s" % (i, pad), headers={"x-i": str(i)})
    pub.send("/topic/py-sync-" + RUN, "x", receipt="bulk-pub")
    pl.receipt("bulk-pub", timeout=30)
    for i in range(n):
        m = cl.next_message(what="bulk message %d of %d" % (i, n))
        eq(m.headers.get("x-i"), str(i), "message order")
        eq(m.body, "%d %s" % (i, pad), "body %d" % i)
        ack(cons, version, m, "bulk")
    cons.send("/topic/py-sync-" + RUN, "x", receipt="bulk-acked")
    cl.receipt("bulk-acked")
    disconnect(cons, cl)
    disconnect(pub, pl)
    expect_empty(port, version, dest, "bulk")
    return "%d x 8 KB through a consumer's backlog, in order" % n


def scenarios():
    s = {}
    for ver in ("1.0", "1.1", "1.2"):
        v = tag(ver)
        s["basic_" + v] = (sc_basic, ver)
        s["ack_client_" + v] = (sc_ack_client, ver)
        if ver != "1.0":
            s["ack_individual_" + v] = (sc_ack_individual, ver)
            s["nack_" + v] = (sc_nack, ver)
        s["tx_" + v] = (sc_tx, ver)
        s["receipts_" + v] = (sc_receipts, ver)
    s["heartbeats_12"] = (sc_heartbeats, "1.2")
    s["topic_fanout"] = (sc_topic_fanout, None)
    s["bulk_12"] = (sc_bulk, "1.2")
    return s


def main():
    try:
        port = int(sys.argv[1])
    except (IndexError, ValueError):
        print("usage: stomp_py_client.py PORT [SCENARIO]", file=sys.stderr)
        print("stomp.py: 0 passed, 1 failed")
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
            note = fn(int(port), ver)
            print("PASS %s (%.2fs): %s" % (name, time.time() - t0, note), flush=True)
            passed += 1
        except Exception as e:
            print("FAIL %s (%.2fs): %s: %s" % (name, time.time() - t0, type(e).__name__, e), flush=True)
            traceback.print_exc(file=sys.stdout, limit=6)
            failed += 1
        finally:
            close_all()
            faulthandler.cancel_dump_traceback_later()
    print("stomp.py: %d passed, %d failed" % (passed, failed), flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
