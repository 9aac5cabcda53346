#!/usr/bin/python3
"""Message lifetimes with stomp.py 8 (Debian's python3-stomp): the headers
real ActiveMQ and RabbitMQ clients send (expires, expiration, priority,
selector, NACK requeue:false) and what eftd does with them.

    /usr/bin/python3 test/clients/stomp_py_lifetime.py PORT [SCENARIO]

Expects the eftd that test/e2e/test_lifetime.py starts for it, with these
policies (the dead-letter queues are fixed names, the queues end in RUN):
    policy = /queue/dl.> dead-letter-queue=/queue/dl-dead
    policy = /queue/mr.> max-redeliveries=2 dead-letter-queue=/queue/mr-dead
Prints "PASS name" / "FAIL name: why" per scenario and "stomp.py-lifetime:
N passed, N failed"; exits 1 if any failed.  Every wait is bounded.
"""

import sys
import time

from stomp_py_helper import RUN, WAIT, Failure, check, connect, disconnect, eq, run


# eftd's clock (libevent's cached time) may be a few ms off ours.
CLOCK_SLACK_MS = 50


def now_ms():
    return int(time.time() * 1000)


def subscribe(conn, col, dest, sub_id, ack="auto", **headers):
    """SUBSCRIBE and wait for its RECEIPT."""
    rid = "sub-%s" % sub_id
    conn.subscribe(dest, id=sub_id, ack=ack, receipt=rid, headers=headers)
    col.receipt(rid)


def sync(conn, col, rid):
    """A RECEIPT for a SEND to a topic nobody reads: every earlier frame of
    this connection has taken effect."""
    conn.send("/topic/py-sync-" + RUN, "x", receipt=rid)
    col.receipt(rid)


def quiet(col, secs=0.3):
    """Nothing more arrives for secs seconds."""
    time.sleep(secs)
    with col.cond:
        check(not col.messages, "[%s] unexpected messages: %r"
              % (col.name, [(m.headers, m.body) for m in col.messages]))
        col.no_errors()


def until_sentinel(col, sentinel="sentinel"):
    """Messages until the sentinel body (sent after those expected), without it."""
    got = []
    for _ in range(20):
        m = col.next_message(what="messages up to " + sentinel)
        if m.body == sentinel:
            return got
        got.append(m)
    raise Failure("no %s among 20 messages: %r" % (sentinel, [m.body for m in got]))


def expect_error_and_close(col, want):
    """An ERROR frame whose message header is want reached on_error, then the
    connection closed."""
    deadline = time.time() + WAIT
    with col.cond:
        while not col.errors and time.time() < deadline:
            col.cond.wait(deadline - time.time())
        check(col.errors, "[%s] no ERROR within %ss (want %r)" % (col.name, WAIT, want))
        e = col.errors.pop(0)
    eq(e.headers.get("message"), want, "ERROR message header")
    check(col.disconnected.wait(WAIT), "[%s] connection still open after the ERROR" % col.name)
    return e


def empty(port, dest, tag):
    """dest holds nothing: a new subscriber's first message is a sentinel."""
    conn, col = connect(port, "1.2", "empty-" + tag)
    subscribe(conn, col, dest, "e")
    conn.send(dest, "sentinel")
    got = until_sentinel(col)
    eq([m.body for m in got], [], "messages left on " + dest)
    disconnect(conn, col, "bye-empty-" + tag)


# ------------------------------------------------------------------ scenarios

def sc_expiry(port, version):
    """expires (ActiveMQ, absolute) and expiration (RabbitMQ, relative)."""
    dest = "/queue/py-exp-" + RUN
    conn, col = connect(port, version, "exp")
    now = now_ms()
    conn.send(dest, "stale-abs", headers={"expires": str(now + 200)})
    conn.send(dest, "stale-rel", headers={"expiration": "200"})
    conn.send(dest, "doa-abs", headers={"expires": str(now - 1000)})
    conn.send(dest, "doa-rel", headers={"expiration": "0"})
    conn.send(dest, "forever", headers={"expires": "0"})
    conn.send(dest, "fresh-abs", headers={"expires": str(now + 60000)})
    conn.send(dest, "fresh-rel", headers={"expiration": "60000"})
    conn.send(dest, "both-sooner", headers={"expires": str(now + 60000), "expiration": "200"})
    conn.send(dest, "both-later", headers={"expires": str(now + 60000), "expiration": "120000",
                                           "x-custom": "kept"}, receipt="sent")
    col.receipt("sent")
    time.sleep(0.5)
    subscribe(conn, col, dest, "s1")
    conn.send(dest, "sentinel")
    got = until_sentinel(col)
    eq([m.body for m in got], ["forever", "fresh-abs", "fresh-rel", "both-later"],
       "messages still alive")
    eq(got[-1].headers.get("x-custom"), "kept", "custom header")
    eq(got[-1].headers.get("expiration"), "120000", "expiration header as sent")
    disconnect(conn, col)
    return "4 of 9 alive after 500 ms (5 expired: at SEND, while waiting, the sooner of both)"


def sc_bad_headers(port, version):
    dest = "/queue/py-bad-" + RUN
    for name, value in (("priority", "high"), ("expires", "x"), ("expiration", "-1")):
        conn, col = connect(port, version, "bad-" + name)
        conn.send(dest, "never", headers={name: value})
        expect_error_and_close(col, "bad %s header" % name)
    empty(port, dest, "bad")
    return "priority:high, expires:x, expiration:-1 each got ERROR (on_error) and a close"


def sc_priority(port, version):
    """Higher first, FIFO within one, default 4, 12 counts as 9; a NACKed
    message goes back to the head of its priority."""
    dest = "/queue/py-prio-" + RUN
    p, pl = connect(port, version, "prio-pub")
    for body, prio in (("n-def", None), ("n-0", 0), ("n-9a", 9), ("n-5", 5), ("n-12", 12),
                       ("n-4", 4), ("n-9b", 9), ("n-1", 1)):
        p.send(dest, body, headers={} if prio is None else {"priority": str(prio)})
    p.send(dest, "n-last", headers={"priority": "0"}, receipt="sent")
    pl.receipt("sent")
    c, cl = connect(port, "1.2", "prio-con")
    subscribe(c, cl, dest, "p", ack="client-individual", **{"prefetch-count": "1"})
    first = cl.next_message()
    eq(first.body, "n-9a", "first message")
    c.nack(first.headers["ack"])
    again = cl.next_message()
    eq(again.body, "n-9a", "after NACK: back at the head of priority 9")
    eq(again.headers.get("redelivered"), "true", "redelivered header")
    c.ack(again.headers["ack"])
    want = ["n-12", "n-9b", "n-5", "n-def", "n-4", "n-1", "n-0", "n-last"]
    got = []
    for _ in want:
        m = cl.next_message()
        c.ack(m.headers["ack"])
        got.append(m.body)
    eq(got, want, "priority order")
    quiet(cl)
    disconnect(c, cl)
    disconnect(p, pl)
    return "priority order 9,9(12),9,5,4(default),4,1,0,0; NACKed one first again"


def check_dead_letter(m, reason, origin, t0, t1):
    eq(m.headers.get("x-death-reason"), reason, "x-death-reason")
    eq(m.headers.get("x-original-destination"), origin, "x-original-destination")
    at = int(m.headers.get("x-death-time", "-1"))
    check(t0 - CLOCK_SLACK_MS <= at <= t1 + CLOCK_SLACK_MS,
          "x-death-time %d not between %d and %d" % (at, t0, t1))
    check("expires" not in m.headers, "dead letter has expires: %r" % m.headers)
    check("expiration" not in m.headers, "dead letter has expiration: %r" % m.headers)


def sc_dead_letter(port, version):
    """NACK requeue:false over 1.2 (nack(ack, requeue='false')) and 1.1
    (nack(message-id, subscription, **headers)): both go to the policy's
    dead-letter queue as new messages; rejected again there, dropped."""
    dlq = "/queue/dl-dead"
    dest = "/queue/dl.py-" + RUN
    seen = {}
    for ver, body in (("1.2", "poison-12"), ("1.1", "poison-11")):
        c, cl = connect(port, ver, "rej" + ver)
        subscribe(c, cl, dest, "w", ack="client-individual")
        c.send(dest, body, headers={"x-order": "42", "expiration": "600000", "expires": "0"})
        m = cl.next_message()
        eq(m.body, body, "body before the reject")
        t0 = now_ms()
        if ver == "1.2":
            c.nack(m.headers["ack"], requeue="false")
        else:
            c.nack(m.headers["message-id"], "w", **{"requeue": "false"})
        sync(c, cl, "nacked")
        seen[body] = (m.headers["message-id"], t0, now_ms())
        quiet(cl)
        disconnect(c, cl)
    d, dl = connect(port, "1.2", "dlq")
    subscribe(d, dl, dlq, "dead", ack="client-individual")
    got = []
    for body in ("poison-12", "poison-11"):
        m = dl.next_message(what="dead letter " + body)
        eq(m.body, body, "dead letter body (in order)")
        mid, t0, t1 = seen[body]
        check_dead_letter(m, "rejected", dest, t0, t1)
        eq(m.headers.get("x-order"), "42", "custom header kept")
        eq(m.headers.get("destination"), dlq, "destination")
        check(m.headers.get("message-id") not in (None, mid),
              "dead letter message-id %r (was %s)" % (m.headers.get("message-id"), mid))
        got.append(m)
    d.nack(got[0].headers["ack"], requeue="false")  # from the DLQ: dropped
    d.ack(got[1].headers["ack"])
    sync(d, dl, "settled")
    quiet(dl)
    disconnect(d, dl)
    empty(port, dlq, "dlq")
    empty(port, dest, "orig")
    return ("two rejects (1.2 ack id, 1.1 message-id) dead-lettered with x-death-*; "
            "reject from DLQ dropped")


def sc_max_redeliveries(port, version):
    """max-redeliveries = 2 (policy): three NACKs, or three consumers that
    leave without acknowledging, and the message dies."""
    dlq = "/queue/mr-dead"
    dest = "/queue/mr.py-nack-" + RUN
    c, cl = connect(port, version, "mr")
    subscribe(c, cl, dest, "n", ack="client-individual")
    c.send(dest, "again", headers={"x-k": "v"})
    t0 = now_ms()
    for i in range(3):
        m = cl.next_message(what="delivery %d" % (i + 1))
        eq(m.body, "again", "delivery %d" % (i + 1))
        eq(m.headers.get("redelivered"), None if i == 0 else "true",
           "redelivered on delivery %d" % (i + 1))
        c.nack(m.headers["ack"])
    quiet(cl)
    t1 = now_ms()
    disconnect(c, cl)
    gone = "/queue/mr.py-gone-" + RUN
    p, pl = connect(port, version, "mr-pub")
    p.send(gone, "gone", receipt="sent")
    pl.receipt("sent")
    t2 = now_ms()
    for i in range(3):
        k, kl = connect(port, "1.1" if i % 2 else "1.2", "leaver%d" % i)
        subscribe(k, kl, gone, "g", ack="client")
        eq(kl.next_message(what="delivery %d to a leaving consumer" % (i + 1)).body, "gone",
           "body")
        disconnect(k, kl, "bye-leaver%d" % i)
    empty(port, gone, "gone")
    t3 = now_ms()
    d, dl = connect(port, version, "mr-dlq")
    subscribe(d, dl, dlq, "dead")
    m = dl.next_message()
    eq(m.body, "again", "first dead letter")
    check_dead_letter(m, "max-redeliveries", dest, t0, t1)
    eq(m.headers.get("x-k"), "v", "custom header")
    m = dl.next_message()
    eq(m.body, "gone", "second dead letter")
    check_dead_letter(m, "max-redeliveries", gone, t2, t3)
    quiet(dl)
    disconnect(d, dl)
    disconnect(p, pl)
    return "three NACKs, and three consumers leaving unacked: dead-lettered as max-redeliveries"


def sc_selectors(port, version):
    """Selectors on a topic and a queue; a malformed one and one on a
    durable subscription reach on_error."""
    topic = "/topic/py-sel-" + RUN
    s, sl = connect(port, version, "sel-topic")
    sels = {
        "cheap": "price < 10 AND region IN ('eu', 'us')",
        "likes": "code LIKE 'A\\_%' ESCAPE '\\'",
        "prio": "JMSPriority > 5",
        "nullv": "vip IS NULL AND NOT (qty BETWEEN 1 AND 5)",
    }
    for sid, sel in sels.items():
        subscribe(s, sl, topic, sid, selector=sel)
    p, pl = connect(port, version, "sel-pub")
    p.send(topic, "t1", headers={"price": "5", "region": "eu", "code": "A_1", "priority": "9",
                                 "qty": "7"})
    p.send(topic, "t2", headers={"price": "5", "region": "asia", "code": "AB", "qty": "3",
                                 "vip": "yes"})
    p.send(topic, "t3", headers={"price": "50", "region": "us", "code": "A_2", "priority": "2"})
    p.send(topic, "t4", headers={"price": "8", "region": "us", "code": "X", "qty": "0"})
    got = {}
    for i in range(7):
        m = sl.next_message(what="topic message %d of 7" % (i + 1))
        got.setdefault(m.headers.get("subscription"), []).append(m.body)
    quiet(sl)
    eq(got, {"cheap": ["t1", "t4"], "likes": ["t1", "t3"], "prio": ["t1"], "nullv": ["t1", "t4"]},
       "messages per selector")

    queue = "/queue/py-sel-" + RUN
    red, rl = connect(port, version, "red")
    subscribe(red, rl, queue, "red", selector="color = 'red'")
    heavy, hl = connect(port, "1.1", "heavy")
    subscribe(heavy, hl, queue, "heavy", selector="weight > 100")
    for body, color, weight in (("a", "red", "50"), ("b", "blue", "500"), ("c", "green", "10"),
                                ("d", "red", "20"), ("e", "yellow", "101")):
        p.send(queue, body, headers={"color": color, "weight": weight})
    eq([rl.next_message().body for _ in range(2)], ["a", "d"], "red consumer")
    eq([hl.next_message().body for _ in range(2)], ["b", "e"], "heavy consumer")
    a, al = connect(port, version, "any")
    subscribe(a, al, queue, "any")
    eq(al.next_message().body, "c", "what no selector took")
    for col in (rl, hl, al):
        quiet(col, 0.1)

    b, bl = connect(port, version, "bad-selector")
    b.subscribe(queue, id="bad", headers={"selector": "color = 'red' AND ("})
    expect_error_and_close(bl, "invalid selector: position 20: unexpected end")
    dur, dl = connect(port, version, "durable", connect_kw={"headers": {"client-id": "py-" + RUN}})
    dur.subscribe(topic, id="dur", headers={"activemq.subscriptionName": "news",
                                            "selector": "qty = 1"})
    expect_error_and_close(dl, "selectors on durable subscriptions are not supported")
    return ("topic: IN, LIKE ESCAPE, JMSPriority, IS NULL, BETWEEN; "
            "queue: two selective + one plain; errors")


def scenarios():
    return {
        "expiry": (sc_expiry, "1.1"),
        "bad_headers": (sc_bad_headers, "1.2"),
        "priority": (sc_priority, "1.0"),
        "dead_letter": (sc_dead_letter, None),
        "max_redeliveries": (sc_max_redeliveries, "1.2"),
        "selectors": (sc_selectors, "1.2"),
    }


if __name__ == "__main__":
    sys.exit(run("stomp.py-lifetime", scenarios()))
