"""Queues and topics: who gets each message, in what order, what is kept for
later, and that one consumer that never reads does not hold up the others."""

import threading
import time
import unittest

from harness import BrokerTest, frame, SLOW
from harness import expect_receipt, subscribe


def unsubscribe(c, sid="0"):
    c.send_frame("UNSUBSCRIBE", [("id", sid), ("receipt", "unsub-" + sid)])
    expect_receipt(c, "unsub-" + sid)


def send_many(c, dest, bodies, receipt="done"):
    """SEND each body, the last with a receipt; wait for it."""
    data = b""
    for i, body in enumerate(bodies):
        h = [("destination", dest)]
        if i == len(bodies) - 1:
            h.append(("receipt", receipt))
        data += frame("SEND", h, body)
    c.send(data)
    expect_receipt(c, receipt)


def bodies_of(frames):
    return [f.body.decode() for f in frames]


class QueueTest(BrokerTest):

    def test_round_robin_among_three_subscribers(self):
        consumers = []
        for i in range(3):
            c = self.client()
            subscribe(c, "/queue/rr")
            consumers.append(c)
        p = self.client()
        send_many(p, "/queue/rr", [str(i) for i in range(30)])
        residues = set()
        for c in consumers:
            got = [int(b) for b in bodies_of(c.read_frames(10))]
            self.assertEqual(len(got), 10)
            r = got[0] % 3
            self.assertEqual(got, list(range(r, 30, 3)),
                             "each subscriber gets every third message, in order")
            residues.add(r)
            c.expect_nothing(0.1)
        self.assertEqual(residues, {0, 1, 2})

    def test_queue_keeps_messages_until_subscribe(self):
        p = self.client()
        send_many(p, "/queue/keep", ["m%d" % i for i in range(5)])   # queued: RECEIPTed
        c = self.client()
        c.send_frame("SUBSCRIBE", [("destination", "/queue/keep"), ("id", "0")])
        self.assertEqual(bodies_of(c.read_frames(5)), ["m%d" % i for i in range(5)])
        c.expect_nothing(0.2)

    def test_queued_message_goes_to_one_subscriber_only(self):
        p = self.client()
        send_many(p, "/queue/once", ["only"])
        a = self.client()
        a.send_frame("SUBSCRIBE", [("destination", "/queue/once"), ("id", "0")])
        self.assertEqual(a.expect("MESSAGE").body, b"only")
        b = self.client()
        subscribe(b, "/queue/once")
        b.expect_nothing(0.2)

    def test_fifo_per_producer_10000(self):
        c = self.client()
        subscribe(c, "/queue/fifo")
        p = self.client()
        n = 10000
        send_many(p, "/queue/fifo", [str(i) for i in range(n)], receipt="fifo-done")
        got = [int(f.body) for f in c.read_frames(n, timeout=10 * SLOW)]
        self.assertEqual(got, list(range(n)))
        c.expect_nothing(0.1)

    def test_fifo_per_producer_two_producers_interleaved(self):
        c = self.client()
        subscribe(c, "/queue/fifo2")
        p1, p2 = self.client(), self.client()
        for i in range(200):
            p1.send_frame("SEND", [("destination", "/queue/fifo2")], "a%d" % i)
            p2.send_frame("SEND", [("destination", "/queue/fifo2")], "b%d" % i)
        got = bodies_of(c.read_frames(400))
        self.assertEqual([b for b in got if b[0] == "a"], ["a%d" % i for i in range(200)])
        self.assertEqual([b for b in got if b[0] == "b"], ["b%d" % i for i in range(200)])

    def test_unsubscribe_stops_delivery_and_message_stays_queued(self):
        c = self.client()
        subscribe(c, "/queue/unsub")
        p = self.client()
        send_many(p, "/queue/unsub", ["before"], receipt="r1")
        self.assertEqual(c.expect("MESSAGE").body, b"before")
        unsubscribe(c)
        send_many(p, "/queue/unsub", ["after"], receipt="r2")
        c.expect_nothing(0.3)
        d = self.client()
        d.send_frame("SUBSCRIBE", [("destination", "/queue/unsub"), ("id", "0")])
        self.assertEqual(d.expect("MESSAGE").body, b"after")

    def test_unsubscribe_unknown_id_is_error(self):
        c = self.client()
        c.send_frame("UNSUBSCRIBE", [("id", "nope")])
        self.assertTrue(c.expect_error_and_close().get("message"))

    def test_duplicate_subscription_id_is_error(self):
        c = self.client()
        subscribe(c, "/queue/dup", sid="x")
        c.send_frame("SUBSCRIBE", [("destination", "/queue/dup2"), ("id", "x")])
        self.assertTrue(c.expect_error_and_close().get("message"))

    def test_queue_and_topic_of_same_name_are_distinct(self):
        q = self.client()
        subscribe(q, "/queue/same")
        t = self.client()
        subscribe(t, "/topic/same")
        p = self.client()
        send_many(p, "/topic/same", ["to-topic"], receipt="r1")
        send_many(p, "/queue/same", ["to-queue"], receipt="r2")
        self.assertEqual(q.expect("MESSAGE").body, b"to-queue")
        self.assertEqual(t.expect("MESSAGE").body, b"to-topic")
        q.expect_nothing(0.1)
        t.expect_nothing(0.1)

    def test_slow_consumer_does_not_stall_others(self):
        slow = self.client()
        subscribe(slow, "/queue/slow")           # and then never reads, for now
        fast = self.client()
        subscribe(fast, "/queue/fast")
        pinger = self.client()
        bulk = self.client()

        n, size = 640, 32 * 1024                   # 20 MiB
        payload = b"s" * size
        errors = []

        def produce():
            try:
                for i in range(n):
                    h = [("destination", "/queue/slow"), ("n", str(i)),
                         ("content-length", str(size))]
                    if i == n - 1:
                        h.append(("receipt", "bulk-done"))
                    bulk.send(frame("SEND", h, payload))
            except Exception as e:  # reported below
                errors.append(e)

        t = threading.Thread(target=produce, daemon=True)
        t.start()
        # A stall would last until the slow consumer reads, which it does not
        # here: each ping's wait (3 s x SLOW) tells it.  How fast pings come
        # is latency, for a benchmark, not asserted here.
        deadline = time.time() + 20 * SLOW
        i = 0
        while (t.is_alive() or i < 5) and time.time() < deadline:
            pinger.send_frame("SEND", [("destination", "/queue/fast")], "ping%d" % i)
            m = fast.expect("MESSAGE", timeout=3 * SLOW)
            self.assertEqual(m.body, ("ping%d" % i).encode())
            i += 1
            time.sleep(0.01)
        t.join(timeout=10 * SLOW)
        self.assertFalse(t.is_alive(), "the producer was stalled")
        self.assertEqual(errors, [])
        expect_receipt(bulk, "bulk-done")
        # once everything is in, the other consumer is still served
        pinger.send_frame("SEND", [("destination", "/queue/fast")], "after")
        self.assertEqual(fast.expect("MESSAGE", timeout=3 * SLOW).body, b"after")

        # The consumer that did not read gets every message once it does.
        got = []
        for _ in range(n):
            f = slow.expect("MESSAGE", timeout=5 * SLOW)
            self.assertEqual(len(f.body), size)
            got.append(int(f["n"]))
        self.assertEqual(got, list(range(n)))
        slow.expect_nothing(0.1)


class TopicTest(BrokerTest):

    def test_topic_delivers_to_all_current_subscribers(self):
        subs = [self.client() for _ in range(3)]
        for c in subs:
            subscribe(c, "/topic/news")
        p = self.client()
        send_many(p, "/topic/news", ["a", "b", "c"])
        for c in subs:
            self.assertEqual(bodies_of(c.read_frames(3)), ["a", "b", "c"])
        late = self.client()
        subscribe(late, "/topic/news")
        late.expect_nothing(0.3)
        for c in subs:
            c.expect_nothing(0.05)

    def test_topic_fan_out_to_many_connections(self):
        subs = []
        for i in range(200):
            c = self.client()
            subscribe(c, "/topic/wide")
            subs.append(c)
        p = self.client()
        send_many(p, "/topic/wide", ["to-all"])
        for c in subs:
            self.assertEqual(c.expect("MESSAGE").body, b"to-all")

    def test_topic_without_subscribers_drops_silently(self):
        p = self.client()
        send_many(p, "/topic/void", ["lost1", "lost2"])
        c = self.client()
        subscribe(c, "/topic/void")
        c.expect_nothing(0.3)
        # the producer's connection is fine
        send_many(p, "/topic/void", ["seen"], receipt="r2")
        self.assertEqual(c.expect("MESSAGE").body, b"seen")

    def test_topic_keeps_nothing_after_last_unsubscribe(self):
        c = self.client()
        subscribe(c, "/topic/gone")
        unsubscribe(c)
        p = self.client()
        send_many(p, "/topic/gone", ["x"])
        subscribe(c, "/topic/gone", sid="1")
        c.expect_nothing(0.3)

    def test_unsubscribe_stops_topic_delivery(self):
        a, b = self.client(), self.client()
        subscribe(a, "/topic/u")
        subscribe(b, "/topic/u")
        p = self.client()
        send_many(p, "/topic/u", ["one"], receipt="r1")
        self.assertEqual(a.expect("MESSAGE").body, b"one")
        self.assertEqual(b.expect("MESSAGE").body, b"one")
        unsubscribe(a)
        send_many(p, "/topic/u", ["two"], receipt="r2")
        self.assertEqual(b.expect("MESSAGE").body, b"two")
        a.expect_nothing(0.3)

    def test_two_subscriptions_on_one_connection(self):
        c = self.client()
        subscribe(c, "/topic/twice", sid="first")
        subscribe(c, "/topic/twice", sid="second")
        p = self.client()
        send_many(p, "/topic/twice", ["hello"])
        frames = c.read_frames(2)
        self.assertEqual(sorted(f["subscription"] for f in frames), ["first", "second"])
        self.assertEqual([f.body for f in frames], [b"hello", b"hello"])
        c.expect_nothing(0.2)

    def test_topic_message_ids_differ_per_message_not_per_subscriber(self):
        a, b = self.client(), self.client()
        subscribe(a, "/topic/mid")
        subscribe(b, "/topic/mid")
        p = self.client()
        send_many(p, "/topic/mid", ["1", "2"])
        fa, fb = a.read_frames(2), b.read_frames(2)
        self.assertNotEqual(fa[0]["message-id"], fa[1]["message-id"])
        self.assertEqual(fa[0]["destination"], "/topic/mid")
        self.assertEqual(fb[1]["destination"], "/topic/mid")


if __name__ == "__main__":
    unittest.main()
