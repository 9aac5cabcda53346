"""Queues spread over several JetStream streams (issue 26).

Real nats-server -js and eftd nodes on loopback ports, as in test_cluster.py
(whose ClusterBase this uses):
- queues land in the streams EFT_Q_<p> their names hash to, and each
  message is delivered once across consumers on two nodes;
- a NATS account that has the old single stream EFT_QUEUES is refused with
  one line naming it, and queues get an ERROR while topics still work;
- a node whose cluster-queue-streams differs from the account's is refused
  the same way.
"""

import json
import socket
import threading
import time

from harness import SLOW, Broker, RawClient, subscribe, wait_for
from test_admin import get_json, scrape
from test_admin import request as admin_request
from natsharness import queue_partition, queue_streams, request, stream_info, stream_messages
from test_cluster import ACK_WAIT_MS, ClusterBase, node_config, read_bodies, send

# Names that land on every partition of 4 (checked in the test itself).
QUEUES = ["orders", "invoices", "mail", "audit", "q1", "q2", "q3", "q4"]


def raw_json(port, subject, obj=None):
    return json.loads(request(port, subject, b"" if obj is None else json.dumps(obj).encode()))


class PartitionTest(ClusterBase):
    def refused_node(self, name, extra, line):
        """A node started against an account it must refuse: its one line."""
        b = Broker(config=node_config(self.nats, name, extra))
        self.nodes.append(b)
        b.start()
        wait_for(lambda: line in b.read_log(), 30, "node %s to refuse the queue streams" % name)
        return b

    def expect_queue_refused(self, b):
        c = self.client(b)
        c.send_frame("SEND", [("destination", "/queue/x"), ("receipt", "r")], b"m")
        frames, closed = c.drain(10)
        self.assertTrue(closed, frames)
        self.assertEqual([f.command for f in frames], ["ERROR"], frames)
        self.assertEqual(frames[0]["message"], "cluster unavailable")
        c = self.client(b)
        c.send_frame("SUBSCRIBE", [("destination", "/queue/x"), ("id", "1"),
                                   ("receipt", "s")])
        frames, closed = c.drain(10)
        self.assertEqual([f.command for f in frames], ["ERROR"], frames)

    def expect_topics_work(self, b):
        sub = self.client(b)
        subscribe(sub, "/topic/still", sid="t")
        pub = self.client(b)
        send(pub, "/topic/still", "here", rid="p")
        pub.expect("RECEIPT", 10)
        self.assertEqual(read_bodies(sub, 1, 10), ["here"])

    def test_queues_spread_over_streams_each_delivered_once_across_two_nodes(self):
        streams = 4
        self.assertEqual({queue_partition(q, streams) for q in QUEUES}, set(range(streams)))
        a = self.node("a", "cluster-queue-streams = %d\n" % streams)
        b = self.node("b", "cluster-queue-streams = %d\n" % streams)
        port = self.nats[0].port
        self.assertEqual(queue_streams(port), ["EFT_Q_%d" % p for p in range(streams)])
        n = 300
        p = self.client(a)
        for q in QUEUES:
            for i in range(n):
                send(p, "/queue/" + q, "%s-%d" % (q, i))
        send(p, "/queue/" + QUEUES[-1], "last", rid="sent")
        p.expect("RECEIPT", 30)
        # Each queue waits in its own partition's stream, on its own subject.
        for q in QUEUES:
            part = queue_partition(q, streams)
            info = stream_info(port, "EFT_Q_%d" % part, "eft.q.%d.>" % part)
            want = n + (1 if q == QUEUES[-1] else 0)
            self.assertEqual(info["state"]["subjects"].get("eft.q.%d.%s" % (part, q)), want,
                             (q, info["state"]))
            self.assertEqual(info["config"]["description"],
                             "eft queues: partition %d of %d" % (part, streams))
        total = len(QUEUES) * n + 1
        got = {"a": [], "b": []}

        def consume(node, key):
            c = self.client(node)
            for i, q in enumerate(QUEUES):
                subscribe(c, "/queue/" + q, sid=str(i), ack="client-individual")
            deadline = time.time() + 60
            while len(got["a"]) + len(got["b"]) < total and time.time() < deadline:
                try:
                    f = c.read_frame(0.5)
                except Exception:
                    continue
                got[key].append(f.body.decode())
                c.send_frame("ACK", [("id", f["ack"])])

        threads = [threading.Thread(target=consume, args=(x, k)) for x, k in ((a, "a"), (b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        everything = got["a"] + got["b"]
        self.assertEqual(len(everything), total)
        self.assertEqual(len(set(everything)), total, "a message came twice")
        self.assertGreater(len(got["a"]), 0)
        self.assertGreater(len(got["b"]), 0)
        wait_for(lambda: stream_messages(port) == 0, 10, "every ACK to reach JetStream")

    def test_old_single_stream_is_refused_with_one_line(self):
        port = self.nats[0].port
        made = raw_json(port, "$JS.API.STREAM.CREATE.EFT_QUEUES", {
            "name": "EFT_QUEUES", "subjects": ["eft.q.>"], "retention": "workqueue",
            "storage": "file"})
        self.assertNotIn("error", made)
        for i in range(3):
            request(port, "eft.q.old", b"old %d" % i)
        line = "the NATS account has the old queue stream EFT_QUEUES (3 messages, 0 consumers)"
        a = self.refused_node("a", "", line)
        self.expect_queue_refused(a)
        self.expect_topics_work(a)
        # Nothing of EFT_QUEUES was touched, and no partition took its place.
        self.assertEqual(stream_messages(port, "EFT_QUEUES"), 3)
        self.assertEqual(queue_streams(port), [])
        self.assertEqual(a.read_log().count("old queue stream EFT_QUEUES"), 1)
        # Once the operator removes it, the node takes its queues without a restart.
        gone = raw_json(port, "$JS.API.STREAM.DELETE.EFT_QUEUES")
        self.assertTrue(gone.get("success"), gone)
        wait_for(lambda: "queue streams EFT_Q_0.." in a.read_log(), 30, "the partitions")
        c = self.client(a)
        subscribe(c, "/queue/x", sid="q")
        send(c, "/queue/x", "now", rid="r")
        c.expect("RECEIPT", 10)
        self.assertEqual(read_bodies(c, 1, 10), ["now"])

    def test_a_node_with_another_partition_count_is_refused(self):
        a = self.node("a", "cluster-queue-streams = 4\n")
        line = ("this node has cluster-queue-streams = 8 but the NATS account's queue streams "
                "were made with 4")
        b = self.refused_node("b", "cluster-queue-streams = 8\n", line)
        self.expect_queue_refused(b)
        self.expect_topics_work(b)
        self.assertEqual(b.read_log().count("cluster-queue-streams = 8 but"), 1)
        # a is not disturbed, and b made none of its own streams
        self.assertEqual(queue_streams(self.nats[0].port), ["EFT_Q_%d" % p for p in range(4)])
        c = self.client(a)
        subscribe(c, "/queue/x", sid="q")
        send(c, "/queue/x", "fine", rid="r")
        c.expect("RECEIPT", 10)
        self.assertEqual(read_bodies(c, 1, 10), ["fine"])


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

    def produce(self, node, tag):
        """Batches of SENDs, the last of each asking for a RECEIPT, which
        answers for the batch; an ERROR (cluster unavailable) closes the
        connection, and the producer connects again."""
        seq, c = 0, None
        deadline = time.time() + 120
        while not self.producers_stop.is_set() and time.time() < deadline:
            try:
                if c is None:
                    c = self.connect(node)
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
            except Exception:
                if c is not None:
                    c.close()
                c = None
                time.sleep(0.1)
        if c is not None:
            c.close()

    def consume(self, node):
        c = None
        deadline = time.time() + 240
        while not self.consumers_stop.is_set() and time.time() < deadline:
            try:
                if c is None:
                    c = self.connect(node)
                    for i, q in enumerate(self.queues):
                        c.send_frame("SUBSCRIBE", [("destination", "/queue/" + q), ("id", str(i)),
                                                   ("ack", "client-individual"),
                                                   ("prefetch-count", "50")])
                try:
                    f = c.read_frame(0.3)
                except socket.timeout:
                    continue
                if f.command != "MESSAGE":
                    raise OSError("got %s" % f.command)
                with self.lock:
                    self.copies.setdefault(f.body.decode(), []).append(
                        f.get("redelivered") == "true")
                c.send_frame("ACK", [("id", f["ack"])])
            except Exception:
                if c is not None:
                    c.close()
                c = None
                time.sleep(0.1)
        if c is not None:
            c.close()

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
                for n in (a, b):
                    wait_for(lambda: n.read_log().count("connected to NATS") >= k + 2, 30,
                             "a node to reconnect")
            time.sleep(1.5)
        finally:
            # quiet past the ack wait: a delivery whose ACK the outage lost
            # comes again (redelivered) after it, and is acknowledged then
            confirmed = load.finish(quiet=ACK_WAIT_MS / 1000 + 2,
                                    drained=lambda: stream_messages(port) == 0)
        promises_kept(self, load, confirmed, 1000, port)


def admin_node(case, name, extra):
    """A node with an admin listener (its port: ports[1]), as case.node makes them."""
    b = Broker(config=node_config(case.nats, name, extra),
               listen=[("tcp", "127.0.0.1"), ("http", "127.0.0.1")])
    case.nodes.append(b)
    b.start()
    wait_for(lambda: "queue streams EFT_Q_0.." in b.read_log(), 30,
             "node %s to see the queue streams" % name)
    return b


def queue_row(b, name):
    rows = [r for r in get_json(b.ports[1], "/api/queues") if r["name"] == name]
    return rows[0] if rows else None


class WaitingTest(ClusterBase):
    """What waits in JetStream per queue, on every node: the admin API's
    cluster_waiting and /metrics' eft_queue_messages_in_cluster, counted
    every cluster-stats-ms from STREAM.INFO subjects_filter."""

    def waiting(self, b, name="/queue/x"):
        row = queue_row(b, name)
        return row["cluster_waiting"] if row else None

    def in_cluster(self, b, name="/queue/x"):
        return scrape(b.ports[1]).get('eft_queue_messages_in_cluster{queue="%s"}' % name)

    def test_admin_and_metrics_show_what_waits_in_jetstream(self):
        a = admin_node(self, "a", "cluster-stats-ms = 200\n")
        b = admin_node(self, "b", "cluster-stats-ms = 200\n")
        off = admin_node(self, "off", "cluster-stats-ms = 0\n")
        p = self.client(a)
        for i in range(99):
            send(p, "/queue/x", "m%d" % i)
        send(p, "/queue/x", "m99", rid="sent")
        p.expect("RECEIPT", 10)
        # b has no destination /queue/x: the row is there all the same.
        wait_for(lambda: self.waiting(b) == 100, 10, "b to count 100 waiting")
        row = queue_row(b, "/queue/x")
        self.assertEqual((row["type"], row["depth"], row["consumers"]), ("queue", 0, 0), row)
        wait_for(lambda: self.in_cluster(b) == 100, 10, "b's metric to say 100")
        wait_for(lambda: self.waiting(a) == 100, 10, "a to count 100 waiting")
        m = scrape(b.ports[1])
        self.assertLess(m["eft_cluster_stats_age_seconds"], 5)
        overview = get_json(b.ports[1], "/api/overview")
        self.assertIsInstance(overview["cluster_waiting_age_ms"], int)
        # The TSV table has the column at the end.
        status, _, body = admin_request(b.ports[1], "GET", "/api/queues",
                                        {"Accept": "text/tab-separated-values"})
        self.assertEqual(status, 200, body)
        lines = body.decode().splitlines()
        self.assertEqual(lines[0].split("\t")[-1], "cluster_waiting")
        self.assertIn("/queue/x\tqueue\t0\t0\t0\t0\t0\t100", lines)
        # 40 consumed (ACKed) on a: both nodes count 60.
        c = self.client(a)
        subscribe(c, "/queue/x", sid="1", ack="client-individual")
        got = 0
        deadline = time.time() + 10 * SLOW
        while got < 40 and time.time() < deadline:
            f = c.read_frame(max(0.05, deadline - time.time()))
            self.assertEqual(f.command, "MESSAGE", f)
            got += 1
            c.send_frame("ACK", [("id", f["ack"])])
        self.assertEqual(got, 40)
        # the rest it holds unacknowledged still wait, in the stream
        wait_for(lambda: self.waiting(b) == 60, 10, "b to count 60 waiting")
        wait_for(lambda: self.waiting(a) == 60, 10, "a to count 60 waiting")
        wait_for(lambda: self.in_cluster(a) == 60 and self.in_cluster(b) == 60, 10,
                 "the metrics to say 60")
        # cluster-stats-ms = 0: nothing counted, null (and no samples).
        self.assertIsNone(get_json(off.ports[1], "/api/overview")["cluster_waiting_age_ms"])
        self.assertIsNone(self.in_cluster(off))
        self.assertNotIn("eft_cluster_stats_age_seconds", scrape(off.ports[1]))
        d = self.client(off)
        subscribe(d, "/queue/other", sid="1")
        self.assertIsNone(self.waiting(off, "/queue/other"))
        # NATS gone: not known any more.
        self.nats[0].kill()
        wait_for(lambda: get_json(b.ports[1], "/api/overview")["cluster_waiting_age_ms"] is None,
                 10, "b to see NATS gone")
        self.assertIsNone(self.waiting(b))
        self.assertIsNone(self.in_cluster(b))


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
