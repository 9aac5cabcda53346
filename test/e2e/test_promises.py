"""Promises eftd makes to a producer that does not wait: what a client that
streams SENDs, each with a receipt, is told when eftd cannot keep them, and
that the RECEIPTs it can give arrive as it goes.  Real clients pipeline
(stomp.py, the Ruby gem and JMS bridges send the next frame without waiting
for the last RECEIPT), so a broker that only answers a client that waits
leaves them blind: they never learn what was refused, nor that anything was.

- Disk full (data-dir on a 2 MB tmpfs, root only): a streaming producer of
  persistent messages, raw and stomp.py, gets `ERROR message:cannot store
  persistent message` naming the reason (ENOSPC) and one of its receipts,
  after the RECEIPTs it got, in order, and then the connection closes;
  after kill -9 and a restart with room, everything that had a RECEIPT is
  there.
- Disk full: consumers keep receiving what was stored before, acking each
  (ack:client-individual) or not (ack:auto).
- Cluster, nats-server killed (kill -9) under a streaming producer: `ERROR
  message:cluster unavailable`, after the RECEIPTs it got, in order.
- Cluster, a producer streaming for 10 s: RECEIPTs come back in order as it
  sends (every second, for a quarter of what it wrote at least), at least
  half of what it wrote has one by the end (and a few seconds), and eftd's
  resident memory stays under 300 MB.

The producers here never block: their sockets are non-blocking, and every
turn they read whatever has arrived before writing more, so nothing stalls
on the test's side.  The journal and the cluster do not depend on the
client transport: everything runs in the tcp pass only.  Every wait is
bounded.

    BUILD=build EFT_TRANSPORTS=tcp test/run e2e promises
"""

import collections
import errno
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
import unittest

import harness
from clientscript import HAVE_STOMP_PY
from harness import Closed, RawClient, SLOW, parse_frames
from test_cluster import ClusterBase
from test_durable import DurableBase

TCP_ONLY = unittest.skipIf(harness.TRANSPORT == "tls",
                           "the journal and the cluster do not depend on the transport: "
                           "runs in the tcp pass")
DISK_CONFIG = "journal-segment-size = 64k\nmax-disk = 1g\nfsync = always\n"
NOSPACE = "No space left on device"
MB = 1024 * 1024


# ---- helpers ----------------------------------------------------------------

def body_of(i, size):
    """A body that carries its index: 'i:' padded to size bytes."""
    return ("%d:" % i).ljust(size, "p")


def index_of(body):
    return int(body.split(":", 1)[0])


def rid_index(rid):
    """r17 -> 17."""
    return int(rid[1:])


def small_disk(test, size="2m"):
    """A tmpfs of `size` mounted in test.dir, unmounted after the test; the
    test is skipped when it cannot be mounted (not root, no mount, a
    container that forbids it)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        test.skipTest("needs root and mount(8) to mount a %s tmpfs as a full disk" % size)
    mnt = os.path.join(test.dir, "small")
    os.mkdir(mnt)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", mnt],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        test.skipTest("cannot mount a tmpfs: " + r.stderr.strip())
    test.addCleanup(subprocess.run, ["umount", "-l", mnt], timeout=30)
    return mnt


def write_filler(path, nbytes=None):
    """A file of nbytes zeros, or, without nbytes, as large as the
    filesystem allows (written until ENOSPC).  Returns its size."""
    chunk = b"\0" * 4096
    size = 0
    with open(path, "wb", buffering=0) as f:
        while nbytes is None or size < nbytes:
            try:
                size += f.write(chunk if nbytes is None else chunk[:min(4096, nbytes - size)])
            except OSError as e:
                if e.errno != errno.ENOSPC or nbytes is not None:
                    raise
                break
    return size


class Streamer:
    """A raw producer that writes SEND frames with receipts r0, r1, ... as
    fast as eftd takes them and never waits for a RECEIPT: its socket is
    non-blocking, and each turn it reads whatever has arrived before it
    writes more.  It keeps every frame that comes back, when it came, and
    how the connection ended."""

    BATCH = 50          # frames made at a time

    def __init__(self, port, dest, size=1000, persistent=False):
        self.client = RawClient(port)
        self.client.connect()
        self.sock = self.client.sock
        self.sock.setblocking(False)
        self.dest, self.size, self.persistent = dest, size, persistent
        self.t0 = time.time()
        self.made = 0               # frames made (r0 .. r<made-1>)
        self.out = bytearray()      # made, not yet taken by the kernel
        self.ends = collections.deque()  # where each frame in `out` ends, in bytes sent
        self.made_bytes = 0
        self.sent_bytes = 0
        self.written = 0            # frames wholly taken by the kernel
        self.buf = b""
        self.frames = []            # (seconds since start, Frame), as they came
        self.ended = None           # "closed" or "reset: ..." once the connection is gone
        self.ended_at = None
        self.stop_writing = False

    # what came back

    @property
    def receipts(self):
        return [f["receipt-id"] for _, f in self.frames if f.command == "RECEIPT"]

    @property
    def error(self):
        return next((f for _, f in self.frames if f.command == "ERROR"), None)

    def error_at(self):
        return next((t for t, f in self.frames if f.command == "ERROR"), None)

    def summary(self):
        """What happened, for a failure message."""
        err = self.error
        return ("wrote %d SENDs (%d made) in %.1fs; got %d RECEIPTs (last %s)%s; connection %s"
                % (self.written, self.made, time.time() - self.t0, len(self.receipts),
                   (self.receipts or ["none"])[-1],
                   ", ERROR %r at %.1fs" % (err.headers, self.error_at()) if err else ", no ERROR",
                   "%s at %.1fs" % (self.ended, self.ended_at) if self.ended else "still open"))

    # the loop

    def _make(self, limit):
        for _ in range(self.BATCH):
            if limit is not None and self.made >= limit:
                return
            i = self.made
            h = [("destination", self.dest), ("receipt", "r%d" % i)]
            if self.persistent:
                h.append(("persistent", "true"))
            data = harness.frame("SEND", h, body_of(i, self.size))
            self.out += data
            self.made_bytes += len(data)
            self.ends.append(self.made_bytes)
            self.made += 1

    def _end(self, how):
        if self.ended is None:
            self.ended, self.ended_at = how, time.time() - self.t0

    def _read(self):
        try:
            data = self.sock.recv(1 << 18)
        except BlockingIOError:
            return
        except OSError as e:
            self._end("reset: %s" % e)
            return
        if not data:
            self._end("closed")
            return
        now = time.time() - self.t0
        frames, self.buf, _ = parse_frames(self.buf + data)
        self.frames += [(now, f) for f in frames]

    def _write(self):
        try:
            n = self.sock.send(self.out[:1 << 16])
        except BlockingIOError:
            return
        except OSError as e:
            self._end("reset: %s" % e)
            return
        del self.out[:n]
        self.sent_bytes += n
        while self.ends and self.ends[0] <= self.sent_bytes:
            self.ends.popleft()
            self.written += 1

    def pump(self, seconds, limit=None, write=True, until=None):
        """Write (while `write`, up to `limit` frames, and until an ERROR
        came) and read, for at most `seconds`, until the connection ends or
        until() is true."""
        deadline = time.time() + seconds
        while self.ended is None and time.time() < deadline:
            if until is not None and until():
                return
            if self.error is not None:
                self.stop_writing = True
            writing = write and not self.stop_writing
            if writing and not self.out:
                self._make(limit)
            want_write = writing and bool(self.out)
            r, w, _ = select.select([self.sock], [self.sock] if want_write else [], [],
                                    min(0.05, max(0, deadline - time.time())))
            if r:
                self._read()
            if w and self.ended is None:
                self._write()

    def close(self):
        self.client.close()


def assert_in_order(test, rids, what):
    idx = [rid_index(r) for r in rids]
    test.assertEqual(idx, sorted(set(idx)), "%s: RECEIPTs out of order or repeated: %s"
                     % (what, rids[:50]))


def assert_error_after_receipts(test, s, message, names_receipt=True):
    """s got an ERROR with `message` after its RECEIPTs (in order, none
    after it), naming one of its receipts not given (names_receipt: it
    must), and then the connection closed."""
    err = s.error
    test.assertIsNotNone(err, "no ERROR reached the streaming producer: " + s.summary())
    test.assertEqual(err.get("message"), message, s.summary())
    rid = err.get("receipt-id")
    if names_receipt:
        test.assertIsNotNone(rid, "the ERROR names none of the producer's receipts: %r" % err)
    if rid is not None:
        test.assertTrue(rid.startswith("r") and rid[1:].isdigit() and rid_index(rid) < s.made,
                        "receipt-id:%s is not one the producer sent (r0..r%d)"
                        % (rid, s.made - 1))
        test.assertNotIn(rid, s.receipts, "the ERROR names a receipt that was given")
    pos = [f for _, f in s.frames].index(err)
    test.assertEqual([f for _, f in s.frames[pos + 1:] if f.command == "RECEIPT"], [],
                     "RECEIPTs after the ERROR: " + s.summary())
    assert_in_order(test, s.receipts, "before the ERROR")
    s.pump(5 * SLOW, write=False)
    test.assertIsNotNone(s.ended, "the connection stayed open after the ERROR: " + s.summary())
    return err


# ---- disk full ----------------------------------------------------------------

@TCP_ONLY
class DiskFullBase(DurableBase):
    config = DISK_CONFIG
    data_prefix = "eftd-promises-"

    def small_data(self):
        """A data-dir on a fresh 2 MB tmpfs: (mount point, data-dir)."""
        mnt = small_disk(self)
        return mnt, os.path.join(mnt, "data")


class DiskFullProducerTest(DiskFullBase):
    def test_streaming_raw_producer_gets_an_error_naming_a_receipt(self):
        mnt, data = self.small_data()
        filler = os.path.join(mnt, "filler")
        write_filler(filler, 1536 * 1024)
        b = self.start(data=data)
        s = Streamer(b.port, "/queue/f", size=1000, persistent=True)
        self.addCleanup(s.close)
        # about 500 KB free: 3000 KB of SENDs fill it
        s.pump(10 * SLOW, limit=3000, until=lambda: s.error is not None)
        self.assertIn(NOSPACE, b.read_log(), "the disk never filled: " + s.summary())
        err = assert_error_after_receipts(self, s, "cannot store persistent message")
        self.assertIn(NOSPACE, err.body.decode("utf-8", "replace"))
        stored = {rid_index(r) for r in s.receipts}
        # what had a RECEIPT survives kill -9, once there is room again
        self.crash(b)
        os.unlink(filler)
        b = self.start(data=data)
        got = [index_of(body) for body in self.bodies(self.drain(b, "/queue/f"))]
        self.assertEqual(sorted(stored - set(got)), [], "lost after a RECEIPT")
        self.assertEqual(got, sorted(got))

    @unittest.skipUnless(HAVE_STOMP_PY, "python3 with stomp.py (python3-stomp) not available")
    def test_streaming_stomp_py_producer_gets_the_error(self):
        import stomp
        mnt, data = self.small_data()
        write_filler(os.path.join(mnt, "filler"), 1536 * 1024)
        b = self.start(data=data)
        receipts, errors = [], []
        gone = threading.Event()

        class Listener(stomp.ConnectionListener):
            def on_receipt(self, frame):
                receipts.append(frame.headers.get("receipt-id"))

            def on_error(self, frame):
                errors.append(frame)

            def on_disconnected(self):
                gone.set()

        conn = harness.stomp_py(b.port, reconnect_attempts_max=1)
        conn.set_listener("l", Listener())
        conn.connect(wait=True, headers={"host": "/"})
        raised = []

        def produce():
            try:
                for i in range(3000):
                    if errors or gone.is_set():
                        return
                    conn.send("/queue/f", body_of(i, 1000),
                              headers={"persistent": "true", "receipt": "r%d" % i})
            except Exception as e:  # a reset: what the producer sees without the ERROR
                raised.append(e)
        # stomp.py's send blocks while eftd does not read: on a thread of its
        # own, which eftd's kill at the end of the test unblocks
        t = threading.Thread(target=produce, daemon=True)
        t.start()
        self.addCleanup(t.join, 5 * SLOW)
        self.addCleanup(conn.transport.disconnect_socket)  # unblocks a send, if any
        deadline = time.time() + 10 * SLOW
        while not (errors or gone.is_set()) and time.time() < deadline:
            time.sleep(0.05)
        self.assertTrue(errors, "stomp.py got no ERROR: %d RECEIPTs (last %s); connection lost "
                        "%s; send raised %r" % (len(receipts), (receipts or ["none"])[-1],
                                                 gone.is_set(), raised))
        err = errors[0]
        self.assertEqual(err.headers.get("message"), "cannot store persistent message")
        self.assertIn(NOSPACE, err.body)
        self.assertIn(err.headers.get("receipt-id"), {"r%d" % i for i in range(3000)})
        idx = [rid_index(r) for r in receipts]
        self.assertEqual(idx, sorted(set(idx)))


class DiskFullConsumerTest(DiskFullBase):
    N = 200

    def fill_queue_then_the_disk(self, dest):
        """N persistent messages on dest, each with its RECEIPT, then the
        disk full and the journal failing on it; returns the broker."""
        mnt, data = self.small_data()
        b = self.start(data=data)
        p = self.connect(b)
        for i in range(self.N):
            p.send_frame("SEND", [("destination", dest), ("persistent", "true"),
                                  ("receipt", "r%d" % i)], body_of(i, 1000))
        got = [p.expect("RECEIPT", 10 * SLOW)["receipt-id"] for _ in range(self.N)]
        self.assertEqual(got, ["r%d" % i for i in range(self.N)])
        write_filler(os.path.join(mnt, "filler"))
        # a producer of persistent messages runs into the full disk (what it
        # is told is DiskFullProducerTest's business)
        s = Streamer(b.port, "/queue/other", size=1000, persistent=True)
        self.addCleanup(s.close)
        s.pump(10 * SLOW, limit=1000, until=lambda: NOSPACE in b.read_log())
        self.assertIn(NOSPACE, b.read_log(), "the journal never found the disk full")
        return b

    def consume(self, b, dest, ack):
        """Subscribe to dest and read up to N messages within 10 s (x SLOW),
        ACKing each under ack:client-individual; asserts it got all N, in
        order."""
        c = self.connect(b)
        c.send_frame("SUBSCRIBE", [("destination", dest), ("id", "0"), ("ack", ack)])
        got, why = [], "all came"
        deadline = time.time() + 10 * SLOW
        while len(got) < self.N:
            try:
                f = c.read_frame(max(0.01, deadline - time.time()))
            except socket.timeout:
                why = "nothing more within %.0f s" % (10 * SLOW)
                break
            except (Closed, OSError) as e:
                why = "connection lost: %r" % e
                break
            self.assertEqual(f.command, "MESSAGE", f)
            got.append(index_of(f.body.decode()))
            if ack == "client-individual":
                c.send_frame("ACK", [("id", f["ack"])])
        self.assertEqual(got, list(range(self.N)),
                         "ack:%s consumer got %d of %d messages with the disk full (%s); "
                         "eftd's log ends:\n%s" % (ack, len(got), self.N, why,
                                                  b.read_log()[-1500:]))

    def test_client_individual_consumer_receives_and_acks_everything(self):
        b = self.fill_queue_then_the_disk("/queue/c")
        self.consume(b, "/queue/c", "client-individual")

    def test_auto_consumer_receives_everything(self):
        b = self.fill_queue_then_the_disk("/queue/c")
        self.consume(b, "/queue/c", "auto")


# ---- cluster --------------------------------------------------------------------

class NatsLostTest(ClusterBase):
    def test_streaming_producer_gets_cluster_unavailable(self):
        a = self.node("a")
        s = Streamer(a.port, "/queue/s", size=1000)
        self.addCleanup(s.close)
        # streaming (RECEIPTs coming back or not: ClusterReceiptFlowTest's
        # business), then nats-server dies
        s.pump(2 * SLOW, until=lambda: len(s.receipts) >= 100)
        self.nats[0].kill()
        s.pump(15 * SLOW, until=lambda: s.error is not None)
        assert_error_after_receipts(self, s, "cluster unavailable", names_receipt=False)


class ClusterReceiptFlowTest(ClusterBase):
    SECONDS = 10
    RSS_LIMIT = 300 * MB + harness.ASAN_RSS

    def test_receipts_come_back_as_it_streams_and_memory_stays_bounded(self):
        a = self.node("a")
        rss = harness.RssSampler(a.proc.pid, every=1.0)
        rss.start()
        self.addCleanup(rss.stop)
        s = Streamer(a.port, "/queue/stream", size=1024)
        self.addCleanup(s.close)
        s.pump(self.SECONDS)
        sending = time.time() - s.t0
        written = s.written
        while_sending = len(s.receipts)
        # a few seconds for what was written to be stored and answered
        s.pump(5 * SLOW, write=False, until=lambda: len(s.receipts) >= written)
        rss.stop()
        what = "%s; %d RECEIPTs while it sent; eftd's VmRSS peak %.0f MB" % (
            s.summary(), while_sending, rss.peak() / MB)
        self.assertIsNone(s.error, what)
        self.assertIsNone(s.ended, what)
        assert_in_order(self, s.receipts, "streaming")
        problems = []
        # as it goes: RECEIPTs in every second of the sending but the first
        # (one quiet second allowed), keeping up with a quarter of it at least
        per_second = collections.Counter(int(t) for t, f in s.frames
                                         if f.command == "RECEIPT" and t < sending)
        quiet = [sec for sec in range(1, int(sending)) if not per_second[sec]]
        if len(quiet) > 1:
            problems.append("no RECEIPT in seconds %s of the sending" % quiet)
        if while_sending < written // 4:
            problems.append("RECEIPTs while it sent for less than a quarter of what it wrote")
        if len(s.receipts) < written // 2:
            problems.append("RECEIPTs by the end for less than half of what it wrote")
        if rss.peak() >= self.RSS_LIMIT:
            problems.append("eftd's VmRSS reached %.0f MB (samples, MB: %s)"
                            % (rss.peak() / MB, [round(r / MB) for _, r in rss.samples]))
        if problems:
            self.fail("; ".join(problems) + "\n" + what)
        if os.environ.get("EFT_VERBOSE"):
            sys.stderr.write("\n    %s\n" % what)


if __name__ == "__main__":
    unittest.main()
