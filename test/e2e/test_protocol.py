"""STOMP framing and the connection-level protocol, byte for byte: CONNECT and
version negotiation, receipts, ERROR frames, header escaping per version,
repeated headers, line endings, frames split or batched, and what a MESSAGE
carries."""

import socket
import unittest

from harness import send, BrokerTest, frame, SLOW
from harness import eftd_has_read, expect_receipt, subscribe, wait_for



def header_values(f, name):
    return [v for k, v in f.headers if k == name]


def read_all_until_closed(c, timeout=5):
    """Every frame the server sends until it closes the connection."""
    frames, closed = c.drain(timeout * SLOW)
    if not closed:
        raise AssertionError("connection not closed in time; got %r" % (frames[:3],))
    return frames


def assert_frames_well_formed(testcase, c, frames):
    """Every frame is COMMAND, then name:value lines, blank line, body, NUL;
    c has no incomplete frame left."""
    testcase.assertEqual(c.buf, b"", "no end of headers or no NUL in %r" % c.buf[:200])
    for f in frames:
        for name, value in f.headers:
            testcase.assertIsNotNone(value, "header line without ':' %r in frame %r" % (name, f))
    return frames


class ConnectTest(BrokerTest):

    def test_connect_without_accept_version_is_stomp_1_0(self):
        c = self.client(connect=None)
        c.send(b"CONNECT\nlogin:guest\npasscode:guest\n\n\0")
        f = c.expect("CONNECTED")
        self.assertTrue(f.get("session"), f)
        self.assertIsNone(f.get("version"), "a 1.0 CONNECTED has no version header: %r" % f)

    def test_connect_without_accept_version_speaks_1_0(self):
        # 1.0: no escaping, so a backslash in a header value is literal, and
        # SUBSCRIBE needs no id.
        c = self.client(connect=None)
        c.send(b"CONNECT\n\n\0")
        c.expect("CONNECTED")
        c.send(b"SUBSCRIBE\ndestination:/queue/v10\nreceipt:s\n\n\0")
        expect_receipt(c, "s")
        c.send(b"SEND\ndestination:/queue/v10\nx-path:C:\\dir\\t\n\nhi\0")
        m = c.expect("MESSAGE")
        self.assertEqual(m.get("x-path"), "C:\\dir\\t")
        self.assertEqual(m.body, b"hi")

    def test_stomp_frame_connects(self):
        c = self.client(connect=None)
        c.send(b"STOMP\naccept-version:1.2\nhost:/\n\n\0")
        f = c.expect("CONNECTED")
        self.assertEqual(f.get("version"), "1.2")

    def test_accept_version_list_picks_1_2(self):
        c = self.client(connect=None)
        c.send(b"CONNECT\naccept-version:1.0,1.1,1.2\nhost:/\n\n\0")
        self.assertEqual(c.expect("CONNECTED").get("version"), "1.2")

    def test_accept_version_list_out_of_order_picks_highest(self):
        c = self.client(connect=None)
        c.send(b"CONNECT\naccept-version:1.2,1.0,1.1\nhost:/\n\n\0")
        self.assertEqual(c.expect("CONNECTED").get("version"), "1.2")

    def test_accept_version_1_1(self):
        c = self.client(connect=None)
        c.send(b"CONNECT\naccept-version:1.1\nhost:/\n\n\0")
        self.assertEqual(c.expect("CONNECTED").get("version"), "1.1")

    def test_accept_version_1_0_1_1_picks_1_1(self):
        c = self.client(connect=None)
        c.send(b"CONNECT\naccept-version:1.0,1.1\nhost:/\n\n\0")
        self.assertEqual(c.expect("CONNECTED").get("version"), "1.1")

    def test_accept_version_1_0_is_answered_with_version_1_0(self):
        # A client that sent accept-version speaks 1.1+ framing of CONNECT and
        # is told the version chosen (the 1.2 spec makes `version` required).
        c = self.client(connect=None)
        c.send(b"CONNECT\naccept-version:1.0\nhost:/\n\n\0")
        self.assertEqual(c.expect("CONNECTED").get("version"), "1.0")

    def test_accept_version_with_unknown_versions_picks_common_one(self):
        c = self.client(connect=None)
        c.send(b"CONNECT\naccept-version:1.1,2.0,3.1\nhost:/\n\n\0")
        self.assertEqual(c.expect("CONNECTED").get("version"), "1.1")

    def test_unsupported_version_gets_error_with_version_header_then_close(self):
        c = self.client(connect=None)
        c.send(b"CONNECT\naccept-version:2.0\nhost:/\n\n\0")
        frames = assert_frames_well_formed(self, c, read_all_until_closed(c))
        self.assertEqual(len(frames), 1, "expected one ERROR frame, got %r" % frames)
        self.assertEqual(frames[0].command, "ERROR")
        self.assertEqual(frames[0].get("version"), "1.0,1.1,1.2")
        self.assertTrue(frames[0].get("message"), frames)

    def test_connected_headers(self):
        c = self.client(connect=None)
        c.send(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
        f = c.expect("CONNECTED")
        self.assertEqual(f.get("version"), "1.2")
        self.assertTrue(f.get("server", "").startswith("eft/"), f)
        self.assertTrue(f.get("session"), f)
        hb = f.get("heart-beat")
        self.assertIsNotNone(hb, f)
        sx, sy = hb.split(",")
        self.assertEqual((sx, sy), ("0", "0"), "no heart-beat asked, none offered: %r" % f)

    def test_sessions_differ(self):
        a = self.client(connect=None)
        b = self.client(connect=None)
        a.send(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
        b.send(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
        self.assertNotEqual(a.expect("CONNECTED")["session"], b.expect("CONNECTED")["session"])

    def test_connect_accepts_any_host_and_login(self):
        c = self.client(connect=None)
        c.send(b"CONNECT\naccept-version:1.2\nhost:some.vhost\nlogin:guest\npasscode:guest\n\n\0")
        c.expect("CONNECTED")

    def test_frame_before_connect_is_error_then_close(self):
        c = self.client(connect=None)
        c.send(b"SEND\ndestination:/queue/early\n\nx\0")
        f = c.expect_error_and_close()
        self.assertTrue(f.get("message"), f)
        # and nothing was queued
        d = self.client()
        subscribe(d, "/queue/early")
        d.expect_nothing(0.3)

    def test_subscribe_before_connect_is_error_then_close(self):
        c = self.client(connect=None)
        c.send(b"SUBSCRIBE\ndestination:/queue/early\nid:0\nreceipt:r1\n\n\0")
        f = c.expect_error_and_close()
        self.assertTrue(f.get("message"), f)
        self.assertEqual(f.get("receipt-id"), "r1")

    def test_unknown_command_is_error_then_close(self):
        c = self.client()
        c.send(b"FROB\nreceipt:r7\n\n\0")
        f = c.expect_error_and_close()
        self.assertTrue(f.get("message"), f)
        self.assertEqual(f.get("receipt-id"), "r7")

    def test_lowercase_command_is_unknown(self):
        c = self.client()
        c.send(b"send\ndestination:/queue/lc\n\nx\0")
        c.expect_error_and_close()

    def test_unknown_command_before_connect_is_error_then_close(self):
        c = self.client(connect=None)
        c.send(b"HELLO\n\n\0")
        self.assertTrue(c.expect_error_and_close().get("message"))

    def test_second_connect_is_error(self):
        c = self.client()
        c.send(b"CONNECT\naccept-version:1.2\nhost:/\n\n\0")
        f = c.expect_error_and_close()
        self.assertTrue(f.get("message"), f)


class ReceiptTest(BrokerTest):

    def test_receipt_on_every_command(self):
        c = self.client()
        c.send(b"SUBSCRIBE\ndestination:/queue/rc\nid:s1\nack:client-individual\nreceipt:r-sub\n\n\0")
        expect_receipt(c, "r-sub")
        c.send(b"SEND\ndestination:/queue/rc\nreceipt:r-send\n\none\0")
        got = {f.command: f for f in c.read_frames(2)}
        self.assertEqual(set(got), {"MESSAGE", "RECEIPT"})
        self.assertEqual(got["RECEIPT"]["receipt-id"], "r-send")
        ack = got["MESSAGE"]["ack"]
        c.send(frame("ACK", [("id", ack), ("receipt", "r-ack")]))
        expect_receipt(c, "r-ack")
        c.send(b"BEGIN\ntransaction:t1\nreceipt:r-begin\n\n\0")
        expect_receipt(c, "r-begin")
        c.send(b"COMMIT\ntransaction:t1\nreceipt:r-commit\n\n\0")
        expect_receipt(c, "r-commit")
        c.send(b"BEGIN\ntransaction:t2\nreceipt:r-begin2\n\n\0")
        expect_receipt(c, "r-begin2")
        c.send(b"ABORT\ntransaction:t2\nreceipt:r-abort\n\n\0")
        expect_receipt(c, "r-abort")
        c.send(b"SEND\ndestination:/queue/rc\n\ntwo\0")
        m = c.expect("MESSAGE")
        c.send(frame("NACK", [("id", m["ack"]), ("receipt", "r-nack")]))
        frames = c.read_frames(2)  # the RECEIPT and the redelivered MESSAGE, either order
        self.assertIn("r-nack", [f.get("receipt-id") for f in frames if f.command == "RECEIPT"])
        c.send(b"UNSUBSCRIBE\nid:s1\nreceipt:r-unsub\n\n\0")
        expect_receipt(c, "r-unsub")

    def test_receipt_id_is_escaped_like_any_header(self):
        c = self.client()
        c.send(b"SEND\ndestination:/queue/re\nreceipt:a\\cb\\\\c\n\n\0")
        expect_receipt(c, "a\\cb\\\\c")

    def test_disconnect_with_receipt_then_server_closes(self):
        c = self.client()
        c.send(b"DISCONNECT\nreceipt:bye-77\n\n\0")
        expect_receipt(c, "bye-77")
        c.expect_closed()

    def test_disconnect_without_receipt_closes(self):
        c = self.client()
        c.send(b"DISCONNECT\n\n\0")
        c.expect_closed()

    def test_frames_after_disconnect_are_ignored(self):
        c = self.client()
        c.send(b"DISCONNECT\nreceipt:d\n\n\0SEND\ndestination:/queue/after\n\nlate\0")
        expect_receipt(c, "d")
        c.expect_closed()
        d = self.client()
        subscribe(d, "/queue/after")
        d.expect_nothing(0.3)


class ErrorTest(BrokerTest):

    def test_error_carries_message_and_receipt_id(self):
        c = self.client()
        c.send(b"SEND\ndestination:/foo/x\nreceipt:r-42\n\nx\0")
        f = c.expect_error_and_close()
        self.assertTrue(f.get("message"), f)
        self.assertEqual(f.get("receipt-id"), "r-42")

    def test_error_without_receipt_has_no_receipt_id(self):
        c = self.client()
        c.send(b"SEND\ndestination:/foo/x\n\nx\0")
        f = c.expect_error_and_close()
        self.assertTrue(f.get("message"), f)
        self.assertIsNone(f.get("receipt-id"), f)

    def test_send_without_destination(self):
        c = self.client()
        c.send(b"SEND\nreceipt:r1\n\nbody\0")
        f = c.expect_error_and_close()
        self.assertIn("destination", f["message"])
        self.assertEqual(f.get("receipt-id"), "r1")

    def test_subscribe_without_destination(self):
        c = self.client()
        c.send(b"SUBSCRIBE\nid:0\nreceipt:r2\n\n\0")
        f = c.expect_error_and_close()
        self.assertIn("destination", f["message"])
        self.assertEqual(f.get("receipt-id"), "r2")

    def test_subscribe_without_id_1_2(self):
        c = self.client("1.2")
        c.send(b"SUBSCRIBE\ndestination:/queue/noid\nreceipt:r3\n\n\0")
        f = c.expect_error_and_close()
        self.assertIn("id", f["message"])
        self.assertEqual(f.get("receipt-id"), "r3")

    def test_subscribe_without_id_1_1(self):
        c = self.client("1.1")
        c.send(b"SUBSCRIBE\ndestination:/queue/noid\n\n\0")
        f = c.expect_error_and_close()
        self.assertIn("id", f["message"])

    def test_subscribe_without_id_allowed_in_1_0(self):
        c = self.client(connect=None)
        c.send(b"CONNECT\n\n\0")
        c.expect("CONNECTED")
        c.send(b"SUBSCRIBE\ndestination:/queue/noid10\nreceipt:r\n\n\0")
        expect_receipt(c, "r")
        p = self.client()
        send(p, "/queue/noid10", "hello", receipt="p")
        m = c.expect("MESSAGE")
        self.assertEqual(m.body, b"hello")
        self.assertEqual(m.get("destination"), "/queue/noid10")
        # UNSUBSCRIBE by destination, as 1.0 clients do
        c.send(b"UNSUBSCRIBE\ndestination:/queue/noid10\nreceipt:u\n\n\0")
        expect_receipt(c, "u")
        send(p, "/queue/noid10", "again", receipt="p2")
        c.expect_nothing(0.3)

    def test_unknown_destination_prefix_on_send(self):
        c = self.client()
        c.send(b"SEND\ndestination:/foo/x\n\nx\0")
        f = c.expect_error_and_close()
        self.assertIn("destination", f["message"])

    def test_unknown_destination_prefix_on_subscribe(self):
        c = self.client()
        c.send(b"SUBSCRIBE\ndestination:/foo/x\nid:0\n\n\0")
        f = c.expect_error_and_close()
        self.assertIn("destination", f["message"])

    def test_destination_with_escaped_newline_or_cr_is_refused(self):
        """No STOMP 1.0 receiver could be told such a name (found by fuzzing)."""
        for esc in (b"\\n", b"\\r"):
            c = self.client()
            c.send(b"SEND\ndestination:/queue/a" + esc + b"b\nreceipt:r\n\nx\0")
            f = c.expect_error_and_close()
            self.assertEqual(f["message"], "invalid destination")
            self.assertEqual(f["receipt-id"], "r")

    def test_unsubscribe_without_id_1_2(self):
        c = self.client("1.2")
        subscribe(c, "/queue/u")
        c.send(b"UNSUBSCRIBE\nreceipt:r\n\n\0")
        f = c.expect_error_and_close()
        self.assertIn("id", f["message"])
        self.assertEqual(f.get("receipt-id"), "r")

    def test_header_line_without_colon_is_error(self):
        c = self.client()
        c.send(b"SEND\ndestination:/queue/nocolon\njunk\n\nx\0")
        self.assertTrue(c.expect_error_and_close().get("message"))

    def test_bad_content_length_is_error(self):
        for value in (b"abc", b"-1", b"12x", b"99999999999999999999999"):
            with self.subTest(value=value):
                c = self.client()
                c.send(b"SEND\ndestination:/queue/badcl\ncontent-length:" + value + b"\n\nx\0")
                self.assertTrue(c.expect_error_and_close().get("message"))

    def test_bare_prefix_is_not_a_destination(self):
        c = self.client()
        c.send(b"SEND\ndestination:/queue/\n\nx\0")
        c.expect_error_and_close()

    def test_frames_after_a_bad_frame_are_not_processed(self):
        r = self.client()
        subscribe(r, "/queue/after-bad")
        c = self.client()
        c.send(b"SEND\ndestination:/foo/x\n\nbad\0"
               b"SEND\ndestination:/queue/after-bad\nreceipt:r\n\nshould not arrive\0")
        f = c.expect_error_and_close()
        self.assertIsNone(f.get("receipt-id"), f)
        r.expect_nothing(0.3)

    def test_error_does_not_affect_other_connections(self):
        good = self.client()
        subscribe(good, "/queue/ok")
        bad = self.client()
        bad.send(b"SEND\ndestination:/foo/x\n\nx\0")
        bad.expect_error_and_close()
        p = self.client()
        send(p, "/queue/ok", "fine", receipt="p")
        self.assertEqual(good.expect("MESSAGE").body, b"fine")


class EscapeTest(BrokerTest):

    def test_1_2_escapes_round_trip(self):
        r = self.client("1.2")
        subscribe(r, "/queue/esc")
        s = self.client("1.2")
        s.send(b"SEND\ndestination:/queue/esc\nx-k:a\\r\\n\\c\\\\b\nx\\cname:v\n\nbody\0")
        m = r.expect("MESSAGE")
        self.assertEqual(m.get("x-k"), "a\\r\\n\\c\\\\b", m)
        self.assertEqual(m.get("x\\cname"), "v", m)

    def test_1_1_sender_to_1_0_receiver(self):
        r = self.client(connect=None)
        r.send(b"CONNECT\n\n\0")
        r.expect("CONNECTED")
        r.send(b"SUBSCRIBE\ndestination:/queue/esc11\nreceipt:s\n\n\0")
        expect_receipt(r, "s")
        s = self.client("1.1")
        s.send(b"SEND\ndestination:/queue/esc11\nx-k:a\\cb\\\\c\nreceipt:p\n\nbody\0")
        expect_receipt(s, "p")
        m = r.expect("MESSAGE")
        # 1.0 has no escaping: the receiver gets the decoded value as is.
        self.assertEqual(m.get("x-k"), "a:b\\c", m)

    def test_1_0_sender_literal_backslash_to_1_2_receiver(self):
        r = self.client("1.2")
        subscribe(r, "/queue/esc10")
        s = self.client(connect=None)
        s.send(b"CONNECT\n\n\0")
        s.expect("CONNECTED")
        s.send(b"SEND\ndestination:/queue/esc10\nx-k:a\\b:c\nx-n:\\n\nreceipt:p\n\nbody\0")
        expect_receipt(s, "p")
        m = r.expect("MESSAGE")
        self.assertEqual(m.get("x-k"), "a\\\\b\\cc", m)
        self.assertEqual(m.get("x-n"), "\\\\n", m)

    def test_1_2_sender_to_1_1_receiver(self):
        r = self.client("1.1")
        subscribe(r, "/queue/esc1211")
        s = self.client("1.2")
        send(s, "/queue/esc1211", "b", headers=[("x-k", "a\\nb\\cc\\\\d")], receipt="p")
        m = r.expect("MESSAGE")
        self.assertEqual(m.get("x-k"), "a\\nb\\cc\\\\d", m)

    def test_escaped_subscription_id_and_destination(self):
        c = self.client("1.2")
        # id "s:1\\x" and destination "/queue/a:b", both escaped
        c.send(b"SUBSCRIBE\ndestination:/queue/a\\cb\nid:s\\c1\\\\x\nack:client\nreceipt:r\n\n\0")
        expect_receipt(c, "r")
        p = self.client("1.2")
        send(p, "/queue/a\\cb", "x", receipt="p")
        m = c.expect("MESSAGE")
        self.assertEqual(m.get("subscription"), "s\\c1\\\\x")
        self.assertEqual(m.get("destination"), "/queue/a\\cb")
        c.send(b"ACK\nsubscription:s\\c1\\\\x\nmessage-id:" + m["message-id"].encode() +
               b"\nreceipt:a\n\n\0")
        expect_receipt(c, "a")
        c.send(b"UNSUBSCRIBE\nid:s\\c1\\\\x\nreceipt:u\n\n\0")
        expect_receipt(c, "u")

    def test_escaped_destination_to_1_0_receiver(self):
        r = self.client(connect=None)
        r.send(b"CONNECT\n\n\0")
        r.expect("CONNECTED")
        r.send(b"SUBSCRIBE\ndestination:/queue/a:b\nreceipt:s\n\n\0")
        expect_receipt(r, "s")
        p = self.client("1.2")
        send(p, "/queue/a\\cb", "x", receipt="p")
        self.assertEqual(r.expect("MESSAGE").get("destination"), "/queue/a:b")

    def test_undefined_escape_1_2_is_error_then_close(self):
        r = self.client()
        subscribe(r, "/queue/badesc")
        c = self.client("1.2")
        c.send(b"SEND\ndestination:/queue/badesc\nx-k:a\\tb\n\nbody\0")
        f = c.expect_error_and_close()
        self.assertTrue(f.get("message"), f)
        r.expect_nothing(0.3)

    def test_undefined_escape_error_has_receipt_id(self):
        c = self.client("1.2")
        c.send(b"SEND\ndestination:/queue/badesc\nreceipt:r-esc\nx-k:a\\tb\n\nbody\0")
        f = c.expect_error_and_close()
        self.assertEqual(f.get("receipt-id"), "r-esc",
                         "ERROR for a frame with a receipt header needs receipt-id: %r" % f)

    def test_backslash_r_is_undefined_in_1_1(self):
        c = self.client("1.1")
        c.send(b"SEND\ndestination:/queue/badesc11\nx-k:a\\rb\n\nbody\0")
        self.assertTrue(c.expect_error_and_close().get("message"))

    def test_trailing_backslash_is_error(self):
        c = self.client("1.2")
        c.send(b"SEND\ndestination:/queue/badesc2\nx-k:ab\\\n\nbody\0")
        c.expect_error_and_close()

    def test_connect_headers_are_not_unescaped(self):
        # CONNECT headers are never escaped: a backslash in a passcode is literal.
        c = self.client(connect=None)
        c.send(b"CONNECT\naccept-version:1.2\nhost:/\nlogin:a\\tb\npasscode:x\\y\n\n\0")
        c.expect("CONNECTED")


class RepeatedHeaderTest(BrokerTest):

    def test_repeated_destination_first_wins(self):
        first = self.client()
        subscribe(first, "/queue/first")
        second = self.client()
        subscribe(second, "/queue/second")
        p = self.client()
        p.send(b"SEND\ndestination:/queue/first\ndestination:/queue/second\nreceipt:p\n\nx\0")
        expect_receipt(p, "p")
        m = first.expect("MESSAGE")
        self.assertEqual(m.get("destination"), "/queue/first")
        self.assertEqual(header_values(m, "destination")[0], "/queue/first")
        second.expect_nothing(0.3)

    def test_repeated_custom_header_first_value_first(self):
        r = self.client()
        subscribe(r, "/queue/rep")
        p = self.client()
        p.send(b"SEND\ndestination:/queue/rep\nx-rep:one\nx-rep:two\n\nx\0")
        m = r.expect("MESSAGE")
        values = header_values(m, "x-rep")
        self.assertTrue(values, m)
        self.assertEqual(values[0], "one", m)

    def test_repeated_content_length_first_wins(self):
        r = self.client()
        subscribe(r, "/queue/repcl")
        p = self.client()
        p.send(b"SEND\ndestination:/queue/repcl\ncontent-length:3\ncontent-length:1\n\na\0b\0")
        m = r.expect("MESSAGE")
        self.assertEqual(m.body, b"a\0b")
        self.assertEqual(header_values(m, "content-length"), ["3"])


class FramingTest(BrokerTest):

    def test_crlf_line_endings(self):
        c = self.client(connect=None)
        c.send(b"CONNECT\r\naccept-version:1.2\r\nhost:/\r\n\r\n\0")
        self.assertEqual(c.expect("CONNECTED").get("version"), "1.2")
        c.send(b"SUBSCRIBE\r\ndestination:/queue/crlf\r\nid:s\r\nreceipt:r1\r\n\r\n\0")
        expect_receipt(c, "r1")
        c.send(b"SEND\r\ndestination:/queue/crlf\r\nx-k:v\r\nreceipt:r2\r\n\r\nbody\0")
        frames = c.read_frames(2)
        m = [f for f in frames if f.command == "MESSAGE"][0]
        rc = [f for f in frames if f.command == "RECEIPT"][0]
        self.assertEqual(rc.get("receipt-id"), "r2")
        self.assertEqual(m.get("destination"), "/queue/crlf")
        self.assertEqual(m.get("subscription"), "s")
        self.assertEqual(m.get("x-k"), "v")
        self.assertEqual(m.body, b"body")

    def test_frame_split_into_single_bytes(self):
        c = self.client(connect=None)
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        data = (b"CONNECT\naccept-version:1.2\nhost:/\n\n\0"
                b"SUBSCRIBE\ndestination:/queue/split\nid:0\n\n\0"
                b"SEND\ndestination:/queue/split\ncontent-length:5\nreceipt:r\n\nab\0cd\0")
        for i in range(len(data)):
            c.send(data[i:i + 1])
            wait_for(lambda: eftd_has_read(c.sock), 5, "eftd to read byte %d" % i)
        c.expect("CONNECTED")
        frames = c.read_frames(2)
        m = [f for f in frames if f.command == "MESSAGE"][0]
        self.assertIn("r", [f.get("receipt-id") for f in frames if f.command == "RECEIPT"])
        self.assertEqual(m.body, b"ab\0cd")

    def test_body_arriving_in_later_reads_after_another_frame(self):
        # One read holds a whole frame and the next frame's headers; its body
        # comes in later reads.  The headers must survive the buffer being
        # moved or grown to make room for the body.
        r = self.client()
        subscribe(r, "/queue/later")
        p = self.client()
        p.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = b"B" * 100000
        p.send(frame("SEND", [("destination", "/queue/later"), ("x-k", "first")], "A") +
               b"SEND\ndestination:/queue/later\nx-k:second\ncontent-length:%d\n"
               b"receipt:rb\n\n" % len(body))
        wait_for(lambda: eftd_has_read(p.sock), 5, "eftd to read the first frame and headers")
        p.send(body[:50000])
        wait_for(lambda: eftd_has_read(p.sock), 5, "eftd to read half the body")
        p.send(body[50000:] + b"\0")
        f = p.read_frame()
        self.assertEqual((f.command, f.get("receipt-id")), ("RECEIPT", "rb"), f)
        m1, m2 = r.read_frames(2)
        self.assertEqual((m1.get("x-k"), m1.body), ("first", b"A"))
        self.assertEqual(m2.get("destination"), "/queue/later")
        self.assertEqual(m2.get("x-k"), "second")
        self.assertEqual(m2.body, body)

    def test_many_frames_in_one_send(self):
        c = self.client()
        data = b"SUBSCRIBE\ndestination:/queue/batch\nid:0\n\n\0"
        n = 500
        for i in range(n):
            data += frame("SEND", [("destination", "/queue/batch")], str(i))
        data += b"SEND\ndestination:/queue/batch\nreceipt:end\n\nlast\0"
        c.send(data)
        bodies, receipt = [], None
        while receipt is None or len(bodies) < n + 1:
            f = c.read_frame()
            if f.command == "RECEIPT":
                receipt = f["receipt-id"]
            else:
                self.assertEqual(f.command, "MESSAGE", f)
                bodies.append(f.body)
        self.assertEqual(receipt, "end")
        self.assertEqual(bodies, [str(i).encode() for i in range(n)] + [b"last"])

    def test_content_length_body_with_nul_bytes(self):
        r = self.client()
        subscribe(r, "/queue/nul")
        p = self.client()
        body = b"\0a\0\0b\0" + bytes(range(256)) + b"\0"
        p.send(frame("SEND", [("destination", "/queue/nul"),
                              ("content-length", str(len(body))),
                              ("content-type", "application/octet-stream")], body))
        m = r.expect("MESSAGE")
        self.assertEqual(m.body, body)
        self.assertEqual(m.get("content-length"), str(len(body)))
        self.assertEqual(m.get("content-type"), "application/octet-stream")

    def test_large_binary_body(self):
        r = self.client()
        subscribe(r, "/queue/big")
        p = self.client()
        body = bytes(range(256)) * 4096  # 1 MiB with NULs throughout
        p.send(frame("SEND", [("destination", "/queue/big"),
                              ("content-length", str(len(body)))], body))
        m = r.expect("MESSAGE")
        self.assertEqual(len(m.body), len(body))
        self.assertEqual(m.body, body)

    def test_wrong_content_length_is_error(self):
        c = self.client()
        c.send(b"SEND\ndestination:/queue/wcl\ncontent-length:2\n\nabcdef\0")
        c.expect_error_and_close()

    def test_heartbeat_eols_between_frames_are_ignored(self):
        c = self.client(connect=None)
        c.send(b"\n\r\n\nCONNECT\naccept-version:1.2\nhost:/\n\n\0\n\n")
        c.expect("CONNECTED")
        c.send(b"\r\n\nSUBSCRIBE\ndestination:/queue/hbeol\nid:0\nreceipt:a\n\n\0\r\n\n\n")
        expect_receipt(c, "a")
        c.send(b"\nSEND\ndestination:/queue/hbeol\n\nx\0\n\r\n")
        self.assertEqual(c.expect("MESSAGE").body, b"x")
        c.send(b"\n\n\n\n")
        c.send(b"SEND\ndestination:/queue/hbeol\nreceipt:b\n\ny\0")
        frames = c.read_frames(2)
        self.assertEqual(sorted(f.command for f in frames), ["MESSAGE", "RECEIPT"])

    def test_body_without_content_length_ends_at_nul(self):
        r = self.client()
        subscribe(r, "/queue/nocl")
        p = self.client()
        p.send(b"SEND\ndestination:/queue/nocl\n\nhello world\0SEND\ndestination:/queue/nocl\n\n\0")
        m1, m2 = r.read_frames(2)
        self.assertEqual(m1.body, b"hello world")
        self.assertEqual(m1.get("content-length"), "11")
        self.assertEqual(m2.body, b"")


class MessageTest(BrokerTest):

    def test_message_headers(self):
        r = self.client()
        subscribe(r, "/queue/mh", sid="sub-7")
        p = self.client()
        p.send(b"SEND\ndestination:/queue/mh\ncontent-type:text/plain;charset=utf-8\n"
               b"x-custom:hello\ncorrelation-id:42\npriority:5\n\nbody text\0")
        m = r.expect("MESSAGE")
        self.assertEqual(m.get("destination"), "/queue/mh")
        self.assertTrue(m.get("message-id"), m)
        self.assertEqual(m.get("subscription"), "sub-7")
        self.assertEqual(m.get("x-custom"), "hello")
        self.assertEqual(m.get("correlation-id"), "42")
        self.assertEqual(m.get("priority"), "5")
        self.assertEqual(m.get("content-type"), "text/plain;charset=utf-8")
        self.assertEqual(m.get("content-length"), "9")
        self.assertEqual(m.body, b"body text")
        # the broker's own headers appear once
        for name in ("destination", "message-id", "subscription", "content-length"):
            self.assertEqual(len(header_values(m, name)), 1, (name, m))
        # headers that only mean something to the broker are not passed on
        self.assertIsNone(m.get("receipt"))
        self.assertIsNone(m.get("transaction"))

    def test_message_ids_unique(self):
        r = self.client()
        subscribe(r, "/queue/ids")
        t = self.client()
        subscribe(t, "/topic/ids")
        p = self.client()
        for i in range(20):
            p.send_frame("SEND", [("destination", "/queue/ids")], str(i))
            p.send_frame("SEND", [("destination", "/topic/ids")], str(i))
        ids = [f["message-id"] for f in r.read_frames(20)]
        ids += [f["message-id"] for f in t.read_frames(20)]
        self.assertEqual(len(set(ids)), 40, ids)

    def test_sender_message_id_is_replaced(self):
        r = self.client()
        subscribe(r, "/queue/mid")
        p = self.client()
        p.send(b"SEND\ndestination:/queue/mid\nmessage-id:forged\n\nx\0")
        p.send(b"SEND\ndestination:/queue/mid\nmessage-id:forged\n\ny\0")
        m1, m2 = r.read_frames(2)
        self.assertEqual(len(header_values(m1, "message-id")), 1, m1)
        self.assertNotEqual(m1["message-id"], m2["message-id"])

    def test_utf8_body_and_headers(self):
        r = self.client()
        subscribe(r, "/queue/utf8")
        p = self.client()
        body = "grüße, 世界".encode()
        p.send(frame("SEND", [("destination", "/queue/utf8"), ("x-name", "名前")], body))
        m = r.expect("MESSAGE")
        self.assertEqual(m.body, body)
        self.assertEqual(m.get("x-name"), "名前")


if __name__ == "__main__":
    unittest.main()
