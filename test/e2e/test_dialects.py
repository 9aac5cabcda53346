"""RabbitMQ's destinations (issue 25), as its STOMP plugin names them:
/exchange/amq.topic/KEY is /topic/KEY, /exchange/amq.direct/KEY delivers to
subscriptions bound with exactly KEY, /exchange/amq.fanout to every one of
its subscriptions whatever the key, /amq/queue/NAME is the queue NAME, which
must exist.  An exchange eftd does not have, or a missing routing key, gets
an ERROR naming it, and nobody else's subscriptions or queued messages are
touched."""

import unittest

from harness import BrokerTest, expect_messages, send_receipted, subscribe


def send_all(c, sends):
    """SENDs (destination, body), the last with a RECEIPT."""
    send_receipted(c, [(d, body, ()) for d, body in sends])


def got(c, n):
    return sorted((f["subscription"], f.body.decode(), f["destination"])
                  for f in expect_messages(c, n))


class Exchanges(BrokerTest):

    def test_amq_topic_is_the_topic_of_its_key(self):
        c = self.client()
        subscribe(c, "/exchange/amq.topic/stock.ACME", sid="x")
        subscribe(c, "/topic/stock.ACME", sid="t")
        subscribe(c, "/exchange/amq.topic/stock.#", sid="w")   # a binding key with a wildcard
        send_all(self.client(), [("/exchange/amq.topic/stock.ACME", "1"), ("/topic/stock.ACME", "2"),
                                 ("/exchange/amq.topic/stock.IBM", "3")])
        self.assertEqual(got(c, 7), sorted(
            [(sid, b, "/topic/stock.ACME") for sid in "xtw" for b in "12"] +
            [("w", "3", "/topic/stock.IBM")]))

    def test_amq_direct_delivers_by_the_exact_key(self):
        a, b = self.client(), self.client()
        subscribe(a, "/exchange/amq.direct/k1", sid="a")
        subscribe(b, "/exchange/amq.direct/k2", sid="b")
        star = self.client()
        subscribe(star, "/exchange/amq.direct/k.*", sid="s")   # no wildcards in a direct binding
        send_all(self.client(), [("/exchange/amq.direct/k1", "to-k1"), ("/topic/k1", "not-direct"),
                                 ("/exchange/amq.direct/k2", "to-k2"),
                                 ("/exchange/amq.direct/k.x", "k.x")])
        self.assertEqual(got(a, 1), [("a", "to-k1", "/exchange/amq.direct/k1")])
        self.assertEqual(got(b, 1), [("b", "to-k2", "/exchange/amq.direct/k2")])
        star.expect_nothing()

    def test_amq_fanout_delivers_everything_whatever_the_key(self):
        subs = [self.client() for _ in range(2)]
        subscribe(subs[0], "/exchange/amq.fanout", sid="f0")
        subscribe(subs[1], "/exchange/amq.fanout/any.key", sid="f1")
        send_all(self.client(), [("/exchange/amq.fanout/route", "1"), ("/exchange/amq.fanout", "2")])
        for i, c in enumerate(subs):
            self.assertEqual([(s, body) for s, body, _ in got(c, 2)], [("f%d" % i, "1"), ("f%d" % i, "2")])

    def test_an_unknown_exchange_is_refused_by_name(self):
        keep = self.client()
        subscribe(keep, "/exchange/amq.fanout", sid="k")
        for command in ("SUBSCRIBE", "SEND"):
            c = self.client()
            c.send_frame(command, [("destination", "/exchange/does.not.exist/key"), ("id", "0")])
            f = c.expect_error_and_close()
            self.assertEqual(f["message"], "not_found")
            self.assertIn("does.not.exist", f.body.decode())
        send_all(self.client(), [("/exchange/amq.fanout", "still")])
        self.assertEqual(len(got(keep, 1)), 1)

    def test_a_missing_routing_key_is_refused(self):
        for dest in ("/exchange/amq.topic", "/exchange/amq.direct/"):
            c = self.client()
            c.send_frame("SUBSCRIBE", [("destination", dest), ("id", "0")])
            f = c.expect_error_and_close()
            self.assertEqual(f["message"], "no routing key", dest)


class AmqQueue(BrokerTest):

    def test_a_queue_that_exists(self):
        p = self.client()
        send_all(p, [("/queue/orders", "made by /queue/")])
        send_all(p, [("/amq/queue/orders", "sent to /amq/queue/")])
        c = self.client()
        subscribe(c, "/amq/queue/orders", sid="q")
        self.assertEqual(got(c, 2), [("q", "made by /queue/", "/queue/orders"),
                                     ("q", "sent to /amq/queue/", "/queue/orders")])

    def test_a_queue_that_does_not_exist_is_not_found(self):
        for command in ("SEND", "SUBSCRIBE"):
            c = self.client()
            c.send_frame(command, [("destination", "/amq/queue/nowhere"), ("id", "0")])
            f = c.expect_error_and_close()
            self.assertEqual(f["message"], "not_found")
            self.assertIn("'nowhere'", f.body.decode())


if __name__ == "__main__":
    unittest.main()
