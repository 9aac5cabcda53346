"""Memory after a burst, end to end (issue 23): once a burst of messages has
been consumed, what eftd held for them beyond `message-cache` goes back to
the system within seconds, even when a message still queued sits at the top
of malloc's heap (where glibc's free alone cannot give anything below it
back).

Every wait is bounded; everything runs on loopback."""

import os
import socket
import sys
import time
import unittest

import harness
from harness import BrokerTest, SLOW, expect_receipt, frame, rss_bytes, subscribe

MB = 1024 * 1024
VERBOSE = bool(os.environ.get("EFT_VERBOSE"))


class MemoryAfterBurstTest(BrokerTest):
    CACHE = 8 * MB
    config = "message-cache = 8m\n"
    SIZE = 32 * 1024
    N = 6000                       # about 200 MB of 32 KB bodies
    SLACK = 32 * MB                # the bound: message-cache + 32 MiB
    SETTLE = 10                    # seconds RSS has to get there

    def setUp(self):
        if harness.ASAN_RSS or harness.WRAPPER:
            # ASan and valgrind bring their own allocators: freed memory sits
            # in a quarantine (ASan: up to 256 MB) that glibc's malloc_trim
            # never sees, so no RSS bound below the burst's size holds there.
            self.skipTest("RSS after a burst is glibc malloc's; not measurable under %s"
                          % ("ASan" if harness.ASAN_RSS else " ".join(harness.WRAPPER)))
        super().setUp()

    def test_rss_goes_back_below_message_cache_after_a_burst_drains(self):
        pid = self.broker.proc.pid
        p = self.client()
        body = b"b" * self.SIZE
        p.send(frame("SEND", [("destination", "/queue/burst"),
                              ("content-length", str(self.SIZE))], body) * self.N)
        # The last message allocated, still queued while the burst drains:
        # it sits above the burst's memory in the heap.
        p.send_frame("SEND", [("destination", "/queue/pin"), ("receipt", "pinned")], "pin")
        expect_receipt(p, "pinned", timeout=30 * SLOW)
        queued = rss_bytes(pid)
        self.assertGreater(queued, self.N * self.SIZE * 3 // 4,
                           "the burst should be in eftd's memory")

        c = self.client()
        # No receipt: its MESSAGEs could come before it.
        c.send_frame("SUBSCRIBE", [("destination", "/queue/burst"), ("id", "0")])
        # Every MESSAGE ends in a NUL and the bodies hold none: count them.
        got, deadline = 0, time.time() + 60 * SLOW
        while got < self.N:
            remaining = deadline - time.time()
            self.assertGreater(remaining, 0, "only %d of %d messages arrived" % (got, self.N))
            c.sock.settimeout(remaining)
            data = c.sock.recv(1 << 20)
            self.assertTrue(data, "connection closed after %d of %d messages" % (got, self.N))
            got += data.count(b"\0")
        drained = time.time()

        bound = self.CACHE + self.SLACK
        samples = []
        while True:
            rss = rss_bytes(pid)
            samples.append(round(rss / MB))
            if rss <= bound or time.time() - drained > self.SETTLE:
                break
            time.sleep(0.25)
        what = "eftd's VmRSS: %d MB queued, then every 0.25 s after the drain (MB): %s" % (
            queued // MB, samples)
        if VERBOSE:
            sys.stderr.write("\n    %s\n" % what)
        self.assertLessEqual(rss, bound, "RSS stayed above message-cache + 32 MiB for %d s "
                             "after the burst drained; %s" % (self.SETTLE, what))

        # The message that pinned the heap is still there, whole.
        d = self.client()
        subscribe(d, "/queue/pin")
        m = d.expect("MESSAGE", timeout=5 * SLOW)
        self.assertEqual(m.body, b"pin")


if __name__ == "__main__":
    unittest.main()
