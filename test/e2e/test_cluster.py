"""Several eftd nodes as one broker on NATS JetStream (cluster = ...).

Real processes on loopback ports: nats-server -js (one, or a 3-node NATS
cluster with R3 streams) and two or three eftd nodes, each test with its
own.  Over TCP only: the transport to the client is not what is tested.
- queue messages sent on one node reach consumers on two nodes, each once,
  checksummed (20,000 of them);
- topics fan out across nodes, once per subscriber;
- wildcard topic subscriptions on one node get exactly what another node
  publishes, once each (a '#' before the end filtered on the node), durable
  ones too; a durable one with '#' before the end and queue patterns are
  refused;
- RPC through temp-queues with the client and server on different nodes;
- kill -9 of a node that holds unacknowledged messages: another node gets
  them, redelivered;
- NACK on one node: another node may take it;
- nats-server restarted: eftd reconnects, and nothing that had a RECEIPT is
  lost; while it is down SEND and SUBSCRIBE get an ERROR;
- a 3-node NATS cluster with R3: one NATS node killed loses nothing;
- a durable subscription has one live subscriber cluster-wide (a lease in
  JetStream), in both dialects; a kill -9'd node's lease runs out after the
  ack wait, a restarted node takes its own back at once, and the holder
  claims it again when NATS comes back;
- NATS unreachable at start: one line, retries, and it carries on when NATS
  comes;
- a node cut off from NATS past the ack wait lets go of what it held: the
  copy another node gets is the only live one;
- a SEND published again after a lost pub ack and a nats-server restart
  (stored twice) comes the second time with redelivered:true;
- settings that cannot work together stop eftd with one line.
"""

import hashlib
import json
import os
import subprocess
import threading
import time
import unittest
import urllib.request

import harness
from clientscript import HAVE_STOMP_PY
from harness import Broker, RawClient, SLOW, subscribe, wait_for
from natsharness import (NATS_SERVER, NATS_SKIP, NatsServer, Proxy, consumers, nats_cluster,
                         queue_partition, request, stream_last_seq, stream_messages,
                         subscribers)

TCP_ONLY = unittest.skipIf(harness.TRANSPORT == "tls",
                           "cluster: the client transport is covered over tcp")
# Scaled: the tests tell "given back at once" from "after the ack wait" by
# the clock, and a slow build must not blur the two.
ACK_WAIT_MS = 3000 * SLOW


def node_config(nats, name, extra=""):
    urls = ",".join(n.url for n in (nats if isinstance(nats, list) else [nats]))
    return ("cluster = %s\nnode-name = %s\ncluster-ack-wait-ms = %d\n%s"
            % (urls, name, ACK_WAIT_MS, extra))


def send(c, dest, body, headers=(), rid=None):
    h = [("destination", dest)] + list(headers)
    if rid is not None:
        h.append(("receipt", rid))
    c.send_frame("SEND", h, body.encode() if isinstance(body, str) else body)


def read_bodies(c, n, timeout, ack=False):
    """n MESSAGE bodies from c (ACKing each if ack), or fewer by the timeout."""
    out = []
    deadline = time.time() + timeout * SLOW
    while len(out) < n and time.time() < deadline:
        try:
            f = c.read_frame(max(0.05, deadline - time.time()))
        except Exception:
            break
        if f.command != "MESSAGE":
            raise AssertionError("expected MESSAGE, got %r" % f)
        out.append(f.body.decode())
        if ack:
            c.send_frame("ACK", [("id", f["ack"])])
    return out


@TCP_ONLY
@unittest.skipUnless(NATS_SERVER, NATS_SKIP)
class ClusterBase(unittest.TestCase):
    nats_nodes = 1

    def setUp(self):
        self.clients = []
        self.nodes = []
        if self.nats_nodes == 1:
            self.nats = [NatsServer()]
        else:
            self.nats = nats_cluster(self.nats_nodes)
        for n in self.nats:
            self.addCleanup(n.cleanup)
            n.start(wait=False)
        for n in self.nats:
            n.wait_ready()

    def tearDown(self):
        # nodes stop cleanly (exit 0, no sanitizer or valgrind report) while
        # NATS still runs: its servers stop in the cleanups, after this
        for c in self.clients:
            c.close()
        harness.finish_all(self.nodes)

    def node(self, name, extra="", nats=None):
        b = Broker(config=node_config(nats or self.nats, name, extra))
        self.nodes.append(b)
        b.start()
        wait_for(lambda: "queue streams EFT_Q_0.." in b.read_log(), 30,
                 "node %s to see the queue stream" % name)
        return b

    @staticmethod
    def wait_connected(nodes, times):
        """Until each node's log says it connected to NATS `times` times."""
        for n in nodes:
            wait_for(lambda: n.read_log().count("connected to NATS") >= times, 30,
                     "a node to connect to NATS %d times" % times)

    def client(self, b, version="1.2"):
        c = RawClient(b.port, timeout=10)
        self.clients.append(c)
        c.connect(version)
        return c


class QueueTest(ClusterBase):
    def test_20000_messages_from_a_reach_a_and_b_each_once_checksummed(self):
        a, b = self.node("a"), self.node("b")
        n = 20000
        ca, cb = self.client(a), self.client(b)
        subscribe(ca, "/queue/work", sid="a")                      # auto
        subscribe(cb, "/queue/work", sid="b", ack="client-individual",
                  headers=[("prefetch-count", "100")])
        got = {"a": [], "b": []}

        def consume(c, key, ack):
            # until a and b have all n between them (each alone never has:
            # it used to wait out the whole timeout, 10 min under valgrind)
            deadline = time.time() + 60 * SLOW
            while len(got["a"]) + len(got["b"]) < n and time.time() < deadline:
                got[key] += read_bodies(c, 1, 0.5, ack=ack)

        threads = [threading.Thread(target=consume, args=(ca, "a", False)),
                   threading.Thread(target=consume, args=(cb, "b", True))]
        for t in threads:
            t.start()
        p = self.client(a)
        sent = hashlib.sha256()
        for i in range(n):
            body = "m%05d" % i
            sent.update(body.encode())
            send(p, "/queue/work", body, rid="done" if i == n - 1 else None)
        p.expect("RECEIPT", 30 * SLOW)
        for t in threads:
            t.join(90 * SLOW)
        both = got["a"] + got["b"]
        self.assertEqual(len(both), n, "a %d + b %d" % (len(got["a"]), len(got["b"])))
        self.assertEqual(len(set(both)), n, "a message was delivered twice")
        seen = hashlib.sha256()
        for body in sorted(both):
            seen.update(body.encode())
        self.assertEqual(seen.hexdigest(), sent.hexdigest())
        self.assertGreater(len(got["a"]), 0)
        self.assertGreater(len(got["b"]), 0)
        # all acknowledged: the work queue is empty
        wait_for(lambda: stream_messages(self.nats[0].port) == 0, 10, "the stream to empty")

    def test_receipt_means_stored_and_headers_survive(self):
        a, b = self.node("a"), self.node("b")
        p = self.client(a)
        send(p, "/queue/q.1 x", "hello", [("x-k", "v:1"), ("priority", "7"),
                                           ("persistent", "true")], rid="r")
        p.expect("RECEIPT")
        self.assertEqual(stream_messages(self.nats[0].port), 1)
        c = self.client(b, "1.1")
        subscribe(c, "/queue/q.1 x")
        f = c.expect("MESSAGE", 10)
        self.assertEqual(f.body, b"hello")
        self.assertEqual(f["destination"], "/queue/q.1 x")
        self.assertEqual(f["x-k"], "v\\c1")  # on the wire, escaped as 1.1 has it
        self.assertEqual(f["priority"], "7")
        self.assertIsNone(f.get("redelivered"))

    def test_nack_goes_back_and_another_node_may_take_it(self):
        a, b = self.node("a"), self.node("b")
        ca = self.client(a)
        subscribe(ca, "/queue/n", ack="client-individual")
        p = self.client(b)
        send(p, "/queue/n", "once", rid="r")
        p.expect("RECEIPT")
        f = ca.expect("MESSAGE", 10)
        t0 = time.time()    # just after the delivery, which the ack wait runs from
        ca.close()  # gone without an ACK: given back at once, not after the ack wait
        cb = self.client(b)
        subscribe(cb, "/queue/n", ack="client-individual")
        g = cb.expect("MESSAGE", 10)
        self.assertEqual(g.body, f.body)
        self.assertEqual(g["redelivered"], "true")
        # at once: up to a pull's expiry (1 s) if a's last pull takes it back first
        self.assertLess(time.time() - t0, ACK_WAIT_MS / 1000.0 * 2 / 3, "waited for the ack wait")
        cb.send_frame("NACK", [("id", g["ack"])])
        h = cb.expect("MESSAGE", 10)
        self.assertEqual(h.body, b"once")
        cb.send_frame("ACK", [("id", h["ack"])], )
        send(cb, "/queue/sync", "x", rid="sync")
        cb.expect("RECEIPT")
        wait_for(lambda: stream_messages(self.nats[0].port) == 1, 5, "the ack to land")

    def test_a_clean_stop_gives_back_at_once(self):
        a, b = self.node("a"), self.node("b")
        cb = self.client(b)
        subscribe(cb, "/queue/stop", ack="client-individual",
                  headers=[("prefetch-count", "5")])
        p = self.client(a)
        for i in range(30):
            send(p, "/queue/stop", "s%d" % i, rid="r" if i == 29 else None)
        p.expect("RECEIPT")
        held = read_bodies(cb, 5, 10)  # 5 unacknowledged; more may be buffered on b
        self.assertEqual(len(held), 5)
        # (the stop waits ~2 s for cb, still open after its ERROR; what b
        # held goes back as it ends)
        self.assertEqual(b.stop(), 0, b.read_log()[-2000:])
        self.assertIn("stopped:", b.read_log())
        t0 = time.time()
        ca = self.client(a)
        subscribe(ca, "/queue/stop")
        got = read_bodies(ca, 30, 10)
        self.assertEqual(sorted(got), sorted("s%d" % i for i in range(30)))
        # b renewed its hold (+WPI) up to a third of the ack wait before it
        # ended: the ack wait would give them back 2/3 of it after t0 at the soonest
        self.assertLess(time.time() - t0, ACK_WAIT_MS / 1000.0 / 2,
                        "given back by the ack wait, not by the stop")

    def test_a_slow_consumer_keeps_its_message_past_the_ack_wait(self):
        a, b = self.node("a"), self.node("b")
        cb = self.client(b)
        subscribe(cb, "/queue/slow", ack="client-individual", headers=[("prefetch-count", "1")])
        p = self.client(a)
        send(p, "/queue/slow", "slow", rid="r")
        p.expect("RECEIPT")
        f = cb.expect("MESSAGE", 10)
        ca = self.client(a)
        subscribe(ca, "/queue/slow")
        # more than twice the ack wait (scaled already): still held by b alone (+WPI)
        ca.expect_nothing_for(2.5 * ACK_WAIT_MS / 1000.0)
        cb.send_frame("ACK", [("id", f["ack"])])
        send(cb, "/queue/sync", "x", rid="sync")
        cb.expect("RECEIPT", 10)
        ca.expect_nothing(0.5)
        wait_for(lambda: stream_messages(self.nats[0].port) == 1, 10, "the ACK to land")

    def test_kill9_of_a_node_holding_unacknowledged_messages(self):
        a, b = self.node("a"), self.node("b")
        cb = self.client(b)
        subscribe(cb, "/queue/held", ack="client-individual")
        p = self.client(a)
        for i in range(50):
            send(p, "/queue/held", "h%d" % i, rid="r" if i == 49 else None)
        p.expect("RECEIPT")
        held = read_bodies(cb, 50, 10)
        self.assertEqual(len(held), 50)
        b.crash()  # kill -9: nothing given back, JetStream's ack wait does it
        ca = self.client(a)
        subscribe(ca, "/queue/held", ack="client-individual")
        again = []
        deadline = time.time() + 15 * SLOW
        while len(again) < 50 and time.time() < deadline:
            f = ca.read_frame(15 * SLOW)
            self.assertEqual(f["redelivered"], "true")
            again.append(f.body.decode())
            ca.send_frame("ACK", [("id", f["ack"])])
        self.assertEqual(sorted(again), sorted(held))


class LimitsTest(ClusterBase):
    def test_a_message_over_nats_max_payload_gets_an_error(self):
        a = self.node("a")
        c = self.client(a)
        send(c, "/queue/big", b"x" * (2 << 20), rid="r")
        f = c.expect_error_and_close(10)
        self.assertEqual(f["message"], "message too large for the cluster")
        ok = self.client(a)
        send(ok, "/queue/big", "small", rid="r")
        ok.expect("RECEIPT", 10)

    def test_a_transaction_with_a_send_over_max_payload_is_refused_whole(self):
        a = self.node("a")
        consumer = self.client(a)
        subscribe(consumer, "/queue/x")
        c = self.client(a)
        c.send_frame("BEGIN", [("transaction", "t")])
        send(c, "/queue/x", "small", [("transaction", "t")])
        # The ERROR may come at this SEND (and close the connection before
        # the COMMIT is written) or at the COMMIT: either refuses all of it.
        try:
            send(c, "/queue/x", b"x" * (2 << 20), [("transaction", "t")])
            c.send_frame("COMMIT", [("transaction", "t"), ("receipt", "c")])
        except OSError:
            pass
        frames, closed = c.drain(10)
        self.assertTrue(closed, frames)
        self.assertEqual([f.command for f in frames], ["ERROR"], frames)
        self.assertEqual(frames[0]["message"], "message too large for the cluster")
        consumer.expect_nothing(1.0)
        # A transaction the cluster can take still commits whole.
        ok = self.client(a)
        ok.send_frame("BEGIN", [("transaction", "t")])
        send(ok, "/queue/x", "one", [("transaction", "t")])
        send(ok, "/queue/x", "two", [("transaction", "t")])
        ok.send_frame("COMMIT", [("transaction", "t"), ("receipt", "c")])
        ok.expect("RECEIPT", 10)
        self.assertEqual(sorted(read_bodies(consumer, 2, 10)), ["one", "two"])
        consumer.expect_nothing(0.3)
        self.assertNotIn("was lost", a.read_log())

    def test_a_reply_name_that_cannot_be_a_subject_is_nobodys(self):
        a, b = self.node("a"), self.node("b")
        client, server = self.client(a), self.client(b)
        subscribe(server, "/queue/svc")
        send(client, "/queue/svc", "q", [("reply-to", "/temp-queue/r")])
        name = server.expect("MESSAGE", 10)["reply-to"]
        # A name with a space or a wildcard must not reach that temp-queue
        # (a space would end the NATS subject, leaving a real one in front).
        for bad in (name + " extra", name + ".*", name + ".>", name[:-1] + "*",
                    "/reply-queue/eft.a.", "/reply-queue/eft..x"):
            send(server, bad, "wrong: " + bad, rid="r")
            server.expect("RECEIPT", 10)
        send(server, name, "right")
        self.assertEqual(client.expect("MESSAGE", 10).body, b"right")
        client.expect_nothing(0.3)
        self.assertNotIn("lost NATS", a.read_log() + b.read_log())


@unittest.skipUnless(HAVE_STOMP_PY, "python3 with stomp.py (python3-stomp) not available")
class StompPyTest(ClusterBase):
    def test_stomp_py_producer_on_a_consumer_on_b_and_rpc_back(self):
        import stomp
        a, b = self.node("a"), self.node("b")
        got, replies = [], []

        class Collect(stomp.ConnectionListener):
            def __init__(self, out):
                self.out = out

            def on_message(self, frame):
                self.out.append(frame)

        server = harness.stomp_py(b.port)
        server.set_listener("", Collect(got))
        server.connect(wait=True)
        server.subscribe("/queue/py", id="s", ack="client-individual")
        client = harness.stomp_py(a.port)
        client.set_listener("", Collect(replies))
        client.connect(wait=True)
        try:
            for i in range(10):
                client.send("/queue/py", "q%d" % i, headers={"reply-to": "/temp-queue/py"},
                            receipt="r%d" % i)
            wait_for(lambda: len(got) == 10, 10, "the server on b to get 10")
            for f in got:
                server.ack(f.headers["ack"])
                server.send(f.headers["reply-to"], "a" + f.body)
            wait_for(lambda: len(replies) == 10, 10, "the client on a to get 10 replies")
            self.assertEqual(sorted(f.body for f in got), sorted("q%d" % i for i in range(10)))
            self.assertEqual(sorted(f.body for f in replies),
                             sorted("aq%d" % i for i in range(10)))
        finally:
            client.disconnect()
            server.disconnect()
        wait_for(lambda: stream_messages(self.nats[0].port) == 0, 10, "every ACK to reach JetStream")


class DurableTest(ClusterBase):
    def durable(self, b, cid="app", name="sub1", receipt=True):
        c = RawClient(b.port, timeout=10)
        self.clients.append(c)
        c.connect("1.2", headers={"client-id": cid})
        h = [("destination", "/topic/news"), ("id", "d"),
             ("activemq.subscriptionName", name)]
        if receipt:
            h.append(("receipt", "subbed"))
        c.send_frame("SUBSCRIBE", h)
        if receipt:
            self.assertEqual(c.expect("RECEIPT", 10)["receipt-id"], "subbed")
        return c

    def publish(self, b, bodies):
        p = self.client(b)
        for i, body in enumerate(bodies):
            send(p, "/topic/news", body, rid="p" if i == len(bodies) - 1 else None)
        p.expect("RECEIPT", 10)
        p.close()

    def stored(self, n):
        """Wait until JetStream has taken in the first n topic messages core
        NATS carried (no receipt covers that): its topic stream's last
        sequence, which a message nobody keeps advances too."""
        wait_for(lambda: stream_last_seq(self.nats[0].port) >= n, 10,
                 "the topic stream to take in %d messages" % n)

    def consumers_are(self, pred, what):
        wait_for(lambda: pred(consumers(self.nats[0].port)), 10, what)

    def test_activemq_durable_keeps_what_is_published_while_away_on_any_node(self):
        a, b = self.node("a"), self.node("b")
        d = self.durable(b)
        self.consumers_are(lambda cs: len(cs) == 1, "the durable consumer")
        self.publish(a, ["m1", "m2"])
        self.assertEqual(read_bodies(d, 2, 10), ["m1", "m2"])
        d.close()
        self.publish(a, ["away%d" % i for i in range(10)])
        self.stored(12)
        # back on the other node: what was kept, once each, in order but for
        # what b pulled before it saw its subscriber go (given back, so
        # redelivered, and after the rest)
        d = self.durable(a)
        frames = [d.expect("MESSAGE", 10) for _ in range(10)]
        self.assertEqual(sorted(f.body.decode() for f in frames),
                         ["away%d" % i for i in range(10)])
        fresh = [f.body.decode() for f in frames if f.get("redelivered") is None]
        self.assertEqual(fresh, sorted(fresh, key=lambda b: int(b[4:])))
        d.expect_nothing(0.3)
        # a plain subscriber and the durable one on one node: once each
        plain = self.client(a)
        subscribe(plain, "/topic/news", sid="plain")
        self.publish(b, ["both"])
        self.assertEqual(read_bodies(d, 1, 10), ["both"])
        self.assertEqual(read_bodies(plain, 1, 10), ["both"])
        d.expect_nothing(0.3)
        plain.expect_nothing(0.1)

    def test_ending_it_forgets_it_and_a_new_one_starts_from_now(self):
        a, b = self.node("a"), self.node("b")
        d = self.durable(a)
        d.send_frame("UNSUBSCRIBE", [("id", "d"), ("receipt", "u")])  # plain: kept
        d.expect("RECEIPT", 10)
        self.publish(b, ["kept"])
        self.stored(1)
        d.send_frame("SUBSCRIBE", [("destination", "/topic/news"), ("id", "d"),
                                   ("activemq.subscriptionName", "sub1")])
        self.assertEqual(read_bodies(d, 1, 10), ["kept"])
        d.send_frame("UNSUBSCRIBE", [("id", "d"), ("activemq.subscriptionName", "sub1"),
                                     ("receipt", "end")])
        d.expect("RECEIPT", 10)
        # the RECEIPT does not wait for JetStream to delete the consumer
        self.consumers_are(lambda cs: cs == [], "the durable consumer to be deleted")
        self.publish(b, ["gone"])
        self.stored(2)      # taken in, and kept for nobody
        d2 = self.durable(b)
        d2.expect_nothing(0.5)
        self.publish(a, ["new"])
        self.assertEqual(read_bodies(d2, 1, 10), ["new"])
        # nothing left behind in JetStream once acknowledged
        wait_for(lambda: stream_messages(self.nats[0].port, "EFT_TOPICS") == 0, 10,
                 "the topic stream to be empty")

    def test_rabbitmq_dialect_and_second_live_subscriber_on_a_node(self):
        a, b = self.node("a"), self.node("b")
        h = [("destination", "/topic/news"), ("id", "rq"), ("durable", "true"),
             ("auto-delete", "false"), ("ack", "client-individual")]
        c = self.client(b)
        c.send_frame("SUBSCRIBE", h + [("receipt", "s")])
        c.expect("RECEIPT", 10)
        second = self.client(b)
        second.send_frame("SUBSCRIBE", h)
        self.assertEqual(second.expect_error_and_close(10)["message"],
                         "durable subscription in use")
        c.close()
        # b's last pull expires (within 1 s): r1 and r2 wait in JetStream, in order
        self.consumers_are(lambda cs: cs and all(c["num_waiting"] == 0 for c in cs),
                           "b's last pull to expire")
        self.publish(a, ["r1", "r2"])
        self.stored(2)
        c = self.client(a)
        c.send_frame("SUBSCRIBE", h)
        f = c.expect("MESSAGE", 10)
        self.assertEqual(f.body, b"r1")
        c.close()  # r1 unacknowledged: given back
        c = self.client(b)
        c.send_frame("SUBSCRIBE", h)
        got = [c.expect("MESSAGE", 10) for _ in range(2)]
        self.assertEqual(sorted(g.body for g in got), [b"r1", b"r2"])
        self.assertEqual([g.get("redelivered") for g in got if g.body == b"r1"], ["true"])


class DurableLeaseTest(ClusterBase):
    """A durable subscription has one live subscriber cluster-wide: a lease
    in JetStream (KV_EFT_LEASES) whose max_age is the ack wait."""

    ACTIVEMQ = [("destination", "/topic/news"), ("id", "d"),
                ("activemq.subscriptionName", "sub1")]
    RABBITMQ = [("destination", "/topic/news"), ("id", "rq"), ("durable", "true"),
                ("auto-delete", "false"), ("ack", "client-individual")]

    def attempt(self, b, h, cid="app"):
        """SUBSCRIBE with h (and a receipt) on b: the client if it was taken
        (RECEIPT), None after the ERROR (which must be the one a second
        subscriber gets on one node, and close the connection)."""
        c = RawClient(b.port, timeout=10)
        self.clients.append(c)
        c.connect("1.2", headers={"client-id": cid})
        c.send_frame("SUBSCRIBE", h + [("receipt", "s")])
        f = c.read_frame(10 * SLOW)
        if f.command == "RECEIPT":
            return c
        self.assertEqual((f.command, f["message"]), ("ERROR", "durable subscription in use"))
        c.expect_closed(10)
        return None

    def publish(self, b, body):
        p = self.client(b)
        send(p, "/topic/news", body, rid="p")
        p.expect("RECEIPT", 10)
        p.close()

    def second_claim_refused_then_taken_after_release(self, h, release):
        a, b = self.node("a"), self.node("b")
        acks = ("ack", "client-individual") in h
        first = self.attempt(a, h)
        self.assertIsNotNone(first)
        self.assertIsNone(self.attempt(b, h), "a second live subscriber on another node")
        # the holder's node still delivers to it
        self.publish(b, "m1")
        self.assertEqual(read_bodies(first, 1, 10, ack=acks), ["m1"])
        release(first)
        # released, not aged out: b takes it at once (well inside the ack wait)
        started = time.time()
        second = None
        while second is None and time.time() - started < 10 * SLOW:
            second = self.attempt(b, h)
        self.assertIsNotNone(second)
        self.assertLess(time.time() - started, ACK_WAIT_MS / 1000.0)
        self.publish(a, "m2")
        self.assertEqual(read_bodies(second, 1, 10, ack=acks), ["m2"])
        # and now a is the one refused
        self.assertIsNone(self.attempt(a, h))

    def test_second_live_claim_on_another_node_gets_the_error_activemq(self):
        def unsubscribe(c):  # without the durable headers: the subscription is kept
            c.send_frame("UNSUBSCRIBE", [("id", "d"), ("receipt", "u")])
            c.expect("RECEIPT", 10)
        self.second_claim_refused_then_taken_after_release(self.ACTIVEMQ, unsubscribe)

    def test_second_live_claim_on_another_node_gets_the_error_rabbitmq(self):
        self.second_claim_refused_then_taken_after_release(self.RABBITMQ, lambda c: c.close())

    def test_a_dead_nodes_lease_runs_out_after_the_ack_wait(self):
        a, b = self.node("a"), self.node("b")
        self.assertIsNotNone(self.attempt(a, self.ACTIVEMQ))
        # renewed: still a's after more than the ack wait
        time.sleep(1.5 * ACK_WAIT_MS / 1000.0)
        self.assertIsNone(self.attempt(b, self.ACTIVEMQ))
        a.crash()  # kill -9: nobody releases it
        crashed = time.time()
        self.assertIsNone(self.attempt(b, self.ACTIVEMQ), "refused inside the ack wait")
        taken = None
        while taken is None and time.time() - crashed < ACK_WAIT_MS / 1000.0 + 10 * SLOW:
            taken = self.attempt(b, self.ACTIVEMQ)
            if taken is None:
                time.sleep(0.2)
        self.assertIsNotNone(taken, "the lease to run out")
        self.assertGreater(time.time() - crashed, ACK_WAIT_MS / 1000.0 / 3)
        self.publish(b, "after")
        self.assertEqual(read_bodies(taken, 1, 10), ["after"])

    def test_a_restarted_node_takes_back_its_own_lease_at_once(self):
        a = self.node("a")
        self.assertIsNotNone(self.attempt(a, self.RABBITMQ))
        a.crash()
        again = self.node("a")
        started = time.time()
        c = self.attempt(again, self.RABBITMQ)
        self.assertIsNotNone(c, "its own lease, from before the restart")
        self.assertLess(time.time() - started, ACK_WAIT_MS / 1000.0)
        self.publish(again, "back")
        self.assertEqual(read_bodies(c, 1, 10, ack=True), ["back"])


    def test_after_nats_comes_back_the_holder_claims_again(self):
        a, b = self.node("a"), self.node("b")
        held = self.attempt(a, self.ACTIVEMQ)
        self.assertIsNotNone(held)
        nats = self.nats[0]
        written = stream_last_seq(nats.port, "KV_EFT_LEASES")
        nats.kill()
        wait_for(lambda: "lost NATS" in a.read_log(), 15, "node a to see NATS gone")
        # down longer than the lease's max_age: it may be gone when NATS is back
        time.sleep(ACK_WAIT_MS / 1000.0 + 0.5)
        nats.start()
        self.wait_connected((a, b), 2)
        # a writes its lease again (a claim is a write to the bucket)
        wait_for(lambda: stream_last_seq(nats.port, "KV_EFT_LEASES") > written and
                 stream_messages(nats.port, "KV_EFT_LEASES") == 1, 10,
                 "a to claim its lease again")
        self.assertIsNone(self.attempt(b, self.ACTIVEMQ))
        self.publish(b, "back")
        self.assertEqual(read_bodies(held, 1, 10), ["back"])


class TopicTest(ClusterBase):
    def test_fanout_across_three_nodes_once_each(self):
        nodes = [self.node(n) for n in "abc"]
        subs = []
        for i, b in enumerate(nodes):
            for j in range(2):
                c = self.client(b)
                subscribe(c, "/topic/news.eu", sid="s%d%d" % (i, j))
                subs.append(c)
        wait_for(lambda: len(subscribers(self.nats[0], "eft.t.")) == 3, 10,
                 "NATS to have the three nodes' interest")
        p = self.client(nodes[0])
        for i in range(100):
            send(p, "/topic/news.eu", "t%d" % i)
        for c in subs:
            self.assertEqual(read_bodies(c, 100, 10), ["t%d" % i for i in range(100)])
            c.expect_nothing(0.2)

    def test_expiration_0_reaches_every_nodes_subscribers_not_a_clustered_queue(self):
        """RabbitMQ's TTL 0 crosses NATS with the message: a topic's
        subscribers on each node get it.  A clustered queue's message waits
        in JetStream first, so there it expires (README, docs/cluster.md)."""
        a, b = self.node("a"), self.node("b")
        sa, sb = self.client(a), self.client(b)
        subscribe(sa, "/topic/now", sid="t")
        subscribe(sb, "/topic/now", sid="t")
        qb = self.client(b)
        subscribe(qb, "/queue/now", sid="q")
        wait_for(lambda: len(subscribers(self.nats[0], "eft.t.")) == 2, 10,
                 "NATS to have both nodes' interest")
        p = self.client(a)
        send(p, "/topic/now", "news", [("expiration", "0")])
        send(p, "/queue/now", "job", [("expiration", "0")], rid="r")
        p.expect("RECEIPT")
        self.assertEqual(read_bodies(sa, 1, 5), ["news"])
        self.assertEqual(read_bodies(sb, 1, 5), ["news"])
        qb.expect_nothing(1.0)

    def test_a_topic_nobody_subscribes_to_is_fine(self):
        a = self.node("a")
        p = self.client(a)
        send(p, "/topic/nobody", "x", rid="r")
        p.expect("RECEIPT")


def nats_subjects(server, prefix):
    """The subjects of every subscription NATS has that start with prefix,
    sorted (one entry per subscription)."""
    url = "http://127.0.0.1:%d/subsz?subs=1&limit=100000" % server.http_port
    with urllib.request.urlopen(url, timeout=5 * SLOW) as r:
        subs = json.load(r).get("subscriptions_list") or []
    return sorted(s["subject"] for s in subs if s["subject"].startswith(prefix))


class WildcardAcrossNodesTest(ClusterBase):
    """Wildcard topic subscriptions across nodes (docs/cluster.md): one NATS
    subscription per pattern per node, in NATS's own wildcards; a '#' before
    the end subscribes wider and is matched again on the node."""

    # SENDs on a (after /topic/), and what each pattern gets of them, in order
    NAMES = ["w", "w.a", "w.z", "w.a.z", "w.b.c.z", "x.a", "w..e", "w."]
    WANT = {
        "w.*": ["w.a", "w.z", "w."],
        "w.>": ["w.a", "w.z", "w.a.z", "w.b.c.z", "w..e", "w."],
        "w.#": ["w", "w.a", "w.z", "w.a.z", "w.b.c.z", "w..e", "w."],
        "w.#.z": ["w.z", "w.a.z", "w.b.c.z"],
        "w.a": ["w.a"],
        "#": NAMES,
    }

    def subscribe_all(self, node):
        subs = {}
        for i, pat in enumerate(self.WANT):
            c = self.client(node)
            subscribe(c, "/topic/" + pat, sid="w%d" % i)
            subs[pat] = c
        return subs

    def test_patterns_on_b_get_exactly_what_a_publishes_once_each(self):
        self.b_admin = harness.free_port()
        a = self.node("a")
        b = self.node("b", "listen = http://127.0.0.1:%d\n" % self.b_admin)
        on_b = self.subscribe_all(b)
        # one NATS subscription per pattern: 'w.#' and 'w.#.z' both as eft.t.w.>
        want_subjects = sorted(["eft.t.w.*.$", "eft.t.w.*.>", "eft.t.w.>", "eft.t.w.>",
                                "eft.t.w.a.$", "eft.t.>"])
        wait_for(lambda: nats_subjects(self.nats[0], "eft.t.") == want_subjects, 10,
                 "NATS to have b's six subscriptions")
        # the same patterns on a, where the SENDs are delivered without NATS
        on_a = self.subscribe_all(a)
        wait_for(lambda: len(nats_subjects(self.nats[0], "eft.t.")) == 12, 10,
                 "NATS to have a's six subscriptions too")
        p = self.client(a)
        for i, name in enumerate(self.NAMES):
            send(p, "/topic/" + name, name, rid="last" if i == len(self.NAMES) - 1 else None)
        p.expect("RECEIPT", 10)
        for where, subs in (("b", on_b), ("a", on_a)):
            for pat, c in subs.items():
                got = read_bodies(c, len(self.WANT[pat]), 10)
                self.assertEqual(got, self.WANT[pat], "%s on %s" % (pat, where))
        for subs in (on_b, on_a):
            for c in subs.values():
                c.expect_nothing(0.1)
        on_b["w.*"].expect_nothing(0.3)
        # b's 'w.#.z' received all of w.> and dropped what did not match
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.b_admin,
                                    timeout=5 * SLOW) as r:
            self.assertIn("\neft_cluster_topic_filtered_total 4\n", r.read().decode())
        self.assertEqual(b.stop(), 0)
        self.assertIn("cluster: 4 topic messages dropped", b.read_log())

    def test_durable_pattern_across_nodes_and_mid_hash_refused(self):
        a, b = self.node("a"), self.node("b")

        def durable(node, dest="/topic/w.*"):
            c = RawClient(node.port, timeout=10)
            self.clients.append(c)
            c.connect("1.2", headers={"client-id": "app"})
            c.send_frame("SUBSCRIBE", [("destination", dest), ("id", "d"),
                                       ("activemq.subscriptionName", "wild"),
                                       ("receipt", "subbed")])
            return c

        def publish(names):
            p = self.client(a)
            for i, name in enumerate(names):
                send(p, "/topic/" + name, name, rid="p" if i == len(names) - 1 else None)
            p.expect("RECEIPT", 10)
            p.close()

        d = durable(b)
        self.assertEqual(d.expect("RECEIPT", 10)["receipt-id"], "subbed")
        wait_for(lambda: [c["config"].get("filter_subject") for c in consumers(self.nats[0].port)]
                 == ["eft.t.w.*.$"], 10, "the durable consumer filtered by w.*")
        publish(["w.a", "w.a.b", "x", "w.b"])
        self.assertEqual(read_bodies(d, 2, 10), ["w.a", "w.b"])
        d.expect_nothing(0.3)
        d.close()
        publish(["w.away1", "w.c.d", "w.away2"])
        wait_for(lambda: stream_last_seq(self.nats[0].port) >= 7, 10,
                 "the topic stream to take in the 7 messages")
        # back on the other node: what matched while away, once each
        d = durable(a)
        self.assertEqual(d.expect("RECEIPT", 10)["receipt-id"], "subbed")
        got = [d.expect("MESSAGE", 10).body.decode() for _ in range(2)]
        self.assertEqual(sorted(got), ["w.away1", "w.away2"])
        d.expect_nothing(0.3)
        # a '#' before the end cannot be a JetStream filter: refused, naming it
        c = RawClient(b.port, timeout=10)
        self.clients.append(c)
        c.connect("1.2", headers={"client-id": "app2"})
        c.send_frame("SUBSCRIBE", [("destination", "/topic/w.#.z"), ("id", "d"),
                                   ("activemq.subscriptionName", "mid")])
        err = c.expect_error_and_close(10)
        self.assertEqual(err["message"], "wildcard subscriptions are not supported in cluster mode")
        self.assertIn("'#' at byte 2", err.body.decode())
        # queue patterns stay refused
        q = self.client(b)
        q.send_frame("SUBSCRIBE", [("destination", "/queue/w.*"), ("id", "q")])
        self.assertEqual(q.expect_error_and_close(10)["message"],
                         "wildcard queue subscriptions are not supported in cluster mode")


class RpcTest(ClusterBase):
    def test_client_and_server_on_different_nodes(self):
        a, b = self.node("a"), self.node("b")
        server = self.client(b)
        subscribe(server, "/queue/rpc")
        client = self.client(a, "1.0")
        for i in range(20):
            send(client, "/queue/rpc", "q%d" % i, [("reply-to", "/temp-queue/answers"),
                                                   ("correlation-id", str(i))])
            req = server.expect("MESSAGE", 10)
            self.assertTrue(req["reply-to"].startswith("/reply-queue/eft.a."), req["reply-to"])
            send(server, req["reply-to"], "answer " + req.body.decode(),
                 [("correlation-id", req["correlation-id"])])
            ans = client.expect("MESSAGE", 10)
            self.assertEqual(ans.body.decode(), "answer q%d" % i)
            self.assertEqual(ans["correlation-id"], str(i))

    def test_reply_to_a_gone_temp_queue_is_dropped(self):
        a, b = self.node("a"), self.node("b")
        c = self.client(b)
        send(c, "/reply-queue/eft.a.nosuchqueue", "x", rid="r")
        c.expect("RECEIPT")
        self.assertTrue(a.alive())


class NatsRestartTest(ClusterBase):
    def test_restart_loses_nothing_with_a_receipt_and_errors_while_down(self):
        a, b = self.node("a"), self.node("b")
        p = self.client(a)
        for i in range(500):
            send(p, "/queue/r", "r%d" % i, rid="r%d" % i if i % 50 == 49 else None)
        receipts = [p.expect("RECEIPT", 10)["receipt-id"] for _ in range(10)]
        self.assertEqual(receipts[-1], "r499")
        nats = self.nats[0]
        nats.kill()
        wait_for(lambda: "lost NATS" in a.read_log(), 15, "node a to see NATS gone")
        down = self.client(a)
        send(down, "/queue/r", "refused", rid="nope")
        f = down.expect_error_and_close(10)
        self.assertEqual(f["message"], "cluster unavailable")
        sub = self.client(b) if "lost NATS" in b.read_log() else None
        if sub is not None:
            sub.send_frame("SUBSCRIBE", [("destination", "/queue/r"), ("id", "1")])
            self.assertEqual(sub.expect_error_and_close(10)["message"], "cluster unavailable")
        nats.start()
        self.wait_connected((a, b), 2)
        wait_for(lambda: a.read_log().count("queue streams EFT_Q_0..") >= 1, 10, "stream")
        after = self.client(a)
        send(after, "/queue/r", "after", rid="after")
        after.expect("RECEIPT", 15)
        c = self.client(b)
        subscribe(c, "/queue/r")
        got = read_bodies(c, 501, 20)
        self.assertEqual(len(got), len(set(got)))
        self.assertEqual(set(got), {"r%d" % i for i in range(500)} | {"after"})

    def test_a_too_large_send_taken_while_down_refuses_the_commit_whole(self):
        # While NATS is down nobody says what max_payload is: the SEND is
        # kept, and COMMIT finds out, before it sends anything.
        a = self.node("a")
        nats = self.nats[0]
        nats.kill()
        wait_for(lambda: "lost NATS" in a.read_log(), 15, "node a to see NATS gone")
        c = self.client(a)
        c.send_frame("BEGIN", [("transaction", "t")])
        send(c, "/queue/x", "small", [("transaction", "t")])
        send(c, "/queue/x", b"x" * (2 << 20), [("transaction", "t")])
        # taken for now (a SEND's RECEIPT in a transaction waits for COMMIT:
        # a BEGIN's says the SEND before it was)
        c.send_frame("BEGIN", [("transaction", "sync"), ("receipt", "big")])
        c.expect("RECEIPT", 10)
        nats.start()
        self.wait_connected((a,), 2)
        consumer = self.client(a)
        subscribe(consumer, "/queue/x")
        c.send_frame("COMMIT", [("transaction", "t"), ("receipt", "c")])
        f = c.expect_error_and_close(10)
        self.assertEqual(f["message"], "message too large for the cluster")
        consumer.expect_nothing(1.0)
        self.assertNotIn("was lost", a.read_log())


class NatsClusterTest(ClusterBase):
    nats_nodes = 3

    def test_killing_one_nats_node_of_three_loses_nothing(self):
        a = self.node("a", "cluster-replicas = 3\n", nats=[self.nats[0], self.nats[1]])
        b = self.node("b", "cluster-replicas = 3\n", nats=[self.nats[1], self.nats[2]])
        p = self.client(a)
        n = 2000
        for i in range(n):
            send(p, "/queue/r3", "x%d" % i, rid="half" if i == n // 2 - 1 else
                 "all" if i == n - 1 else None)
        p.expect("RECEIPT", 30)
        p.expect("RECEIPT", 30)
        self.nats[0].kill()  # a's server: a moves to another
        c = self.client(b)
        subscribe(c, "/queue/r3", ack="client-individual")
        got = read_bodies(c, n, 60, ack=True)
        self.assertEqual(len(got), n)
        self.assertEqual(set(got), {"x%d" % i for i in range(n)})
        wait_for(lambda: "connected to NATS" in a.read_log().split("lost NATS")[-1], 30,
                 "a to reconnect to another NATS node")
        more = self.client(a)
        send(more, "/queue/r3", "after", rid="r")
        more.expect("RECEIPT", 15)
        self.assertEqual(read_bodies(c, 1, 10), ["after"])


class CutOffTest(ClusterBase):
    """Node a reaches NATS through a proxy the test cuts; b directly."""

    ACK_WAIT_MS = 1500 * SLOW

    def metric(self, port, name):
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return int(float(line.split()[1]))
        return None

    def short_node(self, name, url, listen=None):
        """A node with the short ack wait (both must have it: it is the
        consumer's)."""
        b = Broker(config="cluster = %s\nnode-name = %s\ncluster-ack-wait-ms = %d\n"
                   % (url, name, self.ACK_WAIT_MS), listen=listen)
        self.nodes.append(b)
        b.start()
        wait_for(lambda: "queue streams EFT_Q_0.." in b.read_log(), 30,
                 "node %s to see the queue stream" % name)
        return b

    def test_a_node_cut_off_past_the_ack_wait_revokes_and_b_gets_the_only_live_copy(self):
        proxy = Proxy(self.nats[0].port)
        self.addCleanup(proxy.close)
        a = self.short_node("a", proxy.url, [("tcp", "127.0.0.1"), ("http", "127.0.0.1")])
        b = self.short_node("b", self.nats[0].url)
        # 10 handed out unacknowledged, 5 buffered (the selector leaves them)
        ca = self.client(a)
        subscribe(ca, "/queue/cut", ack="client-individual",
                  headers=[("prefetch-count", "20"), ("selector", "n < 10")])
        p = self.client(b)
        for i in range(15):
            send(p, "/queue/cut", "c%d" % i, headers=[("n", str(i))],
                 rid="r" if i == 14 else None)
        p.expect("RECEIPT", 10)
        held = [ca.expect("MESSAGE", 10) for _ in range(10)]
        self.assertEqual(sorted(f.body.decode() for f in held), ["c%d" % i for i in range(10)])
        ca.expect_nothing(0.2)
        # held past one renewal (a third of the ack wait): a renews them
        time.sleep(self.ACK_WAIT_MS / 1000.0 / 2)
        cb = self.client(b)
        subscribe(cb, "/queue/cut", ack="client-individual")
        proxy.cut()
        wait_for(lambda: "lost NATS" in a.read_log(), 10, "a to see NATS gone")
        # b gets all 15 once JetStream's ack wait ran out, each marked, and
        # a had let go of every one before b got the first
        again = []
        deadline = time.time() + 10 * SLOW + 3 * self.ACK_WAIT_MS / 1000.0
        while len(again) < 15 and time.time() < deadline:
            f = cb.read_frame(max(0.05, deadline - time.time()))
            self.assertEqual(f.command, "MESSAGE")
            if not again:
                self.assertIn("let go of 15 messages held here (10 unacknowledged, 5 buffered)",
                              a.read_log(),
                              "b got a copy while a still held it")
            self.assertEqual(f["redelivered"], "true")
            again.append(f.body.decode())
            cb.send_frame("ACK", [("id", f["ack"])])
        self.assertEqual(sorted(again), sorted("c%d" % i for i in range(15)))
        self.assertEqual(a.read_log().count("let go of"), 1)
        self.assertEqual(self.metric(a.ports[1], "eft_cluster_revoked_total"), 15)
        # a's client ACKs what it held: nothing is pending, nothing answers
        # but the RECEIPT
        for i, f in enumerate(held):
            ca.send_frame("ACK", [("id", f["ack"])] + ([("receipt", "acked")] if i == 9 else []))
        self.assertEqual(ca.expect("RECEIPT", 10)["receipt-id"], "acked")
        proxy.restore()
        self.wait_connected((a,), 2)
        # nothing handed out twice on a, and nothing left in JetStream
        ca.expect_nothing(2 * self.ACK_WAIT_MS / 1000.0 / SLOW)
        wait_for(lambda: stream_messages(self.nats[0].port) == 0, 10, "b's ACKs to land")
        send(p, "/queue/cut", "after", headers=[("n", "0")], rid="after")
        p.expect("RECEIPT", 10)
        got = read_bodies(ca, 1, 5) + read_bodies(cb, 1, 0.5)
        self.assertEqual(got, ["after"])


    def test_a_send_published_again_after_a_lost_ack_says_redelivered(self):
        # The pub ack is lost (the proxy drops what NATS sends a), the
        # message is consumed and acknowledged on b, and nats-server
        # restarts, forgetting the Nats-Msg-Id with the message: a's retry
        # is stored as a new message.  Its copy must say redelivered.
        nats = self.nats[0]
        proxy = Proxy(nats.port)
        self.addCleanup(proxy.close)
        a = self.short_node("a", proxy.url)
        b = self.short_node("b", nats.url)
        cb = self.client(b)
        subscribe(cb, "/queue/lost", ack="client-individual")
        proxy.mute()
        pa = self.client(a)
        send(pa, "/queue/lost", "once", rid="stored")
        f = cb.expect("MESSAGE", 10)
        self.assertEqual(f.body.decode(), "once")
        self.assertNotEqual(f.get("redelivered"), "true")
        cb.send_frame("ACK", [("id", f["ack"]), ("receipt", "acked")])
        cb.expect("RECEIPT", 10)
        wait_for(lambda: stream_messages(nats.port) == 0, 10, "the ACK to land")
        nats.kill()
        nats.start()
        proxy.mute(False)
        self.wait_connected((a,), 2)
        self.assertEqual(pa.expect("RECEIPT", 15 * SLOW)["receipt-id"], "stored")
        f = cb.expect("MESSAGE", 15 * SLOW)
        self.assertEqual(f.body.decode(), "once")
        self.assertEqual(f.get("redelivered"), "true")


class HeldQuestionTest(ClusterBase):
    def test_a_node_answers_held_only_for_a_message_its_subscriber_holds(self):
        # The sweep's question to every node (docs/cluster.md, "After a NATS
        # outage"): "STREAM CONSUMER SEQ" on eft.held, answered "held" only
        # by a node whose subscriber holds that message.
        a, b = self.node("a"), self.node("b")
        cb = self.client(b)
        subscribe(cb, "/queue/held", ack="client-individual")
        p = self.client(a)
        send(p, "/queue/held", "m1", rid="sent")
        p.expect("RECEIPT", 10)
        f = cb.expect("MESSAGE", 10)
        port = self.nats[0].port
        stream = "EFT_Q_%d" % queue_partition("held", 32)

        def ask(payload):
            try:
                return request(port, "eft.held", payload, timeout=1.5 * SLOW)
            except (AssertionError, OSError):
                return None

        self.assertEqual(ask(b"%s q_held 1" % stream.encode()), b"held")
        for other in (b"%s q_held 2" % stream.encode(), b"EFT_Q_99 q_held 1",
                      b"%s q_other 1" % stream.encode(), b"", b"garbage", b"a b c",
                      b"%s q_held 0" % stream.encode(), b"x " * 200):
            self.assertIsNone(ask(other), other)
        # still answering after the bad questions; no more once ACKed
        self.assertEqual(ask(b"%s q_held 1" % stream.encode()), b"held")
        cb.send_frame("ACK", [("id", f["ack"]), ("receipt", "acked")])
        cb.expect("RECEIPT", 10)
        self.assertIsNone(ask(b"%s q_held 1" % stream.encode()))


@TCP_ONLY
@unittest.skipUnless(NATS_SERVER, NATS_SKIP)
class StartupTest(unittest.TestCase):
    def test_unreachable_at_start_one_line_then_it_carries_on(self):
        nats = NatsServer()
        self.addCleanup(nats.cleanup)
        b = Broker(config=node_config(nats, "a"))
        b.start()
        self.addCleanup(b.finish)
        log = b.read_log()
        self.assertEqual(log.count("cannot reach NATS"), 1, log)
        c = RawClient(b.port)
        c.connect()
        send(c, "/queue/x", "early", rid="r")
        self.assertEqual(c.expect_error_and_close(5)["message"], "cluster unavailable")
        wait_for(lambda: "still unreachable" in b.read_log(), 10, "a retry to be logged")
        nats.start()
        wait_for(lambda: "queue streams EFT_Q_0.." in b.read_log(), 30, "the stream")
        c = RawClient(b.port)
        c.connect()
        send(c, "/queue/x", "later", rid="r")
        c.expect("RECEIPT", 10)
        subscribe(c, "/queue/x")
        self.assertEqual(c.expect("MESSAGE", 10).body, b"later")
        c.close()

    def run_eftd(self, config):
        path = os.path.join(harness.ROOT, "build-cluster-test.conf")
        with open(path, "w") as f:
            f.write(config)
        try:
            r = subprocess.run([harness.EFTD, "-c", path, "-p", "0"], capture_output=True,
                               text=True, timeout=10)
        finally:
            os.unlink(path)
        return r.returncode, r.stderr.strip().splitlines()

    def test_settings_that_cannot_work_stop_eftd_with_one_line(self):
        for config, words in (
                ("cluster = http://127.0.0.1:4222\n", "is not nats://HOST:PORT"),
                ("cluster = nats://127.0.0.1\n", "is not nats://HOST:PORT"),
                ("cluster = nats://127.0.0.1:4222\ndata-dir = /tmp/x\n", "data-dir and cluster"),
                ("cluster = nats://127.0.0.1:4222\ncluster-user = u\n", "needs cluster-password"),
                ("node-name = a\n", "need cluster = nats://HOST:PORT"),
                ("cluster = nats://127.0.0.1:4222\ncluster-replicas = 7\n", "cluster-replicas")):
            rc, lines = self.run_eftd(config)
            self.assertEqual(rc, 1, config)
            self.assertEqual(len(lines), 1, lines)
            self.assertIn(words, lines[0])


if __name__ == "__main__":
    unittest.main()
