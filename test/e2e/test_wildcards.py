"""Wildcard topic subscriptions (issue 25), in both dialects on one matcher:
`*` one element, `>` one or more at the end (ActiveMQ, NATS), `#` zero or
more anywhere (RabbitMQ); elements are separated by '.'.  Each matching
subscription gets the message once, with its own `subscription` header and
the concrete `destination` it was sent to.  Malformed patterns, patterns
outside a user's read permission, and (for now) wildcard queue
subscriptions get an ERROR naming what is wrong, and nobody else's
subscriptions are touched.  Durable wildcard subscriptions outlive kill -9."""

import os
import tempfile
import unittest

import harness
from harness import (send, BrokerTest, DataDirTest, RawClient, expect_messages, expect_receipt, frame,
                     send_receipted, subscribe)



def send_all(c, dests, headers=()):
    """One message to each of dests (its body is its name), then a RECEIPT:
    everything was routed by then."""
    send_receipted(c, [(d, d, headers) for d in dests])


messages = expect_messages


class Matching(BrokerTest):
    """Which names each pattern receives."""

    NAMES = ["price.stock.ACME", "price.stock.ACME.ny", "price.stock", "price.bond.X",
             "price", "chat", "chat.a", "chat.a.b", "news.eu.b", "b", "a.b"]

    def check(self, pattern, want):
        c = self.client()
        subscribe(c, "/topic/" + pattern, sid="w")
        p = self.client()
        send_all(p, ["/topic/" + n for n in self.NAMES])
        got = messages(c, len(want)) if want else (c.expect_nothing() or [])
        self.assertEqual([f["destination"] for f in got], ["/topic/" + n for n in want],
                         "pattern %s" % pattern)
        for f in got:
            self.assertEqual(f["subscription"], "w")
            self.assertEqual(f.body.decode(), f["destination"])

    def test_star_is_one_element(self):
        self.check("price.stock.*", ["price.stock.ACME"])
        self.check("*.stock.*", ["price.stock.ACME"])
        self.check("*", ["price", "chat", "b"])

    def test_greater_than_is_one_or_more_at_the_end(self):
        self.check("chat.>", ["chat.a", "chat.a.b"])
        self.check("price.stock.>", ["price.stock.ACME", "price.stock.ACME.ny"])

    def test_hash_is_zero_or_more_anywhere(self):
        self.check("chat.#", ["chat", "chat.a", "chat.a.b"])
        self.check("#.b", ["chat.a.b", "news.eu.b", "b", "a.b"])
        self.check("price.#.ACME", ["price.stock.ACME"])

    def test_a_partial_element_is_literal(self):
        self.check("price.st*", [])
        self.check("cha#", [])

    def test_a_plain_name_still_gets_only_itself(self):
        self.check("chat.a", ["chat.a"])


class Subscriptions(BrokerTest):

    def test_overlapping_subscriptions_on_one_connection_each_get_it_once(self):
        c = self.client()
        for sid, dest in (("star", "/topic/a.*"), ("exact", "/topic/a.b"), ("all", "/topic/#"),
                          ("amq", "/topic/a.>"), ("hash", "/topic/a.#")):
            subscribe(c, dest, sid=sid)
        send_all(self.client(), ["/topic/a.b"])
        got = messages(c, 5)
        self.assertEqual(sorted(f["subscription"] for f in got),
                         ["all", "amq", "exact", "hash", "star"])
        self.assertEqual({f["destination"] for f in got}, {"/topic/a.b"})
        self.assertEqual(len({f["message-id"] for f in got}), 1, "one message, five deliveries")

    def test_several_subscribers_of_one_pattern(self):
        subs = [self.client() for _ in range(3)]
        for c in subs:
            subscribe(c, "/topic/s.*")
        send_all(self.client(), ["/topic/s.1", "/topic/s.2", "/topic/t.1"])
        for c in subs:
            self.assertEqual([f.body for f in messages(c, 2)], [b"/topic/s.1", b"/topic/s.2"])

    def test_unsubscribe_stops_it_and_a_new_one_works(self):
        c = self.client()
        subscribe(c, "/topic/u.*", sid="1")
        p = self.client()
        send_all(p, ["/topic/u.x"])
        messages(c, 1)
        c.send_frame("UNSUBSCRIBE", [("id", "1"), ("receipt", "u")])
        expect_receipt(c, "u")
        send_all(p, ["/topic/u.y"])
        c.expect_nothing()
        subscribe(c, "/topic/u.*", sid="2")
        send_all(p, ["/topic/u.z"])
        self.assertEqual(messages(c, 1)[0]["subscription"], "2")

    def test_a_send_to_the_pattern_itself_arrives_once(self):
        c = self.client()
        subscribe(c, "/topic/lit.*")
        send_all(self.client(), ["/topic/lit.*"])
        self.assertEqual(messages(c, 1)[0]["destination"], "/topic/lit.*")

    def test_a_transaction_reaches_wildcard_subscribers_at_commit(self):
        c = self.client()
        subscribe(c, "/topic/tx.#")
        p = self.client()
        p.send_frame("BEGIN", [("transaction", "t")])
        p.send_frame("SEND", [("destination", "/topic/tx.one"), ("transaction", "t")], "1")
        p.send_frame("SEND", [("destination", "/topic/tx"), ("transaction", "t")], "2")
        p.send_frame("SEND", [("destination", "/topic/nobody"), ("receipt", "r")])
        expect_receipt(p, "r")
        c.expect_nothing()
        p.send_frame("COMMIT", [("transaction", "t"), ("receipt", "c")])
        expect_receipt(p, "c")
        self.assertEqual([f.body for f in messages(c, 2)], [b"1", b"2"])

    def test_selectors_apply_to_wildcard_subscriptions(self):
        c = self.client()
        subscribe(c, "/topic/sel.*", headers=[("selector", "color = 'red'")])
        p = self.client()
        send_all(p, ["/topic/sel.a"], headers=[("color", "blue")])
        send_all(p, ["/topic/sel.b"], headers=[("color", "red")])
        self.assertEqual(messages(c, 1)[0]["destination"], "/topic/sel.b")

    def test_many_patterns_only_matching_ones_deliver(self):
        c = self.client()
        c.send(b"".join(frame("SUBSCRIBE", [("destination", "/topic/m%d.*" % i), ("id", str(i))])
                        for i in range(200)))
        subscribe(c, "/topic/m7.#", sid="hash")
        send_all(self.client(), ["/topic/m7.x", "/topic/m150.y", "/topic/m7"])
        got = messages(c, 4)
        self.assertEqual(sorted((f["subscription"], f["destination"]) for f in got),
                         [("150", "/topic/m150.y"), ("7", "/topic/m7.x"),
                          ("hash", "/topic/m7"), ("hash", "/topic/m7.x")])


class BadPatterns(BrokerTest):

    def refused(self, dest, message):
        c = self.client()
        c.send_frame("SUBSCRIBE", [("destination", dest), ("id", "0"), ("receipt", "r")])
        f = c.expect_error_and_close()
        self.assertEqual(f["message"], message)
        return f.body.decode()

    def test_malformed_patterns_are_refused_with_the_place(self):
        # another client's subscription and queued messages are untouched
        keep = self.client()
        subscribe(keep, "/topic/ok.*")
        q = self.client()
        send(q, "/queue/kept", "waiting", receipt="q")
        for dest, pos, why in (("/topic/a.>.b", 2, "'>'"), ("/topic/a..*", 2, "empty"),
                               ("/topic/*.", 2, "empty"), ("/topic/.#", 0, "empty"),
                               ("/topic/a.#.>", 4, "#")):
            body = self.refused(dest, "malformed wildcard pattern")
            self.assertIn(dest, body)
            self.assertIn("at byte %d" % pos, body, dest)
            self.assertIn(why, body, dest)
        send_all(self.client(), ["/topic/ok.still"])
        self.assertEqual(messages(keep, 1)[0]["destination"], "/topic/ok.still")
        c = self.client()
        subscribe(c, "/queue/kept")
        self.assertEqual(c.read_frame().body, b"waiting")

    def test_a_wildcard_queue_subscription_is_refused_not_silent(self):
        body = self.refused("/queue/orders.*", "wildcard queue subscriptions are not supported")
        self.assertIn("/queue/orders.*", body)

    def test_plain_names_with_empty_elements_still_work(self):
        c = self.client()
        subscribe(c, "/topic/a..b")
        send_all(self.client(), ["/topic/a..b"])
        messages(c, 1)


class Permissions(BrokerTest):
    """A user may subscribe to a pattern only where its read permission
    covers every name the pattern can match."""

    def setUp(self):
        # carol: bob's hash (password "builder"), reading /topic/news. only
        with open(os.path.join(harness.ROOT, "etc", "users.example")) as f:
            bob = [line for line in f if line.startswith("bob:")][0]
        fd, self.users = tempfile.mkstemp(prefix="eft-users-")
        self.addCleanup(os.unlink, self.users)
        with os.fdopen(fd, "w") as f:
            f.write("carol:%s:read=/topic/news.:write=/topic/\n" % bob.split(":")[1])
        self.config = "users-file = %s\nallow-anonymous = no\n" % self.users
        super().setUp()

    def carol(self):
        c = self.client(connect=None)
        c.connect(headers={"login": "carol", "passcode": "builder"})
        return c

    def test_a_pattern_inside_the_permission_is_allowed(self):
        c = self.carol()
        for i, dest in enumerate(("/topic/news.*", "/topic/news.>", "/topic/news.eu.#")):
            subscribe(c, dest, sid=str(i))
        send_all(self.carol(), ["/topic/news.eu.x"])
        self.assertEqual(sorted(f["subscription"] for f in messages(c, 2)), ["1", "2"])

    def test_a_pattern_that_could_reach_outside_is_denied(self):
        for dest in ("/topic/*", "/topic/#", "/topic/news.#", "/topic/*.news"):
            c = self.carol()
            c.send_frame("SUBSCRIBE", [("destination", dest), ("id", "0")])
            f = c.expect_error_and_close()
            self.assertEqual(f["message"], "permission denied", dest)
            self.assertIn("every name it can match", f.body.decode())


class DurableWildcards(DataDirTest):
    """A durable subscription may be a pattern; what it gets while away is
    kept, across kill -9."""

    SUB = [("destination", "/topic/dw.*"), ("id", "d"), ("activemq.subscriptionName", "dw"),
           ("ack", "client-individual")]

    def sub(self, b):
        c = RawClient(b.port)
        self.clients.append(c)
        c.connect(headers={"client-id": "app"})
        c.send_frame("SUBSCRIBE", self.SUB + [("receipt", "s")])
        expect_receipt(c, "s")
        return c

    @unittest.skipIf(harness.TRANSPORT == "tls",
                     "the journal does not depend on the transport: runs in the tcp pass")
    def test_durable_wildcard_subscription_survives_kill9(self):
        b = self.start_on_data("fsync = always\n")
        self.sub(b).close()
        p = self.connect(b)
        for name in ("dw.a", "dw.b", "other.a", "dw.a.b"):
            send(p, "/topic/" + name, name, receipt=name, headers=[("persistent", "true")])
        self.crash(b)
        b = self.start_on_data("fsync = always\n")
        c = self.sub(b)
        got = messages(c, 2)
        self.assertEqual([f.body for f in got], [b"dw.a", b"dw.b"])
        self.assertEqual([f["destination"] for f in got], ["/topic/dw.a", "/topic/dw.b"])


if __name__ == "__main__":
    unittest.main()
