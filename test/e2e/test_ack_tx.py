"""Acknowledgement modes (auto, client, client-individual) in each STOMP
version, NACK, what happens to unacknowledged messages when a subscriber
goes away, and transactions (BEGIN/COMMIT/ABORT) around SEND and ACK."""

import socket
import struct
import unittest

from harness import BrokerTest, frame
from harness import expect_receipt, subscribe


def send_many(c, dest, bodies, receipt="done", headers=()):
    data = b""
    for i, body in enumerate(bodies):
        h = [("destination", dest)] + list(headers)
        if i == len(bodies) - 1 and receipt:
            h.append(("receipt", receipt))
        data += frame("SEND", h, body)
    c.send(data)
    if receipt:
        expect_receipt(c, receipt)


def send_in_tx(c, dest, bodies, tx, receipt="in-tx"):
    """SENDs in transaction tx, the last asking for a RECEIPT, which comes
    at COMMIT (RabbitMQ's way), so nothing is waited for here."""
    send_many(c, dest, bodies, receipt=None, headers=[("transaction", tx)] +
              ([("receipt", receipt)] if receipt else []))


def disconnect(c):
    c.send(b"DISCONNECT\nreceipt:bye\n\n\0")
    expect_receipt(c, "bye")
    c.expect_closed()


def bodies(frames):
    return [f.body.decode() for f in frames]


def redelivered(frames):
    return [f.get("redelivered") for f in frames]


class AckTest(BrokerTest):

    def drain(self, dest, n, wait=0.3):
        """A fresh auto-ack consumer takes exactly n messages from dest."""
        d = self.client()
        d.send_frame("SUBSCRIBE", [("destination", dest), ("id", "drain")])
        frames = d.read_frames(n) if n else []
        d.expect_nothing(wait)
        return frames

    def test_auto_ack(self):
        c = self.client()
        subscribe(c, "/queue/auto")
        p = self.client()
        send_many(p, "/queue/auto", ["a", "b", "c"])
        self.assertEqual(bodies(c.read_frames(3)), ["a", "b", "c"])
        disconnect(c)
        self.drain("/queue/auto", 0)

    def test_explicit_auto_ack_mode(self):
        c = self.client()
        subscribe(c, "/queue/auto2", ack="auto")
        p = self.client()
        send_many(p, "/queue/auto2", ["a"])
        self.assertEqual(c.expect("MESSAGE").body, b"a")
        c.close()
        self.drain("/queue/auto2", 0)

    def test_bad_ack_mode_is_error(self):
        c = self.client()
        c.send_frame("SUBSCRIBE", [("destination", "/queue/x"), ("id", "0"), ("ack", "sometimes")])
        self.assertTrue(c.expect_error_and_close().get("message"))

    def test_client_mode_1_2_ack_header_and_ack_by_id(self):
        c = self.client("1.2")
        subscribe(c, "/queue/c12", ack="client")
        p = self.client()
        send_many(p, "/queue/c12", ["one"])
        m = c.expect("MESSAGE")
        ack = m.get("ack")
        self.assertTrue(ack, "1.2 MESSAGE in client mode needs an ack header: %r" % m)
        c.send_frame("ACK", [("id", ack), ("receipt", "a1")])
        expect_receipt(c, "a1")
        disconnect(c)
        self.drain("/queue/c12", 0)

    def test_client_individual_1_2_has_ack_header(self):
        c = self.client("1.2")
        subscribe(c, "/queue/ci12", ack="client-individual")
        p = self.client()
        send_many(p, "/queue/ci12", ["one", "two"])
        m1, m2 = c.read_frames(2)
        self.assertTrue(m1.get("ack") and m2.get("ack"), (m1, m2))
        self.assertNotEqual(m1["ack"], m2["ack"])

    def test_client_mode_ack_is_cumulative(self):
        c = self.client()
        subscribe(c, "/queue/cum", ack="client")
        p = self.client()
        send_many(p, "/queue/cum", ["1", "2", "3", "4", "5"])
        ms = c.read_frames(5)
        self.assertEqual(bodies(ms), ["1", "2", "3", "4", "5"])
        c.send_frame("ACK", [("id", ms[2]["ack"]), ("receipt", "a3")])
        expect_receipt(c, "a3")
        disconnect(c)
        got = self.drain("/queue/cum", 2)
        self.assertEqual(bodies(got), ["4", "5"])
        self.assertEqual(redelivered(got), ["true", "true"])

    def test_client_individual_ack_acks_only_one(self):
        c = self.client()
        subscribe(c, "/queue/ind", ack="client-individual")
        p = self.client()
        send_many(p, "/queue/ind", ["1", "2", "3"])
        ms = c.read_frames(3)
        c.send_frame("ACK", [("id", ms[1]["ack"]), ("receipt", "a2")])
        expect_receipt(c, "a2")
        disconnect(c)
        got = self.drain("/queue/ind", 2)
        self.assertEqual(bodies(got), ["1", "3"])
        self.assertEqual(redelivered(got), ["true", "true"])

    def test_ack_1_1_by_subscription_and_message_id(self):
        c = self.client("1.1")
        subscribe(c, "/queue/a11", sid="s11", ack="client-individual")
        p = self.client()
        send_many(p, "/queue/a11", ["1", "2"])
        m1, m2 = c.read_frames(2)
        self.assertEqual(m1.get("subscription"), "s11")
        c.send_frame("ACK", [("subscription", "s11"), ("message-id", m1["message-id"]),
                             ("receipt", "a")])
        expect_receipt(c, "a")
        disconnect(c)
        got = self.drain("/queue/a11", 1)
        self.assertEqual(bodies(got), ["2"])
        self.assertEqual(redelivered(got), ["true"])

    def test_ack_1_0_by_message_id(self):
        c = self.client(connect=None)
        c.send(b"CONNECT\nlogin:guest\npasscode:guest\n\n\0")
        c.expect("CONNECTED")
        c.send(b"SUBSCRIBE\ndestination:/queue/a10\nack:client\nreceipt:s\n\n\0")
        expect_receipt(c, "s")
        p = self.client()
        send_many(p, "/queue/a10", ["1", "2", "3"])
        ms = c.read_frames(3)
        for i in (0, 1):
            c.send_frame("ACK", [("message-id", ms[i]["message-id"]), ("receipt", "a%d" % i)])
            expect_receipt(c, "a%d" % i)
        disconnect(c)
        got = self.drain("/queue/a10", 1)
        self.assertEqual(bodies(got), ["3"])

    def test_ack_without_id_is_error(self):
        c = self.client()
        subscribe(c, "/queue/noackid", ack="client")
        c.send(b"ACK\nreceipt:r\n\n\0")
        f = c.expect_error_and_close()
        self.assertEqual(f.get("receipt-id"), "r")

    def test_nack_requeues_1_2(self):
        c = self.client()
        subscribe(c, "/queue/nack", ack="client-individual")
        p = self.client()
        send_many(p, "/queue/nack", ["n1"])
        m = c.expect("MESSAGE")
        self.assertIsNone(m.get("redelivered"))
        c.send_frame("NACK", [("id", m["ack"])])
        again = c.expect("MESSAGE")
        self.assertEqual(again.body, b"n1")
        self.assertEqual(again.get("redelivered"), "true")
        self.assertEqual(again["message-id"], m["message-id"])
        c.send_frame("ACK", [("id", again["ack"]), ("receipt", "a")])
        expect_receipt(c, "a")
        disconnect(c)
        self.drain("/queue/nack", 0)

    def test_nack_requeues_1_1(self):
        c = self.client("1.1")
        subscribe(c, "/queue/nack11", sid="s", ack="client-individual")
        p = self.client()
        send_many(p, "/queue/nack11", ["n1"])
        m = c.expect("MESSAGE")
        c.send_frame("NACK", [("subscription", "s"), ("message-id", m["message-id"])])
        again = c.expect("MESSAGE")
        self.assertEqual((again.body, again.get("redelivered")), (b"n1", "true"))

    def test_ack_from_another_connection_does_not_count(self):
        c = self.client()
        subscribe(c, "/queue/theirs", ack="client-individual")
        p = self.client()
        send_many(p, "/queue/theirs", ["m"])
        m = c.expect("MESSAGE")
        other = self.client()
        other.send_frame("ACK", [("id", m["ack"]), ("receipt", "x")])
        other.read_frame()  # RECEIPT or ERROR: either way it must not settle c's message
        c.close()
        d = self.client()
        d.send_frame("SUBSCRIBE", [("destination", "/queue/theirs"), ("id", "0")])
        again = d.expect("MESSAGE")
        self.assertEqual((again.body, again.get("redelivered")), (b"m", "true"))

    def test_prefetch_count_limits_unacked_in_flight(self):
        c = self.client()
        c.send_frame("SUBSCRIBE", [("destination", "/queue/pf"), ("id", "0"),
                                   ("ack", "client-individual"), ("prefetch-count", "2"),
                                   ("receipt", "s")])
        expect_receipt(c, "s")
        p = self.client()
        send_many(p, "/queue/pf", ["1", "2", "3", "4", "5"])
        ms = c.read_frames(2)
        self.assertEqual(bodies(ms), ["1", "2"])
        c.expect_nothing(0.2)
        c.send_frame("ACK", [("id", ms[0]["ack"])])
        self.assertEqual(c.expect("MESSAGE").body, b"3")
        c.expect_nothing(0.2)
        # what c cannot take yet goes to another subscriber
        d = self.client()
        d.send_frame("SUBSCRIBE", [("destination", "/queue/pf"), ("id", "0")])
        self.assertEqual(bodies(d.read_frames(2)), ["4", "5"])
        d.expect_nothing(0.1)
        c.expect_nothing(0.1)

    def test_bad_prefetch_count_is_error(self):
        c = self.client()
        c.send_frame("SUBSCRIBE", [("destination", "/queue/pf"), ("id", "0"),
                                   ("prefetch-count", "lots")])
        self.assertTrue(c.expect_error_and_close().get("message"))

    def check_requeued_in_order(self, dest, n=3):
        got = self.drain(dest, n)
        self.assertEqual(bodies(got), [str(i) for i in range(1, n + 1)])
        self.assertEqual(redelivered(got), ["true"] * n)

    def test_unacked_return_on_unsubscribe(self):
        c = self.client()
        subscribe(c, "/queue/ret-u", ack="client")
        p = self.client()
        send_many(p, "/queue/ret-u", ["1", "2", "3"])
        c.read_frames(3)
        c.send(b"UNSUBSCRIBE\nid:0\nreceipt:u\n\n\0")
        expect_receipt(c, "u")
        self.check_requeued_in_order("/queue/ret-u")
        c.expect_nothing(0.1)

    def test_unacked_return_on_disconnect(self):
        c = self.client()
        subscribe(c, "/queue/ret-d", ack="client-individual")
        p = self.client()
        send_many(p, "/queue/ret-d", ["1", "2", "3"])
        c.read_frames(3)
        disconnect(c)
        self.check_requeued_in_order("/queue/ret-d")

    def test_unacked_return_on_socket_close(self):
        c = self.client()
        subscribe(c, "/queue/ret-c", ack="client")
        p = self.client()
        send_many(p, "/queue/ret-c", ["1", "2", "3"])
        c.read_frames(3)
        c.close()
        self.check_requeued_in_order("/queue/ret-c")

    def test_unacked_return_on_connection_reset(self):
        c = self.client()
        subscribe(c, "/queue/ret-r", ack="client-individual")
        p = self.client()
        send_many(p, "/queue/ret-r", ["1", "2", "3"])
        c.read_frames(3)
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()  # RST
        self.check_requeued_in_order("/queue/ret-r")

    def test_unacked_return_before_later_messages(self):
        c = self.client()
        subscribe(c, "/queue/ret-o", ack="client")
        p = self.client()
        send_many(p, "/queue/ret-o", ["1", "2"])
        c.read_frames(2)
        disconnect(c)
        send_many(p, "/queue/ret-o", ["3"], receipt="d3")
        got = self.drain("/queue/ret-o", 3)
        self.assertEqual(bodies(got), ["1", "2", "3"])
        self.assertEqual(redelivered(got), ["true", "true", None])

    def test_unacked_message_goes_to_other_subscriber(self):
        a = self.client()
        subscribe(a, "/queue/other", ack="client")
        p = self.client()
        send_many(p, "/queue/other", ["x"])
        self.assertEqual(a.expect("MESSAGE").body, b"x")
        b = self.client()
        subscribe(b, "/queue/other", ack="client")
        b.expect_nothing(0.2)       # a still holds it
        a.close()
        m = b.expect("MESSAGE")
        self.assertEqual((m.body, m.get("redelivered")), (b"x", "true"))


class TransactionTest(BrokerTest):

    def test_send_in_transaction_delivered_at_commit(self):
        c = self.client()
        subscribe(c, "/queue/tx")
        p = self.client()
        p.send(b"BEGIN\ntransaction:t1\n\n\0")
        p.send(frame("SEND", [("destination", "/queue/tx"), ("transaction", "t1"),
                              ("receipt", "in-tx-1")], b"t-1"))
        send_in_tx(p, "/queue/tx", ["t-2"], "t1", receipt="in-tx-2")
        c.expect_nothing(0.3)
        send_many(p, "/queue/tx", ["plain"], receipt="no-tx")   # no RECEIPT came before it
        self.assertEqual(c.expect("MESSAGE").body, b"plain")
        p.send(b"COMMIT\ntransaction:t1\nreceipt:commit\n\n\0")
        # the SENDs' RECEIPTs come at COMMIT, in order, before its own
        for rid in ("in-tx-1", "in-tx-2", "commit"):
            expect_receipt(p, rid)
        got = c.read_frames(2)
        self.assertEqual(bodies(got), ["t-1", "t-2"])
        self.assertIsNone(got[0].get("transaction"), got[0])
        c.expect_nothing(0.1)

    def test_send_in_transaction_to_topic(self):
        c = self.client()
        subscribe(c, "/topic/tx")
        p = self.client()
        p.send(b"BEGIN\ntransaction:t\n\n\0")
        send_in_tx(p, "/topic/tx", ["x"], "t", receipt="r")
        c.expect_nothing(0.2)
        p.send(b"COMMIT\ntransaction:t\n\n\0")
        self.assertEqual(c.expect("MESSAGE").body, b"x")

    def test_abort_discards(self):
        c = self.client()
        subscribe(c, "/queue/txa")
        p = self.client()
        p.send(b"BEGIN\ntransaction:t1\n\n\0")
        send_in_tx(p, "/queue/txa", ["gone"], "t1")
        p.send(b"ABORT\ntransaction:t1\nreceipt:abort\n\n\0")
        # the aborted SEND's RECEIPT never comes (RabbitMQ drops it too)
        expect_receipt(p, "abort")
        c.expect_nothing(0.3)
        # the name can be used again
        p.send(b"BEGIN\ntransaction:t1\nreceipt:b2\n\n\0")
        expect_receipt(p, "b2")

    def test_disconnect_discards(self):
        c = self.client()
        subscribe(c, "/queue/txd")
        p = self.client()
        p.send(b"BEGIN\ntransaction:t1\n\n\0")
        send_in_tx(p, "/queue/txd", ["gone"], "t1")
        disconnect(p)
        c.expect_nothing(0.3)

    def test_socket_close_discards(self):
        c = self.client()
        subscribe(c, "/queue/txc")
        p = self.client()
        p.send(b"BEGIN\ntransaction:t1\n\n\0")
        send_in_tx(p, "/queue/txc", ["gone"], "t1")
        p.close()
        c.expect_nothing(0.3)

    def test_ack_in_transaction_takes_effect_at_commit(self):
        c = self.client()
        subscribe(c, "/queue/txack", ack="client-individual")
        p = self.client()
        send_many(p, "/queue/txack", ["m"])
        m = c.expect("MESSAGE")
        c.send(b"BEGIN\ntransaction:t\n\n\0")
        c.send_frame("ACK", [("id", m["ack"]), ("transaction", "t"), ("receipt", "a")])
        expect_receipt(c, "a")
        c.send(b"COMMIT\ntransaction:t\nreceipt:c\n\n\0")
        expect_receipt(c, "c")
        disconnect(c)
        self.drain_none("/queue/txack")

    def drain_none(self, dest):
        d = self.client()
        d.send_frame("SUBSCRIBE", [("destination", dest), ("id", "drain")])
        d.expect_nothing(0.3)

    def drain_one(self, dest):
        d = self.client()
        d.send_frame("SUBSCRIBE", [("destination", dest), ("id", "drain")])
        m = d.expect("MESSAGE")
        d.expect_nothing(0.2)
        return m

    def test_ack_in_aborted_transaction_leaves_message_unacked(self):
        c = self.client()
        subscribe(c, "/queue/txab", ack="client-individual")
        p = self.client()
        send_many(p, "/queue/txab", ["m"])
        m = c.expect("MESSAGE")
        c.send(b"BEGIN\ntransaction:t\n\n\0")
        c.send_frame("ACK", [("id", m["ack"]), ("transaction", "t")])
        c.send(b"ABORT\ntransaction:t\nreceipt:ab\n\n\0")
        expect_receipt(c, "ab")
        disconnect(c)
        again = self.drain_one("/queue/txab")
        self.assertEqual((again.body, again.get("redelivered")), (b"m", "true"))

    def test_ack_in_uncommitted_transaction_at_disconnect(self):
        c = self.client()
        subscribe(c, "/queue/txun", ack="client")
        p = self.client()
        send_many(p, "/queue/txun", ["m"])
        m = c.expect("MESSAGE")
        c.send(b"BEGIN\ntransaction:t\n\n\0")
        c.send_frame("ACK", [("id", m["ack"]), ("transaction", "t"), ("receipt", "a")])
        expect_receipt(c, "a")
        disconnect(c)
        again = self.drain_one("/queue/txun")
        self.assertEqual((again.body, again.get("redelivered")), (b"m", "true"))

    def test_nack_in_transaction_takes_effect_at_commit(self):
        c = self.client()
        subscribe(c, "/queue/txnack", ack="client-individual")
        p = self.client()
        send_many(p, "/queue/txnack", ["m"])
        m = c.expect("MESSAGE")
        c.send(b"BEGIN\ntransaction:t\n\n\0")
        c.send_frame("NACK", [("id", m["ack"]), ("transaction", "t"), ("receipt", "n")])
        expect_receipt(c, "n")
        c.expect_nothing(0.2)
        c.send(b"COMMIT\ntransaction:t\n\n\0")
        again = c.expect("MESSAGE")
        self.assertEqual((again.body, again.get("redelivered")), (b"m", "true"))

    def test_send_with_unknown_transaction(self):
        c = self.client()
        subscribe(c, "/queue/txu")
        p = self.client()
        p.send(b"SEND\ndestination:/queue/txu\ntransaction:nope\nreceipt:r\n\nx\0")
        f = p.expect_error_and_close()
        self.assertTrue(f.get("message"))
        self.assertEqual(f.get("receipt-id"), "r")
        c.expect_nothing(0.3)

    def test_commit_unknown_transaction(self):
        c = self.client()
        c.send(b"COMMIT\ntransaction:nope\n\n\0")
        self.assertTrue(c.expect_error_and_close().get("message"))

    def test_abort_unknown_transaction(self):
        c = self.client()
        c.send(b"ABORT\ntransaction:nope\n\n\0")
        self.assertTrue(c.expect_error_and_close().get("message"))

    def test_ack_with_unknown_transaction(self):
        c = self.client()
        subscribe(c, "/queue/txuack", ack="client")
        p = self.client()
        send_many(p, "/queue/txuack", ["m"])
        m = c.expect("MESSAGE")
        c.send_frame("ACK", [("id", m["ack"]), ("transaction", "nope")])
        self.assertTrue(c.expect_error_and_close().get("message"))

    def test_commit_twice_is_error(self):
        c = self.client()
        c.send(b"BEGIN\ntransaction:t\n\n\0COMMIT\ntransaction:t\nreceipt:c1\n\n\0")
        expect_receipt(c, "c1")
        c.send(b"COMMIT\ntransaction:t\n\n\0")
        c.expect_error_and_close()

    def test_begin_open_transaction_is_error(self):
        c = self.client()
        c.send(b"BEGIN\ntransaction:t\nreceipt:b1\n\n\0")
        expect_receipt(c, "b1")
        c.send(b"BEGIN\ntransaction:t\nreceipt:b2\n\n\0")
        f = c.expect_error_and_close()
        self.assertTrue(f.get("message"))
        self.assertEqual(f.get("receipt-id"), "b2")

    def test_begin_without_transaction_header_is_error(self):
        c = self.client()
        c.send(b"BEGIN\n\n\0")
        self.assertIn("transaction", c.expect_error_and_close()["message"])

    def test_transactions_belong_to_their_connection(self):
        a = self.client()
        a.send(b"BEGIN\ntransaction:shared\nreceipt:b\n\n\0")
        expect_receipt(a, "b")
        b = self.client()
        b.send(b"COMMIT\ntransaction:shared\n\n\0")
        b.expect_error_and_close()
        a.send(b"COMMIT\ntransaction:shared\nreceipt:c\n\n\0")
        expect_receipt(a, "c")


if __name__ == "__main__":
    unittest.main()
