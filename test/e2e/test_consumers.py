"""A queue's consumers in both dialects (issue 25).  Exclusive consumers:
ActiveMQ's activemq.exclusive and RabbitMQ's x-single-active-consumer give
one subscriber every message while the others stand by, and the next takes
over when it leaves (UNSUBSCRIBE or a closed connection), getting what it
had not acknowledged, redelivered.  RabbitMQ's exclusive:true locks the
queue to one connection: another gets ERROR resource_locked.  Consumer
priorities (activemq.priority, x-priority): the higher ones get messages
while they have room, in turn among equals.  A bad value gets an ERROR
naming the header, and nobody else's subscription is touched."""

import unittest

from harness import BrokerTest, expect_receipt, frame, subscribe

Q = "/queue/work"


def send_n(c, prefix, n, dest=Q):
    """n messages PREFIX0.. to dest, then a RECEIPT: all routed by then."""
    c.send(b"".join(frame("SEND", [("destination", dest)] +
                          ([("receipt", "sent")] if i == n - 1 else []), "%s%d" % (prefix, i))
                    for i in range(n)))
    expect_receipt(c, "sent")


def bodies(c, n):
    """The bodies of the next n MESSAGEs (with "r" before a redelivered one),
    then nothing more for a while."""
    got = []
    for f in c.read_frames(n):
        if f.command != "MESSAGE":
            raise AssertionError("expected MESSAGE, got %r" % f)
        got.append(("r" if f.get("redelivered") == "true" else "") + f.body.decode())
    c.expect_nothing()
    return got


def ack(c, f):
    c.send_frame("ACK", [("id", f["ack"]), ("receipt", "ack")])
    expect_receipt(c, "ack")


class ExclusiveConsumers(BrokerTest):

    def test_activemq_exclusive_takes_everything_then_the_next_takes_over(self):
        plain, first, second = self.client(), self.client(), self.client()
        subscribe(plain, Q, sid="plain")
        subscribe(first, Q, sid="first", headers=[("activemq.exclusive", "true")])
        subscribe(second, Q, sid="second", headers=[("activemq.exclusive", "true")])
        p = self.client()
        send_n(p, "a", 4)
        self.assertEqual(bodies(first, 4), ["a0", "a1", "a2", "a3"])
        second.expect_nothing()
        plain.expect_nothing()
        # The first leaves: the other exclusive one takes over, not the plain one.
        first.send_frame("UNSUBSCRIBE", [("id", "first"), ("receipt", "u")])
        expect_receipt(first, "u")
        send_n(p, "b", 2)
        self.assertEqual(bodies(second, 2), ["b0", "b1"])
        plain.expect_nothing()
        # No exclusive one left: the plain one has the queue.
        second.send_frame("UNSUBSCRIBE", [("id", "second"), ("receipt", "u")])
        expect_receipt(second, "u")
        send_n(p, "c", 2)
        self.assertEqual(bodies(plain, 2), ["c0", "c1"])

    def test_takeover_on_disconnect_gets_the_unacked_redelivered(self):
        first, second = self.client(), self.client()
        subscribe(first, Q, sid="x", ack="client-individual",
                  headers=[("activemq.exclusive", "true")])
        subscribe(second, Q, sid="y", ack="client-individual",
                  headers=[("activemq.exclusive", "true")])
        p = self.client()
        send_n(p, "m", 3)
        got = first.read_frames(3)
        self.assertEqual([f.body for f in got], [b"m0", b"m1", b"m2"])
        ack(first, got[0])
        second.expect_nothing()
        first.close()
        self.assertEqual(bodies(second, 2), ["rm1", "rm2"])
        send_n(p, "n", 1)
        self.assertEqual(bodies(second, 1), ["n0"])

    def test_single_active_consumer_fails_over_in_order_of_arrival(self):
        subs = [self.client() for _ in range(3)]
        for i, c in enumerate(subs):
            subscribe(c, Q, sid="s%d" % i, headers=[("x-single-active-consumer", "true")])
        p = self.client()
        for i, c in enumerate(subs):
            send_n(p, "to%d-" % i, 2)
            self.assertEqual(bodies(c, 2), ["to%d-0" % i, "to%d-1" % i])
            for later in subs[i + 1:]:
                later.expect_nothing(0.05)
            if i < 2:
                c.close()  # a connection gone, or an UNSUBSCRIBE: the same
            else:
                c.send_frame("UNSUBSCRIBE", [("id", "s2"), ("receipt", "u")])
                expect_receipt(c, "u")


class ExclusiveQueue(BrokerTest):
    """RabbitMQ's exclusive:true: the queue is its connection's alone."""

    def test_another_connection_is_refused_resource_locked(self):
        owner = self.client()
        subscribe(owner, Q, sid="mine", headers=[("exclusive", "true")])
        subscribe(owner, Q, sid="also-mine")  # the same connection may consume again
        other = self.client()
        other.send_frame("SUBSCRIBE", [("destination", Q), ("id", "0")])
        f = other.expect_error_and_close()
        self.assertEqual(f["message"], "resource_locked")
        self.assertIn("'%s'" % Q, f.body.decode())
        # Its owner's subscriptions go on; anyone may still send to it.
        send_n(self.client(), "m", 2)
        self.assertEqual(sorted(bodies(owner, 2)), ["m0", "m1"])
        # The subscription that locked it ends: others may consume again.
        owner.send_frame("UNSUBSCRIBE", [("id", "mine"), ("receipt", "u")])
        expect_receipt(owner, "u")
        subscribe(self.client(), Q, sid="0")

    def test_the_lock_is_refused_while_another_connection_consumes(self):
        first = self.client()
        subscribe(first, Q, sid="0")
        late = self.client()
        late.send_frame("SUBSCRIBE", [("destination", Q), ("id", "0"), ("exclusive", "true")])
        f = late.expect_error_and_close()
        self.assertEqual(f["message"], "resource_locked")
        self.assertIn("'%s'" % Q, f.body.decode())
        send_n(self.client(), "m", 1)
        self.assertEqual(bodies(first, 1), ["m0"])


class Priorities(BrokerTest):

    def test_the_higher_priority_gets_everything_while_it_has_room(self):
        low, high = self.client(), self.client()
        subscribe(low, Q, sid="low", headers=[("activemq.priority", "1")])
        subscribe(high, Q, sid="high", headers=[("activemq.priority", "9")])
        send_n(self.client(), "m", 5)
        self.assertEqual(bodies(high, 5), ["m%d" % i for i in range(5)])
        low.expect_nothing()

    def test_prefetch_one_on_the_high_one_without_ack_sends_the_rest_lower(self):
        low, high = self.client(), self.client()
        subscribe(low, Q, sid="low")
        subscribe(high, Q, sid="high", ack="client-individual",
                  headers=[("x-priority", "10"), ("prefetch-count", "1")])
        p = self.client()
        send_n(p, "m", 4)
        got = high.read_frames(1)
        self.assertEqual(got[0].body, b"m0")
        high.expect_nothing()
        self.assertEqual(bodies(low, 3), ["m1", "m2", "m3"])
        ack(high, got[0])  # room again: the next one goes up
        send_n(p, "n", 1)
        self.assertEqual(bodies(high, 1), ["n0"])
        low.expect_nothing()

    def test_equal_priorities_take_turns(self):
        a, b, low = self.client(), self.client(), self.client()
        subscribe(a, Q, sid="a", headers=[("x-priority", "5")])
        subscribe(low, Q, sid="low", headers=[("x-priority", "-1")])
        subscribe(b, Q, sid="b", headers=[("x-priority", "5")])
        send_n(self.client(), "m", 6)
        self.assertEqual(bodies(a, 3), ["m0", "m2", "m4"])
        self.assertEqual(bodies(b, 3), ["m1", "m3", "m5"])
        low.expect_nothing()


class BadValues(BrokerTest):

    BAD = [("activemq.priority", "128"), ("activemq.priority", "high"),
           ("x-priority", "1.5"), ("x-priority", "99999999999"),
           ("activemq.exclusive", "yes"), ("x-single-active-consumer", "1"),
           ("exclusive", "")]

    def test_an_error_names_the_header_and_nobody_else_is_touched(self):
        keep = self.client()
        subscribe(keep, Q, sid="keep", headers=[("activemq.exclusive", "true")])
        for name, value in self.BAD:
            c = self.client()
            c.send_frame("SUBSCRIBE", [("destination", Q), ("id", "0"), (name, value)])
            f = c.expect_error_and_close()
            self.assertEqual(f["message"], "bad " + name, (name, value))
            self.assertIn(name, f.body.decode())
        send_n(self.client(), "m", 2)
        self.assertEqual(bodies(keep, 2), ["m0", "m1"])


if __name__ == "__main__":
    unittest.main()
