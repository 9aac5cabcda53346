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

import sys
import time

from stomp_py_helper import RUN, Failure, check, connect, disconnect, eq, run


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


def sc_wildcards(port, version="1.2"):
    """Each wildcard form, and overlapping subscriptions on one connection:
    each matching subscription gets a message once, with its own
    subscription header and the name it was sent to."""
    base = "py-wild-" + RUN
    c, l = connect(port, version, "wild")
    pats = {"star": base + ".price.*", "amq": base + ".price.>", "rmq": base + ".#",
            "mid": base + ".*.ACME"}
    for sid, pat in pats.items():
        subscribe(c, l, version, "/topic/" + pat, sid)
    pub, pl = connect(port, version, "wildpub")
    names = [base + ".price.ACME", base + ".price.ACME.ny", base, base + ".bond.X", "other." + base]
    for n in names:
        pub.send("/topic/" + n, n)
    pub.send("/topic/" + base + ".end", base + ".end", receipt="wild-pub")
    pl.receipt("wild-pub")
    want = {("star", names[0]), ("amq", names[0]), ("rmq", names[0]), ("mid", names[0]),
            ("amq", names[1]), ("rmq", names[1]), ("rmq", names[2]), ("rmq", names[3]),
            ("rmq", base + ".end")}
    got = set()
    for _ in range(len(want)):
        m = l.next_message(what="wildcard delivery %d of %d" % (len(got) + 1, len(want)))
        eq(m.headers.get("destination"), "/topic/" + m.body, "destination is the name sent to")
        got.add((m.headers.get("subscription"), m.body))
    eq(sorted(got), sorted(want), "deliveries (subscription, name)")
    with l.cond:
        check(not l.messages, "more deliveries than matching subscriptions: %r" % l.messages[:3])
    disconnect(c, l)
    disconnect(pub, pl)
    return "%d deliveries to *, >, # and a middle * on one connection" % len(want)


def sc_queue_wildcards(port, version="1.2"):
    """A wildcard queue consumer (ActiveMQ's): it takes from a queue there
    already and from one made after it subscribed, never from a queue it
    does not match; each MESSAGE names its own queue, and ACKs settle them
    (nothing comes back when the subscription ends)."""
    base = "py-qwild-" + RUN
    pub, pl = connect(port, version, "qwildpub")
    pub.send("/queue/" + base + ".a", base + ".a", receipt="qwild-first")
    pl.receipt("qwild-first")
    c, l = connect(port, version, "qwild")
    subscribe(c, l, version, "/queue/" + base + ".*", "qw", ack_mode="client-individual")
    pub.send("/queue/" + base + ".b", base + ".b")
    pub.send("/queue/other." + base, "other")
    pub.send("/queue/" + base + ".b.c", base + ".b.c", receipt="qwild-sent")
    pl.receipt("qwild-sent")
    got = [l.next_message(what="wildcard queue delivery %d of 2" % (i + 1)) for i in range(2)]
    eq(sorted(m.body for m in got), [base + ".a", base + ".b"], "the matching queues' messages")
    for i, m in enumerate(got):
        eq(m.headers.get("destination"), "/queue/" + m.body, "destination is the queue")
        eq(m.headers.get("subscription"), "qw", "subscription header")
        ack(c, version, m, "qw", receipt="qwild-ack%d" % i)
        l.receipt("qwild-ack%d" % i)
    time.sleep(0.2)
    with l.cond:
        check(not l.messages, "a queue the pattern does not match reached it: %r" %
              [f.body for f in l.messages])
    disconnect(c, l)
    again, al = connect(port, version, "qwild-again")
    subscribe(again, al, version, "/queue/" + base + ".*", "qw2")
    time.sleep(0.2)
    with al.cond:
        check(not al.messages, "acknowledged messages came back: %r" % [f.body for f in al.messages])
    disconnect(again, al)
    disconnect(pub, pl)
    return "a queue there before and one made after, both acknowledged"


def sc_exclusive(port, version="1.2"):
    """Exclusive consumers (activemq.exclusive): the first gets every
    message while the second stands by; when the first disconnects, the
    second takes over with what the first had not acknowledged, redelivered
    and in order."""
    dest = "/queue/py-exclusive-" + RUN
    first, fl = connect(port, version, "excl-first")
    first.subscribe(dest, id="x1", ack="client-individual", receipt="sub-x1",
                    headers={"activemq.exclusive": "true"})
    fl.receipt("sub-x1")
    second, sl = connect(port, version, "excl-second")
    second.subscribe(dest, id="x2", ack="client-individual", receipt="sub-x2",
                     headers={"activemq.exclusive": "true"})
    sl.receipt("sub-x2")
    pub, pl = connect(port, version, "excl-pub")
    for i in range(3):
        pub.send(dest, "m%d" % i)
    pub.send(dest, "m3", receipt="excl-sent")
    pl.receipt("excl-sent")
    got = [fl.next_message(what="message %d to the exclusive consumer" % i) for i in range(4)]
    eq([m.body for m in got], ["m0", "m1", "m2", "m3"], "the exclusive consumer's messages")
    ack(first, version, got[0], "x1", receipt="excl-ack")
    fl.receipt("excl-ack")
    time.sleep(0.2)
    with sl.cond:
        check(not sl.messages, "the consumer standing by got %r" % [f.body for f in sl.messages])
    disconnect(first, fl)
    again = [sl.next_message(what="redelivery %d after the takeover" % i) for i in range(3)]
    eq([(m.body, m.headers.get("redelivered")) for m in again],
       [("m1", "true"), ("m2", "true"), ("m3", "true")], "redelivered to the next, in order")
    pub.send(dest, "after", receipt="excl-after")
    pl.receipt("excl-after")
    m = sl.next_message(what="a new message after the takeover")
    eq(m.body, "after", "new message")
    for m in again + [m]:
        ack(second, version, m, "x2")
    disconnect(second, sl)
    disconnect(pub, pl)
    expect_empty(port, version, dest, "excl")
    return "4 to the exclusive consumer, 3 redelivered to the next after it left"


def sc_scheduled(port, version="1.2"):
    """ActiveMQ's scheduled delivery as a stomp.py user writes it: a message
    sent with AMQ_SCHEDULED_DELAY arrives after one sent later without it,
    and not before its delay."""
    dest = "/queue/py-scheduled-" + RUN
    cons, cl = connect(port, version, "sched-cons")
    subscribe(cons, cl, version, dest, "s1")
    pub, pl = connect(port, version, "sched-pub")
    sent = time.time()
    pub.send(dest, "later", headers={"AMQ_SCHEDULED_DELAY": "400"}, receipt="sched-later")
    pl.receipt("sched-later")
    pub.send(dest, "now", receipt="sched-now")
    pl.receipt("sched-now")
    first = cl.next_message(what="the message sent without a delay")
    eq(first.body, "now", "the undelayed message comes first")
    second = cl.next_message(what="the scheduled message")
    waited = time.time() - sent
    eq(second.body, "later", "then the scheduled one")
    check(waited >= 0.39, "the scheduled message came %.3f s after its SEND, before its "
          "400 ms delay" % waited)
    eq(second.headers.get("AMQ_SCHEDULED_DELAY"), "400", "its headers as sent")
    disconnect(pub, pl)
    disconnect(cons, cl)
    return "delivered after %.0f ms (AMQ_SCHEDULED_DELAY 400)" % (waited * 1000)


def sc_topic_prefetch(port, version="1.2"):
    """RabbitMQ's prefetch-count on a topic subscription, with its queue
    named by x-queue-name: two of five messages arrive, the rest wait in
    that queue and come one per ACK; a SEND to /amq/queue/NAME reaches it."""
    topic = "/topic/py-prefetch-" + RUN
    qname = "py-prefetch-q-" + RUN
    c, l = connect(port, version, "tprefetch")
    c.subscribe(topic, id="tp", ack="client-individual", receipt="sub-tp",
                headers={"prefetch-count": "2", "x-queue-name": qname})
    l.receipt("sub-tp")
    pub, pl = connect(port, version, "tprefetch-pub")
    for i in range(4):
        pub.send(topic, "m%d" % i)
    pub.send("/amq/queue/" + qname, "m4", receipt="tp-sent")
    pl.receipt("tp-sent")
    got = [l.next_message(what="message %d under the prefetch" % i) for i in range(2)]
    time.sleep(0.2)
    with l.cond:
        check(not l.messages, "more than prefetch-count 2 unacked: %r" % [f.body for f in l.messages])
    for i in range(3):
        ack(c, version, got[i], "tp")
        got.append(l.next_message(what="message %d after an ACK" % (i + 2)))
    eq([m.body for m in got], ["m0", "m1", "m2", "m3", "m4"], "in order, through the queue")
    eq(got[0].headers.get("destination"), topic, "destination is the topic")
    for m in got[3:]:
        ack(c, version, m, "tp")
    disconnect(c, l)
    disconnect(pub, pl)
    return "5 through a prefetch-count 2 topic subscription and its x-queue-name queue"


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
    s["wildcards_12"] = (sc_wildcards, "1.2")
    s["exclusive_12"] = (sc_exclusive, "1.2")
    s["queue_wildcards_12"] = (sc_queue_wildcards, "1.2")
    s["scheduled_12"] = (sc_scheduled, "1.2")
    s["topic_prefetch_12"] = (sc_topic_prefetch, "1.2")
    return s


if __name__ == "__main__":
    sys.exit(run("stomp.py", scenarios()))
