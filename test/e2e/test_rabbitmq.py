"""RabbitMQ's queue semantics on topic subscriptions (issue 25): in RabbitMQ
every topic subscription reads from a queue of its own, so prefetch-count
limits what it holds unacknowledged and the rest waits; x-queue-name names
that queue, which /queue/NAME and /amq/queue/NAME then reach, and which the
subscription's last subscriber takes with it when it leaves (unless it is a
durable subscription's)."""

import time
import unittest

from harness import (SLOW, BrokerTest, DataDirTest, expect_messages, expect_receipt,
                     send_receipted, subscribe)


def send_all(c, sends):
    send_receipted(c, [(d, body, ()) for d, body in sends])


def ack(c, f, rid=None):
    h = [("id", f["ack"])] + ([("receipt", rid)] if rid else [])
    c.send_frame("ACK", h)
    if rid:
        expect_receipt(c, rid)


class TopicPrefetch(BrokerTest):

    def test_prefetch_count_limits_a_topic_subscription(self):
        c = self.client()
        subscribe(c, "/topic/prices", sid="p", ack="client-individual",
                  headers=[("prefetch-count", "2")])
        send_all(self.client(), [("/topic/prices", str(i)) for i in range(5)])
        first = expect_messages(c, 2)
        self.assertEqual([f.body for f in first], [b"0", b"1"])
        self.assertEqual({f["destination"] for f in first}, {"/topic/prices"})
        self.assertEqual({f["subscription"] for f in first}, {"p"})
        # The rest waited: each ACK lets one more through, in order.
        ack(c, first[0])
        self.assertEqual([f.body for f in expect_messages(c, 1)], [b"2"])
        ack(c, first[1])
        self.assertEqual([f.body for f in expect_messages(c, 1)], [b"3"])

    def test_what_waits_goes_with_the_subscriber(self):
        c = self.client()
        subscribe(c, "/topic/prices", sid="p", ack="client", headers=[("prefetch-count", "1"),
                                                                       ("x-queue-name", "mine")])
        p = self.client()
        send_all(p, [("/topic/prices", str(i)) for i in range(3)])
        expect_messages(c, 1)
        send_all(p, [("/amq/queue/mine", "direct")])   # while it lasts, its queue exists
        c.send_frame("UNSUBSCRIBE", [("id", "p"), ("receipt", "gone")])
        expect_receipt(c, "gone")
        p.send_frame("SEND", [("destination", "/amq/queue/mine")], b"late")
        f = p.expect_error_and_close()
        self.assertEqual(f["message"], "not_found")


class XQueueName(BrokerTest):

    def test_the_named_queue_is_reached_by_both_its_names(self):
        c = self.client()
        subscribe(c, "/exchange/amq.topic/news", sid="n", headers=[("x-queue-name", "news-q")])
        send_all(self.client(), [("/topic/news", "topic"), ("/queue/news-q", "queue"),
                                 ("/amq/queue/news-q", "amq")])
        got = sorted((f.body.decode(), f["subscription"]) for f in expect_messages(c, 3))
        self.assertEqual(got, [("amq", "n"), ("queue", "n"), ("topic", "n")])

    def test_subscribers_with_one_name_share_its_messages(self):
        a, b = self.client(), self.client()
        for c in (a, b):
            subscribe(c, "/topic/work", sid="w", headers=[("x-queue-name", "workers")])
        send_all(self.client(), [("/topic/work", str(i)) for i in range(4)])
        got = [f.body for f in a.read_frames(2)] + [f.body for f in b.read_frames(2)]
        a.expect_nothing()
        b.expect_nothing()
        self.assertEqual(sorted(got), [b"0", b"1", b"2", b"3"])

    def test_naming_an_ordinary_queue_is_a_precondition_failure(self):
        send_all(self.client(), [("/queue/plain", "kept")])
        c = self.client()
        c.send_frame("SUBSCRIBE", [("destination", "/topic/t"), ("id", "0"),
                                   ("x-queue-name", "plain")])
        f = c.expect_error_and_close()
        self.assertEqual(f["message"], "precondition_failed")
        self.assertIn("x-queue-name", f.body.decode())
        r = self.client()
        subscribe(r, "/queue/plain", sid="q")
        self.assertEqual([f.body for f in expect_messages(r, 1)], [b"kept"])

    def test_an_empty_name_is_refused(self):
        c = self.client()
        c.send_frame("SUBSCRIBE", [("destination", "/topic/t"), ("id", "0"),
                                   ("x-queue-name", "")])
        self.assertEqual(c.expect_error_and_close()["message"], "bad x-queue-name")

    def test_a_durable_subscription_is_the_named_queue(self):
        durable = [("durable", "true"), ("auto-delete", "false"), ("x-queue-name", "kept")]
        c = self.client()
        subscribe(c, "/topic/dur", sid="d1", headers=durable)
        c.close()
        send_all(self.client(), [("/topic/dur", "while away")])
        r = self.client()
        subscribe(r, "/amq/queue/kept", sid="q")
        f = expect_messages(r, 1)[0]
        self.assertEqual((f.body, f["destination"]), (b"while away", "/topic/dur"))
        r.send_frame("UNSUBSCRIBE", [("id", "q"), ("receipt", "left")])
        expect_receipt(r, "left")
        # RabbitMQ's UNSUBSCRIBE names it the same way, and ends it.
        u = self.client()
        u.send_frame("UNSUBSCRIBE", [("id", "d1"), ("destination", "/topic/dur"),
                                     ("durable", "true"), ("x-queue-name", "kept"),
                                     ("receipt", "ended")])
        expect_receipt(u, "ended")
        u.send_frame("SEND", [("destination", "/amq/queue/kept")], b"late")
        self.assertEqual(u.expect_error_and_close()["message"], "not_found")


class DurableNeedsAnId(BrokerTest):
    """A durable subscription is named by its id; a STOMP 1.0 SUBSCRIBE may
    leave the id out, and must then be refused, not made a plain one."""

    def test_durable_without_an_id_is_refused(self):
        for header, value in (("durable", "true"), ("persistent", "True")):
            with self.subTest(header=header):
                c = self.client(connect="1.0")
                c.send_frame("SUBSCRIBE", [("destination", "/topic/dur-no-id"), (header, value),
                                           ("receipt", "sub")])
                f = c.expect_error_and_close()
                self.assertEqual(f["message"], "missing 'id' header")
                self.assertEqual(f["receipt-id"], "sub")

    def test_a_plain_1_0_subscription_still_needs_no_id(self):
        c = self.client(connect="1.0")
        c.send_frame("SUBSCRIBE", [("destination", "/topic/plain-no-id"), ("durable", "false"),
                                   ("receipt", "sub")])
        expect_receipt(c, "sub")
        send_all(self.client(), [("/topic/plain-no-id", "hello")])
        self.assertEqual(expect_messages(c, 1)[0].body, b"hello")


class QueueFlags(BrokerTest):
    """durable and auto-delete on a /queue/ SUBSCRIBE, as RabbitMQ declares
    the queue with them."""

    def test_an_auto_delete_queue_goes_with_its_last_subscriber(self):
        c = self.client()
        subscribe(c, "/queue/ad", sid="a", ack="client", headers=[("auto-delete", "true"),
                                                                  ("prefetch-count", "1")])
        p = self.client()
        send_all(p, [("/queue/ad", "1"), ("/queue/ad", "2")])
        expect_messages(c, 1)
        send_all(p, [("/amq/queue/ad", "3")])   # it is there while subscribed
        c.send_frame("UNSUBSCRIBE", [("id", "a"), ("receipt", "gone")])
        expect_receipt(c, "gone")
        p.send_frame("SEND", [("destination", "/amq/queue/ad")], b"late")
        self.assertEqual(p.expect_error_and_close()["message"], "not_found")

    def test_flags_unlike_the_queue_are_a_precondition_failure(self):
        send_all(self.client(), [("/queue/plain", "kept")])
        for header, value in (("auto-delete", "true"), ("durable", "false")):
            c = self.client()
            c.send_frame("SUBSCRIBE", [("destination", "/queue/plain"), ("id", "0"),
                                       (header, value)])
            f = c.expect_error_and_close()
            self.assertEqual(f["message"], "precondition_failed")
            self.assertIn(header + ":" + value, f.body.decode())
        r = self.client()
        subscribe(r, "/queue/plain", sid="q", headers=[("durable", "true"), ("auto-delete", "false")])
        self.assertEqual([f.body for f in expect_messages(r, 1)], [b"kept"])


class XArguments(BrokerTest):
    """RabbitMQ's queue arguments on the SUBSCRIBE that makes a queue, as
    eftd's policy for it."""

    def test_max_length_drop_head_and_dead_letters(self):
        c = self.client()
        subscribe(c, "/queue/xq", sid="q", ack="client", headers=[
            ("prefetch-count", "1"), ("x-max-length", "2"), ("x-overflow", "drop-head"),
            ("x-dead-letter-exchange", ""), ("x-dead-letter-routing-key", "xq-dead")])
        send_all(self.client(), [("/queue/xq", str(i)) for i in range(5)])
        self.assertEqual([f.body for f in expect_messages(c, 1)], [b"0"])
        d = self.client()
        subscribe(d, "/queue/xq-dead", sid="d")
        dead = expect_messages(d, 2)
        self.assertEqual([f.body for f in dead], [b"1", b"2"])

    def test_another_value_on_an_existing_queue_is_a_precondition_failure(self):
        subscribe(self.client(), "/queue/xl", sid="a", headers=[("x-max-length", "10")])
        subscribe(self.client(), "/queue/xl", sid="b", headers=[("x-max-length", "10")])
        c = self.client()
        c.send_frame("SUBSCRIBE", [("destination", "/queue/xl"), ("id", "0"),
                                   ("x-max-length", "20")])
        f = c.expect_error_and_close()
        self.assertEqual(f["message"], "precondition_failed")
        self.assertIn("x-max-length", f.body.decode())

    def test_what_eftd_cannot_do_is_refused_by_name(self):
        for header, value in (("x-overflow", "reject-publish"), ("x-expires", "0"),
                              ("x-dead-letter-exchange", "amq.topic")):
            c = self.client()
            c.send_frame("SUBSCRIBE", [("destination", "/queue/no"), ("id", "0"), (header, value)])
            f = c.expect_error_and_close()
            self.assertEqual(f["message"], "bad " + header)


    def test_x_expires_deletes_a_queue_unused_that_long(self):
        c = self.client()
        subscribe(c, "/queue/xe", sid="q", ack="client", headers=[("x-expires", "300")])
        p = self.client()
        send_all(p, [("/queue/xe", "held")])
        expect_messages(c, 1)
        c.send_frame("UNSUBSCRIBE", [("id", "q"), ("receipt", "u")])   # "held" goes back
        expect_receipt(c, "u")
        send_all(p, [("/amq/queue/xe", "still there")])
        deadline = time.time() + 10 * SLOW
        while True:   # gone within a few timer ticks after 300 ms
            q = self.client()
            q.send_frame("SEND", [("destination", "/amq/queue/xe"), ("receipt", "r")], b"x")
            f = q.read_frame()
            if f.command == "ERROR":
                self.assertEqual(f["message"], "not_found")
                break
            self.assertLess(time.time(), deadline, "queue /queue/xe never expired")
            time.sleep(0.1)

class RedeliveredAlways(BrokerTest):
    """redelivered-always = yes: every MESSAGE says redelivered, false on a
    first delivery, as RabbitMQ's do."""
    config = "redelivered-always = yes\n"

    def test_first_deliveries_say_redelivered_false(self):
        c = self.client()
        subscribe(c, "/queue/r", sid="q", ack="client")
        send_all(self.client(), [("/queue/r", "m")])
        self.assertEqual(expect_messages(c, 1)[0]["redelivered"], "false")
        c.close()
        d = self.client()
        subscribe(d, "/queue/r", sid="q")
        self.assertEqual(expect_messages(d, 1)[0]["redelivered"], "true")


class NotJournaled(DataDirTest):
    """A durable:false queue, an auto-delete one and a topic subscription's
    queue keep no message in the journal, persistent or not: none outlives
    a restart, as with RabbitMQ."""
    data_prefix = "eftd-rmqsub-"

    def test_transient_queues_lose_their_messages_at_a_restart(self):
        b = self.start_on_data("")
        c = self.connect(b)
        subscribe(c, "/queue/scratch", sid="s", ack="client", headers=[("durable", "false"),
                                                                       ("prefetch-count", "1")])
        subscribe(c, "/topic/t", sid="t", ack="client", headers=[("x-queue-name", "tq"),
                                                                 ("prefetch-count", "1")])
        p = self.connect(b)
        send_receipted(p, [("/queue/scratch", "s%d" % i, [("persistent", "true")]) for i in range(3)] +
                       [("/topic/t", "t%d" % i, [("persistent", "true")]) for i in range(3)] +
                       [("/queue/kept", "kept", [("persistent", "true")])])
        self.assertEqual(len(c.read_frames(2)), 2)
        b.crash()
        b = self.start_on_data("")
        self.assertIn("1 message back on 1 queue", b.read_log())

    def test_receipts_of_sends_in_a_transaction_wait_for_the_journal_at_commit(self):
        b = self.start_on_data("fsync = always\n")
        c = self.connect(b)
        c.send_frame("BEGIN", [("transaction", "t")])
        for i in range(2):
            c.send_frame("SEND", [("destination", "/queue/jtx"), ("persistent", "true"),
                                  ("transaction", "t"), ("receipt", "s%d" % i)], b"m")
        c.expect_nothing()
        c.send_frame("COMMIT", [("transaction", "t"), ("receipt", "c")])
        for rid in ("s0", "s1", "c"):
            expect_receipt(c, rid)
        b.crash()
        b = self.start_on_data("")
        self.assertIn("2 messages back on 1 queue", b.read_log())

    def test_a_queue_that_expires_takes_its_messages_out_of_the_journal(self):
        b = self.start_on_data("")
        c = self.connect(b)
        subscribe(c, "/queue/xe", sid="q", headers=[("x-expires", "200")])
        c.send_frame("UNSUBSCRIBE", [("id", "q"), ("receipt", "u")])
        expect_receipt(c, "u")
        send_receipted(c, [("/queue/xe", "m%d" % i, [("persistent", "true")]) for i in range(3)] +
                       [("/queue/kept", "kept", [("persistent", "true")])])
        deadline = time.time() + 10 * SLOW
        while "queue /queue/xe deleted: unused for its x-expires (3 messages dropped)" \
                not in b.read_log():
            self.assertLess(time.time(), deadline, "queue /queue/xe never expired")
            time.sleep(0.1)
        self.assertEqual(b.stop(), 0)
        b = self.start_on_data("")
        self.assertIn("1 message back on 1 queue", b.read_log())


if __name__ == "__main__":
    unittest.main()
