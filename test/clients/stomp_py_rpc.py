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

import re
import sys
import time

from stomp_py_helper import RUN, Collector, check, connect, eq, run

N = 200                # requests per client
REPLY_RE = re.compile(r"^/reply-queue/eft\.gen-[A-Za-z0-9_-]{22}$")


def compute(body):
    """What the service answers: the number plus one."""
    return str(int(body) + 1)


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


def start_service(port, version, queue):
    conn, svc = connect(port, version, "service", listener=Service)
    conn.subscribe(queue, id="rpc-service", ack="auto", receipt="svc-sub")
    svc.receipt("svc-sub")
    return conn, svc


def run_client(port, version, queue, sub_first, tag, n=N, first=1):
    """n requests from one client; returns (client collector, expected by cid)."""
    conn, col = connect(port, version, tag)
    if sub_first:
        conn.subscribe("/temp-queue/replies", id="replies-" + tag, ack="auto", receipt="sub")
        col.receipt("sub")
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


if __name__ == "__main__":
    sys.exit(run("stomp.py-rpc", scenarios()))
