"""Journal damage never passes as normal (issue 23).

Messages are sent with RECEIPTs under fsync = always into small segments,
eftd waits until its CHECKPOINT covers all of them, then is killed (kill -9)
and a file is damaged: the oldest or a middle segment deleted, the newest
cut in half, byte 0 of a segment header flipped, 4 KB zeroed in the middle
of a segment.  Each time eftd refuses to start with one line naming the
file and pointing to --recover; with --recover it starts, logs the messages
and bytes lost and the file they were in, and delivers every other message.
Once the damaged segments are gone, a start without --recover works again.
A torn tail past the checkpoint (garbage after the last record, as a crash
leaves) is still the normal case: a log line, and everything back.

The segment and CHECKPOINT layouts are those of include/eft/journal.h."""

import os
import struct
import subprocess
import unittest

import harness
from harness import SLOW, wait_for
from test_durable import TCP_ONLY, DurableBase, psend

N = 100
BODY = 4000
SEGMENT_HEADER = 24
CONFIG = "fsync = always\njournal-segment-size = 64k\n"


def body(i):
    return ("m%03d-" % i).ljust(BODY, "x")


def checkpoint(data):
    """(synced_seg, synced_off, mark) of the newer valid copy, or None.
    (The CRC is not checked here: eftd does.)"""
    try:
        with open(os.path.join(data, "CHECKPOINT"), "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    best = None
    for at in (0, 64):
        c = raw[at:at + 64]
        if len(c) < 64 or c[:8] != b"EFTCKPT1":
            continue
        seq, = struct.unpack_from("<Q", c, 16)
        synced_seg, = struct.unpack_from("<I", c, 24)
        synced_off, = struct.unpack_from("<Q", c, 32)
        mark, = struct.unpack_from("<Q", c, 48)
        if best is None or seq > best[0]:
            best = (seq, synced_seg, synced_off, mark)
    return best[1:] if best else None


def records(path):
    """[(offset, length, type, body or None)] of a segment's records."""
    with open(path, "rb") as f:
        data = f.read()
    version, = struct.unpack_from("<I", data, 8)
    out, pos = [], 16 if version == 1 else SEGMENT_HEADER
    while pos + 12 <= len(data):
        n, = struct.unpack_from("<I", data, pos)
        rtype = data[pos + 8]
        payload = data[pos + 12:pos + 12 + n]
        text = None
        if rtype == 1 and len(payload) >= 16:  # MSG: the body is at its end
            body_len, = struct.unpack_from("<I", payload, 12)
            text = payload[len(payload) - body_len:].decode()
        out.append((pos, 12 + n, rtype, text))
        pos += 12 + n
    return out


@TCP_ONLY
class JournalDamageTest(DurableBase):
    config = CONFIG

    def setUp(self):
        super().setUp()
        b = self.start()
        c = self.client(b)
        for i in range(N):
            psend(c, "/queue/d", body(i), "r%d" % i)
        # every RECEIPT's message is under the checkpoint (at most a second)
        segs = self.segments()

        def covered():
            ck, newest = checkpoint(self.data), self.segments()[-1]
            num = int(os.path.basename(newest)[8:16])
            return ck is not None and ck[0] == num and ck[1] == os.path.getsize(newest)
        wait_for(covered, 5, "the checkpoint to cover every message")
        self.crash(b)
        self.assertGreaterEqual(len(segs), 5)
        self.where = {}  # body -> segment path
        for seg in self.segments():
            for _, _, rtype, text in records(seg):
                if rtype == 1:
                    self.where[text] = seg
        self.assertEqual(len(self.where), N)

    def refused(self, *want):
        r = subprocess.run([harness.EFTD, "-p", "0", "--data-dir", self.data],
                           capture_output=True, text=True, timeout=10 * SLOW,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        for w in want:
            self.assertIn(w, r.stderr)
        self.assertIn("--recover", r.stderr)

    def recovered(self, lost_bodies, nbytes, seg):
        """Start with --recover: the log counts lost_bodies and nbytes in
        seg, and every other message comes back."""
        b = self.start(args=["--recover"])
        log = b.read_log()
        lost = len(lost_bodies)
        self.assertIn("journal: --recover lost %d message%s (%d bytes) in %s: %d were stored at "
                      "the last checkpoint, %d of them are back" % (
                          lost, "" if lost == 1 else "s", nbytes, os.path.basename(seg), N,
                          N - lost), log)
        got = self.bodies(self.drain(b, "/queue/d"))
        self.assertEqual(got, [body(i) for i in range(N) if body(i) not in lost_bodies])
        return b, log

    def in_segment(self, seg):
        return {t for t, s in self.where.items() if s == seg}

    def clean_again(self, b):
        """The damaged segments go (their messages were drained): then a
        start without --recover works."""
        wait_for(lambda: "starts without --recover again" in b.read_log(), 10,
                 "the damaged segments to be released")
        self.stop(b)
        b = self.start()
        self.assertNotIn("journal: --recover", b.read_log())
        self.stop(b)

    def test_deleted_middle_segment(self):
        seg = self.segments()[2]
        lost, size = self.in_segment(seg), os.path.getsize(seg)
        os.unlink(seg)
        prev, nxt = self.segments()[1], self.segments()[2]
        self.refused("%s is missing: the journal runs from %s to %s" % (
            seg, os.path.basename(prev), os.path.basename(nxt)))
        b, log = self.recovered(lost, size, seg)
        self.assertIn("journal: --recover: %s is missing" % seg, log)
        self.clean_again(b)

    def test_deleted_oldest_segment(self):
        seg = self.segments()[0]
        lost, size = self.in_segment(seg), os.path.getsize(seg)
        os.unlink(seg)
        self.refused("%s is missing: the checkpoint says the journal begins with %s" % (
            seg, os.path.basename(seg)))
        b, _ = self.recovered(lost, size, seg)
        self.stop(b)
        # the checkpoint now begins after it: nothing to recover any more
        b = self.start()
        self.assertNotIn("--recover", b.read_log())

    def test_newest_segment_cut_in_half(self):
        seg = self.segments()[-1]
        size = os.path.getsize(seg)
        cut = size // 2
        whole = min((o for o, n, _, _ in records(seg) if o + n > cut), default=cut)
        lost = {t for o, n, rtype, t in records(seg) if rtype == 1 and o + n > cut}
        self.assertTrue(lost)
        with open(seg, "r+b") as f:
            f.truncate(cut)
        self.refused("%s: cut short: %d bytes, but %d were on disk at the last checkpoint" % (
            seg, cut, size))
        b, log = self.recovered(lost, size - whole, seg)
        self.assertIn("going on without the %d bytes cut off" % (size - whole), log)
        self.assertNotIn("torn by a crash", log)
        self.stop(b)
        b = self.start()  # the newest is no longer damaged: no --recover needed
        self.assertNotIn("--recover", b.read_log())

    def test_segment_header_flipped(self):
        seg = self.segments()[2]
        lost, size = self.in_segment(seg), os.path.getsize(seg)
        with open(seg, "r+b") as f:
            first = f.read(1)
            f.seek(0)
            f.write(bytes([first[0] ^ 0x01]))
        num = int(os.path.basename(seg)[8:16])
        self.refused("%s: offset 0: not an eft journal segment (or not number %d)" % (seg, num))
        b, log = self.recovered(lost, size, seg)
        self.assertIn("segment skipped (%d bytes); eftd leaves the file alone: move %s out of "
                      "the data-dir" % (size, seg), log)
        self.clean_again(b)
        # never deleted: below the first segment now, and said so
        self.assertTrue(os.path.exists(seg))
        b = self.start()
        self.assertIn("%s, below the journal's first segment, is no eft journal segment" % seg,
                      b.read_log())

    def test_4k_zeroed_in_a_segment(self):
        seg = self.segments()[2]
        recs = records(seg)
        at = os.path.getsize(seg) // 2 - 2048
        hit = [(o, n, rtype, t) for o, n, rtype, t in recs if o < at + 4096 and o + n > at]
        lost = {t for _, _, rtype, t in hit if rtype == 1}
        start = hit[0][0]
        end = min((o for o, _, _, _ in recs if o >= at + 4096), default=os.path.getsize(seg))
        self.assertGreater(len(lost), 1)
        with open(seg, "r+b") as f:
            f.seek(at)
            f.write(b"\0" * 4096)
        self.refused("%s: offset %d: damaged record" % (seg, start))
        b, log = self.recovered(lost, end - start, seg)
        self.assertIn("%s: offset %d: damaged record: %d bytes skipped" % (seg, start, end - start),
                      log)
        self.clean_again(b)

    def test_torn_tail_past_the_checkpoint_is_a_crash(self):
        seg = self.segments()[-1]
        with open(seg, "ab") as f:
            f.write(b"\xab" * 100)  # a record begun after the last sync, cut by the crash
        b = self.start()
        log = b.read_log()
        self.assertIn("journal: cut 100 bytes of a record torn by a crash off the end", log)
        self.assertNotIn("--recover", log)
        self.assertEqual(self.bodies(self.drain(b, "/queue/d")), [body(i) for i in range(N)])


if __name__ == "__main__":
    unittest.main()
