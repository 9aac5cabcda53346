"""Heart-beats (STOMP 1.1+): negotiation in CONNECT/CONNECTED, the server's
EOLs while idle, closing a client that stops sending, and bad headers.  The
server's floor is lowered to 100 ms so that the tests run in seconds."""

import time
import unittest

from harness import BrokerTest, SLOW


def connect(c, heart_beat, version="1.2"):
    h = "CONNECT\naccept-version:%s\nhost:/\n" % version
    if heart_beat is not None:
        h += "heart-beat:%s\n" % heart_beat
    c.send((h + "\n\0").encode())
    return c.expect("CONNECTED")


def hb_values(f):
    sx, sy = f["heart-beat"].split(",")
    return int(sx), int(sy)


def count_beats(c, seconds):
    """Read for exactly `seconds` (not scaled: the count depends on the
    window); fail on any frame; return the EOLs seen."""
    before = c.heartbeats
    c.expect_nothing_for(seconds)
    return c.heartbeats - before


def still_open(testcase, c, tag="alive"):
    c.send(("SEND\ndestination:/queue/hb\nreceipt:%s\n\nx\0" % tag).encode())
    f = c.expect("RECEIPT", timeout=2 * SLOW)
    testcase.assertEqual(f.get("receipt-id"), tag)


class HeartBeatTest(BrokerTest):
    config = "heartbeat-min-ms = 100\n"

    def test_zero_zero_means_none(self):
        c = self.client(connect=None)
        f = connect(c, "0,0")
        self.assertEqual(hb_values(f), (0, 0))
        self.assertEqual(count_beats(c, 0.8), 0)
        still_open(self, c)

    def test_no_header_means_none(self):
        c = self.client(connect=None)
        f = connect(c, None)
        self.assertEqual(hb_values(f), (0, 0))
        self.assertEqual(count_beats(c, 0.6), 0)
        still_open(self, c)

    def test_server_sends_heartbeats_when_asked(self):
        c = self.client(connect=None)
        f = connect(c, "0,500")
        sx, sy = hb_values(f)
        self.assertGreaterEqual(sx, 500, f)
        self.assertEqual(sy, 0, "the client cannot send heart-beats: %r" % f)
        n = count_beats(c, 2.2)
        self.assertGreaterEqual(n, 2, "too few heart-beats from the server")
        self.assertLessEqual(n, 2.2 * 1000 / sx + 2, "heart-beats more often than agreed")
        still_open(self, c)

    def test_server_heartbeats_in_1_1(self):
        c = self.client(connect=None)
        f = connect(c, "0,300", version="1.1")
        self.assertGreaterEqual(hb_values(f)[0], 300)
        self.assertGreaterEqual(count_beats(c, 1.1), 2)

    def test_server_heartbeat_floor(self):
        c = self.client(connect=None)
        f = connect(c, "0,10")
        sx, _ = hb_values(f)
        self.assertGreaterEqual(sx, 100, "below heartbeat-min-ms: %r" % f)
        n = count_beats(c, 1.0)
        self.assertGreaterEqual(n, 2)
        self.assertLessEqual(n, 1000 / sx + 2)

    def test_no_heartbeats_while_traffic_flows(self):
        # heart-beats are for idle connections; a steady stream of MESSAGEs
        # more often than the interval needs none.
        c = self.client(connect=None)
        f = connect(c, "0,500")
        c.send(b"SUBSCRIBE\ndestination:/queue/flow\nid:0\n\n\0")
        p = self.client()
        before = c.heartbeats
        for i in range(12):
            p.send_frame("SEND", [("destination", "/queue/flow")], str(i))
            c.expect("MESSAGE")
            time.sleep(0.1)
        self.assertEqual(c.heartbeats - before, 0)
        self.assertGreaterEqual(hb_values(f)[0], 500)

    def test_silent_client_is_closed(self):
        c = self.client(connect=None)
        f = connect(c, "500,0")
        start = time.time()
        c.expect_closed(timeout=4 * SLOW)
        elapsed = time.time() - start
        self.assertLess(elapsed, 3.5 * SLOW, "silent client kept open for %.1fs" % elapsed)
        # not before the promised interval has passed (with the agreed value)
        self.assertGreaterEqual(elapsed, 0.5, "closed after %.2fs: %r" % (elapsed, f))

    def test_silent_client_close_returns_unacked_messages(self):
        c = self.client(connect=None)
        connect(c, "300,0")
        c.send(b"SUBSCRIBE\ndestination:/queue/hbq\nid:0\nack:client\n\n\0")
        p = self.client()
        p.send(b"SEND\ndestination:/queue/hbq\n\nm\0")
        c.expect("MESSAGE")
        c.expect_closed(timeout=4 * SLOW)
        d = self.client()
        d.send(b"SUBSCRIBE\ndestination:/queue/hbq\nid:0\n\n\0")
        m = d.expect("MESSAGE")
        self.assertEqual((m.body, m.get("redelivered")), (b"m", "true"))

    def test_client_eols_keep_connection_open(self):
        c = self.client(connect=None)
        connect(c, "500,0")
        deadline = time.time() + 1.6   # well past the 1 s a silent client gets
        eol = b"\n"
        while time.time() < deadline:
            c.send(eol)
            eol = b"\r\n" if eol == b"\n" else b"\n"
            time.sleep(0.3)
        still_open(self, c)

    def test_client_frames_keep_connection_open(self):
        c = self.client(connect=None)
        connect(c, "500,0")
        for i in range(6):
            still_open(self, c, "r%d" % i)
            time.sleep(0.3)

    def test_both_directions(self):
        c = self.client(connect=None)
        f = connect(c, "400,400")
        sx, sy = hb_values(f)
        self.assertGreaterEqual(sx, 400)
        deadline = time.time() + 1.6
        beats = 0
        while time.time() < deadline:
            c.send(b"\n")
            beats += count_beats(c, 0.25)
        self.assertGreaterEqual(beats, 2)
        still_open(self, c)

    def test_malformed_heartbeat_is_error(self):
        for value in ("abc", "100", "1,x", "-1,0", "1,2,3", ""):
            with self.subTest(value=value):
                c = self.client(connect=None)
                c.send(("CONNECT\naccept-version:1.2\nhost:/\nheart-beat:%s\n\n\0" % value).encode())
                f = c.expect_error_and_close()
                self.assertIn("heart-beat", f.get("message", ""))


if __name__ == "__main__":
    unittest.main()
