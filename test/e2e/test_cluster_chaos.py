"""The cluster's kill -9 trials (issue 26): nats-server killed under load.

In make test once (each run both tests, about 30 s); `make cluster-chaos
CHAOS_ROUNDS=N` runs them N times.  They check that every RECEIPTed message
is delivered, that no second copy comes without redelivered:true, and that
the streams hold nothing once everything was consumed.  What they found is
in docs/cluster.md ("After a NATS outage").

- kill -9 of the one nats-server, 3 times, under load from producers and
  consumers on two nodes;
- kill -9 of a nats-server that leads queue streams, 3 servers, R3.
"""

import socket
import threading
import time

from harness import RawClient, wait_for
from natsharness import queue_partition, stream_info, stream_messages
from test_cluster import ACK_WAIT_MS, ClusterBase


class Load:
    """Producers and consumers on several nodes while NATS is killed under
    them: what was RECEIPTed, and every copy each consumer got."""

    def __init__(self, nodes, queues, batch=10):
        self.nodes, self.queues, self.batch = nodes, queues, batch
        self.producers_stop = threading.Event()
        self.consumers_stop = threading.Event()
        self.lock = threading.Lock()
        self.confirmed = set()       # bodies whose RECEIPT came
        self.copies = {}             # body -> [redelivered flag of each copy]
        self.producers = [threading.Thread(target=self.produce, args=(n, "p%d" % i))
                          for i, n in enumerate(nodes)]
        self.consumers = [threading.Thread(target=self.consume, args=(n,)) for n in nodes]

    @staticmethod
    def connect(node):
        c = RawClient(node.port, timeout=10)
        c.connect("1.2")
        return c

    def keep_connected(self, node, stop, seconds, step, on_connect=lambda c: None):
        """step(c) again and again, until stop is set or `seconds` passed, on
        a connection to node that is made again after any error (an ERROR,
        cluster unavailable, closes it)."""
        c = None
        deadline = time.time() + seconds
        while not stop.is_set() and time.time() < deadline:
            try:
                if c is None:
                    c = self.connect(node)
                    on_connect(c)
                step(c)
            except Exception:
                if c is not None:
                    c.close()
                c = None
                time.sleep(0.1)
        if c is not None:
            c.close()

    def produce(self, node, tag):
        """Batches of SENDs, the last of each asking for a RECEIPT, which
        answers for the batch."""
        seq = 0

        def batch(c):
            nonlocal seq
            bodies = []
            for i in range(self.batch):
                body = "%s-%d" % (tag, seq)
                seq += 1
                bodies.append(body)
                h = [("destination", "/queue/" + self.queues[seq % len(self.queues)])]
                if i == self.batch - 1:
                    h.append(("receipt", body))
                c.send_frame("SEND", h, body.encode())
            f = c.read_frame(10)
            if f.command != "RECEIPT" or f["receipt-id"] != bodies[-1]:
                raise OSError("got %s" % f.command)
            with self.lock:
                self.confirmed.update(bodies)

        self.keep_connected(node, self.producers_stop, 120, batch)

    def consume(self, node):
        def subscribe(c):
            for i, q in enumerate(self.queues):
                c.send_frame("SUBSCRIBE", [("destination", "/queue/" + q), ("id", str(i)),
                                           ("ack", "client-individual"),
                                           ("prefetch-count", "50")])

        def one(c):
            try:
                f = c.read_frame(0.3)
            except socket.timeout:
                return
            if f.command != "MESSAGE":
                raise OSError("got %s" % f.command)
            with self.lock:
                self.copies.setdefault(f.body.decode(), []).append(
                    f.get("redelivered") == "true")
            c.send_frame("ACK", [("id", f["ack"])])

        self.keep_connected(node, self.consumers_stop, 240, one, subscribe)

    def start(self):
        for t in self.consumers + self.producers:
            t.start()

    def finish(self, limit=90, quiet=3.0, drained=lambda: True):
        """Stop producing, then consume until every RECEIPTed body came,
        nothing more for `quiet` seconds, and drained() (what JetStream
        holds is nothing: a message it kept without delivering it, or
        delivering it again, keeps that false), or until `limit` passed."""
        self.producers_stop.set()
        for t in self.producers:
            t.join(30)
        confirmed = set(self.confirmed)
        deadline = time.time() + limit
        last, quiet_since = -1, time.time()
        while time.time() < deadline:
            with self.lock:
                have = set(self.copies)
                n = sum(len(v) for v in self.copies.values())
            if n != last:
                last, quiet_since = n, time.time()
            if confirmed <= have and time.time() - quiet_since > quiet and drained():
                break
            time.sleep(0.2)
        self.consumers_stop.set()
        for t in self.consumers:
            t.join(30)
        return confirmed


def promises_kept(case, load, confirmed, least, port):
    """After a Load: every RECEIPTed body was delivered, no body came twice
    without redelivered:true on all but one copy, and JetStream (at port)
    holds nothing once everything was consumed."""
    case.assertGreater(len(confirmed), least, "too little load to mean anything")
    missing = confirmed - set(load.copies)
    case.assertEqual(missing, set(), "RECEIPTed and never delivered: %d" % len(missing))
    dups = sum(1 for f in load.copies.values() if len(f) > 1)
    unmarked = {body: flags for body, flags in load.copies.items() if flags.count(False) > 1}
    case.assertEqual(unmarked, {}, "delivered again without redelivered:true "
                     "(%d bodies delivered more than once)" % dups)
    wait_for(lambda: stream_messages(port) == 0, 30,
             "the streams to hold nothing once everything was consumed")


class KillUnderLoadTest(ClusterBase):
    """kill -9 of nats-server under load, then a restart, 3 times."""

    def test_kill9_nats_under_load_single_server(self):
        a = self.node("a", "cluster-queue-streams = 4\n")
        b = self.node("b", "cluster-queue-streams = 4\n")
        port = self.nats[0].port
        load = Load([a, b], ["k1", "k2", "k3", "k4"])
        load.start()
        try:
            nats = self.nats[0]
            for k in range(3):
                time.sleep(1.5)
                nats.kill()
                time.sleep(0.3)
                nats.start()
                self.wait_connected((a, b), k + 2)
            time.sleep(1.5)
        finally:
            # quiet past the ack wait: a delivery whose ACK the outage lost
            # comes again (redelivered) after it, and is acknowledged then
            confirmed = load.finish(quiet=ACK_WAIT_MS / 1000 + 2,
                                    drained=lambda: stream_messages(port) == 0)
        promises_kept(self, load, confirmed, 1000, port)


class KillLeaderR3Test(ClusterBase):
    """3 nats-servers, R3 queue streams: kill -9 of a server that leads some
    of them, under load, then a restart."""
    nats_nodes = 3

    def leaders(self, port, streams):
        out = {}
        for p in range(streams):
            info = stream_info(port, "EFT_Q_%d" % p)
            out["EFT_Q_%d" % p] = (info.get("cluster") or {}).get("leader")
        return out

    def test_kill9_of_a_nats_server_leading_queue_streams_r3(self):
        extra = "cluster-replicas = 3\ncluster-queue-streams = 4\n"
        a = self.node("a", extra, nats=[self.nats[0], self.nats[1]])
        b = self.node("b", extra, nats=[self.nats[1], self.nats[2]])
        # queues on all 4 partitions, both nodes producing and consuming
        load = Load([a, b], ["orders", "invoices", "mail", "q1"])
        self.assertEqual({queue_partition(q, 4) for q in load.queues}, {0, 1, 2, 3})
        port = self.nats[2].port
        load.start()
        try:
            time.sleep(1.5)
            leaders = self.leaders(self.nats[2].port, 4)
            victim = next(n for n in self.nats if n.name in leaders.values())
            victim.kill()
            time.sleep(1.5)
            victim.start()
            time.sleep(2)
        finally:
            confirmed = load.finish(quiet=ACK_WAIT_MS / 1000 + 2,
                                    drained=lambda: stream_messages(port) == 0)
        promises_kept(self, load, confirmed, 500, port)
