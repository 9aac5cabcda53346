"""Queues spread over several JetStream streams (issue 26).

Real nats-server -js and eftd nodes on loopback ports, as in test_cluster.py
(whose ClusterBase this uses):
- queues land in the streams EFT_Q_<p> their names hash to, and each
  message is delivered once across consumers on two nodes;
- a NATS account that has the old single stream EFT_QUEUES is refused with
  one line naming it, and queues get an ERROR while topics still work;
- a node whose cluster-queue-streams differs from the account's is refused
  the same way;
- libnats's threads run SCHED_BATCH, the loop's thread not.
"""

import json
import os
import threading
import time
import unittest

import harness
from harness import SLOW, Broker, subscribe, wait_for
from test_admin import get_json, scrape
from test_admin import request as admin_request
from natsharness import (consumers, queue_partition, queue_streams, request, stream_info,
                         stream_messages)
from test_cluster import ACK_WAIT_MS, ClusterBase, node_config, read_bodies, send

# Names that land on every partition of 4 (checked in the test itself).
QUEUES = ["orders", "invoices", "mail", "audit", "q1", "q2", "q3", "q4"]


def raw_json(port, subject, obj=None):
    return json.loads(request(port, subject, b"" if obj is None else json.dumps(obj).encode()))


def short_of(everything, n, port, streams, nodes):
    """What a failed run lacks, per queue, with what JetStream's consumers
    report and where the nodes' logs are kept."""
    lines = []
    for q in QUEUES:
        want = n + (1 if q == QUEUES[-1] else 0)
        have = sum(1 for body in set(everything) if body.rsplit("-", 1)[0] == q or
                   (body == "last" and q == QUEUES[-1]))
        if have != want:
            lines.append("%s: %d of %d" % (q, have, want))
    for s in queue_streams(port):
        for c in consumers(port, s):
            lines.append("%s %s: delivered %s, ack floor %s, pending %s, ack pending %s, "
                         "waiting %s" % (s, c["name"], c["delivered"]["stream_seq"],
                                         c["ack_floor"]["stream_seq"], c["num_pending"],
                                         c["num_ack_pending"], c["num_waiting"]))
    lines += ["eftd log: %s" % x.log_path for x in nodes]
    return "\n".join(lines)


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
            # no RECEIPT awaited: the first queue's MESSAGEs can come before
            # the next SUBSCRIBE's RECEIPT
            for i, q in enumerate(QUEUES):
                c.send_frame("SUBSCRIBE", [("destination", "/queue/" + q), ("id", str(i)),
                                           ("ack", "client-individual")])
            deadline = time.time() + 60
            while len(got["a"]) + len(got["b"]) < total and time.time() < deadline:
                try:
                    f = c.read_frame(0.5)
                except Exception:
                    continue
                self.assertEqual(f.command, "MESSAGE", f)
                got[key].append(f.body.decode())
                c.send_frame("ACK", [("id", f["ack"])])

        threads = [threading.Thread(target=consume, args=(x, k)) for x, k in ((a, "a"), (b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        everything = got["a"] + got["b"]
        if len(set(everything)) != total:
            for x in (a, b):
                x.keep_log = True
        self.assertEqual(len(set(everything)), total, short_of(everything, n, port, streams,
                                                               (a, b)))
        self.assertEqual(len(everything), total, "a message came twice")
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


def sched_policy(pid, tid):
    """A thread's scheduling policy (/proc stat field 41): 0 SCHED_OTHER, 3 SCHED_BATCH."""
    with open("/proc/%d/task/%d/stat" % (pid, tid)) as f:
        return int(f.read().rsplit(")", 1)[1].split()[38])


class ThreadsTest(ClusterBase):
    @unittest.skipIf(harness.WRAPPER, "the wrapper's threads, not eftd's")
    def test_libnats_threads_run_batch_and_the_loop_does_not(self):
        # libnats's collector thread, woken for each batch of natsMsgs the
        # loop destroys, must not preempt the loop (cluster.c, open_nats):
        # the threads libnats started are SCHED_BATCH, the loop's is not.
        a = self.node("a")
        pid = a.proc.pid
        tids = sorted(int(t) for t in os.listdir("/proc/%d/task" % pid))
        self.assertGreaterEqual(len(tids), 3, tids)
        self.assertEqual(sched_policy(pid, pid), 0)
        others = {t: sched_policy(pid, t) for t in tids if t != pid}
        self.assertEqual(set(others.values()), {3}, others)
