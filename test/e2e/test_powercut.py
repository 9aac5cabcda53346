"""Power cuts (issue 24): fsync proven by losing what was not synced.

kill -9 cannot test fsync: the page cache outlives eftd, so fsync = always,
everysec and no all pass the same "loses nothing" check.  Here eftd runs
with test/powercut/powercut.c preloaded (BUILD/libpowercut.so, built by
make test, and by these tests if it is not there).  The library keeps an
image of what the disk would hold after a power cut: a data file as it was
at its last fsync/fdatasync, the directory's names as they were at its last
fsync (the file's header comment has the model).  A power cut is a kill -9
at a random moment; the data dir is then replaced by the image and a plain
eftd must start on it (without --recover).  In 'tear' rounds each file also
keeps a random part of what was appended to it after its last sync, as a
disk that wrote some of it back would (a record torn in the middle).

PowerCutTest: for each policy, ROUNDS rounds.  A data dir is made with
PRELOAD persistent messages on /queue/pc-acks by an eftd stopped cleanly
(so they are on disk).  eftd then runs on it under the library (in 64 KB
journal segments, begun, synced and deleted several times a second, or in
16 MB ones, where only the policy syncs) with three clients at once:
  - a producer streaming persistent SENDs with RECEIPTs to /queue/pc-sends;
  - a producer of transactions (three persistent SENDs, then a COMMIT with
    a RECEIPT) to /queue/pc-tx;
  - a consumer of /queue/pc-acks ACKing each message with a RECEIPT.
Then the cut, the restart on the image, and every queue is drained.
Checked under every policy: nothing invented or doubled; /queue/pc-sends
holds a prefix of what was sent, in order; each transaction whole or not at
all, a prefix of them; every preloaded message whose ACK was never sent is
back.  And by policy:
  - always: every RECEIPTed SEND and COMMIT is back, and no message whose
    ACK got a RECEIPT;
  - everysec: the same for every RECEIPT that came more than LOSS_WINDOW
    (1.5 s) before the cut: eftd syncs once a second, from its loop or its
    0.1 s tick, so what was RECEIPTed before is on disk.  What was lost,
    and the age of the oldest lost RECEIPT, are printed;
  - no: the loss is printed, and something RECEIPTed must have been lost
    in the 'drop' rounds (the journal syncs only when it begins a segment,
    or before a checkpoint that deletes segments):
    the check that the cut does drop what was not synced.
Errors a client meets before the cut (an ERROR frame, a timeout, a closed
connection) fail the round.

PowerCutTest.test_compaction: messages on disk that nobody takes
(/queue/pc-keep, one in 50 of the preload) among many that a consumer takes
at once (/queue/pc-churn): the journal writes the kept ones again at its end
and deletes their old segments.  Under every policy, all of them must be
back after a cut at a random moment of that.  It found a real loss: a
checkpoint could count a release before the copies were synced, so that
under fsync = no (and, more rarely, everysec) a cut lost messages that had
been on disk for long (fixed in journal.c, which test_journal's
test_release_waits_for_the_sync_of_what_came_before covers; the rounds
under no cut after the checkpoint that follows the compaction, and so fail
every time without the fix).

ReceiptAfterSyncTest: under always, strace shows each RECEIPT's write to the
socket after the fdatasync of the journal segment that the SEND was written
to; under no, the same check finds no such fdatasync (the check can fail).

Shown to bite (2026-11-26, RELIABILITY.md): with journal_commit's sync
under always taken out (`bool due = (false && ...) || ...`),
PowerCutTest.test_always fails (132 RECEIPTed SENDs, 15 COMMITs and 39
ACKs lost in its first round) and so does ReceiptAfterSyncTest.test_always
(no RECEIPT of 20 after its sync); without the directory fsync after a new
segment is made, the restart on the image is refused (a segment missing).

The journal is the same over every transport: these run in the tcp pass."""

import collections
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import unittest

import harness
from harness import (Closed, DataDirTest, RawClient, ROOT, SLOW, expect_receipt, frame,
                     subscribe)

TCP_ONLY = unittest.skipIf(harness.TRANSPORT == "tls",
                           "the journal does not depend on the transport: runs in the tcp pass")
LIB = os.path.join(ROOT, harness.BUILD, "libpowercut.so")
PRELOAD = 2500
COMPACT_PRELOAD = 3000       # test_compaction: about 11 segments of 64 KB
LOSS_WINDOW = 1.5 * SLOW     # everysec: RECEIPTs older than this at the cut are on disk
# The rounds of each policy: how the cut treats what was not synced, and
# the journal's segment size: 64 KB begins (and syncs, and deletes) segments
# several times a second; in 16 MB ones only the policy syncs.
ROUNDS = [("drop", "64K"), ("tear", "64K"), ("drop", "16M"), ("tear", "16M")]
# test_compaction's rounds: the policy of each.
COMPACTION_ROUNDS = ["always", "everysec", "no", "everysec", "no"]
if harness.WRAPPER:
    # Under valgrind every wait is 10 times as long (a round ~20 s): one round.
    ROUNDS = ROUNDS[2:3]
    COMPACTION_ROUNDS = ["no"]
SEED = int(os.environ.get("EFT_POWERCUT_SEED", random.randrange(1 << 30)))


def build_lib():
    """BUILD/libpowercut.so, made if it is not there (make test makes it)."""
    r = subprocess.run(["make", "--no-print-directory", "-s", "BUILD=" + harness.BUILD,
                        os.path.join(harness.BUILD, "libpowercut.so")],
                       cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise AssertionError("cannot build libpowercut.so:\n" + r.stdout)


def preload_env(data, image):
    """eftd's environment for a run under the library.  An ASan eftd wants
    ASan's runtime first among the preloaded libraries."""
    libs = [LIB]
    out = subprocess.run(["ldd", harness.EFTD], stdout=subprocess.PIPE, text=True).stdout
    asan = re.search(r"(\S*libasan\.so\S*) => (\S+)", out)
    if asan:
        libs.insert(0, asan.group(2))
    return {"LD_PRELOAD": ":".join(libs), "POWERCUT_DATA": data, "POWERCUT_IMAGE": image}


def restore(image, data, out, rng=None):
    """The data dir the power cut leaves, in out: the image's names and
    synced contents.  With rng ('tear'), a file whose content now extends
    what was synced keeps a random part of the extension."""
    names = os.path.join(image, "names")
    os.mkdir(out)
    torn = 0
    for name in sorted(os.listdir(names)):
        with open(os.path.join(names, name), "rb") as f:
            keep = f.read()
        real = os.path.join(data, name)
        if rng is not None and os.path.exists(real):
            with open(real, "rb") as f:
                now = f.read()
            if len(now) > len(keep) and now.startswith(keep):
                extra = rng.randint(0, len(now) - len(keep))
                keep = now[:len(keep) + extra]
                torn += extra
        with open(os.path.join(out, name), "wb") as f:
            f.write(keep)
    return torn


class Worker(threading.Thread):
    """A client of the round: run() until the cut, recording each RECEIPT's
    time; an error before the cut is kept in self.error."""

    def __init__(self, port, round_, name):
        super().__init__(name=name, daemon=True)
        self.c = RawClient(port, tls=False, sockopts=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
        self.c.connect()
        self.round = round_
        self.error = None
        self.receipts = {}          # what each RECEIPT stands for -> when it came
        self.deadline = time.monotonic() + 30 * SLOW

    def run(self):
        try:
            self.work()
        except Exception as e:  # noqa: BLE001 - every error is kept, to fail the round
            # The cut closes the connection: that, and only after it, is no error.
            if not (self.round.cutting.is_set() and isinstance(e, (Closed, OSError))):
                self.error = "%s: %r" % (self.name, e)
        finally:
            self.c.close()

    def going(self):
        return not self.round.cutting.is_set() and time.monotonic() < self.deadline

    def pace(self, n, rate):
        """Sleep until the n-th item is due at rate per second."""
        wait = self.round.t0 + n / rate - time.monotonic()
        if wait > 0:
            time.sleep(min(wait, 0.1))

    def expect_receipt(self, rid):
        f = self.c.read_frame()
        if f.command != "RECEIPT" or f.get("receipt-id") != rid:
            raise AssertionError("expected RECEIPT %s, got %r" % (rid, f))
        return time.monotonic()


class Sender(Worker):
    """Persistent SENDs to /queue/pc-sends, WINDOW of them awaiting RECEIPTs."""
    WINDOW, RATE = 16, 1500

    def work(self):
        self.sent = 0
        acked = 0
        while self.going():
            while self.sent - acked < self.WINDOW and self.going():
                self.c.send_frame("SEND", [("destination", "/queue/pc-sends"),
                                           ("persistent", "true"), ("receipt", "s-%d" % self.sent)],
                                  b"pc-sends %d " % self.sent + b"s" * 200)
                self.sent += 1
                self.pace(self.sent, self.RATE)
            if self.sent > acked:
                self.receipts[acked] = self.expect_receipt("s-%d" % acked)
                acked += 1


class Transactor(Worker):
    """Transactions of three persistent SENDs to /queue/pc-tx, each COMMIT
    with a RECEIPT."""
    RATE = 150

    def work(self):
        self.sent = 0               # COMMITs sent
        while self.going():
            tx = "tx-%d" % self.sent
            frames = [frame("BEGIN", [("transaction", tx)])]
            frames += [frame("SEND", [("destination", "/queue/pc-tx"), ("persistent", "true"),
                                      ("transaction", tx)], b"pc-tx %d %d" % (self.sent, j))
                       for j in range(3)]
            frames.append(frame("COMMIT", [("transaction", tx), ("receipt", "c-%d" % self.sent)]))
            self.c.send(b"".join(frames))   # one write: no Nagle delay between them
            self.sent += 1
            self.receipts[self.sent - 1] = self.expect_receipt("c-%d" % (self.sent - 1))
            self.pace(self.sent, self.RATE)


class Acker(Worker):
    """Takes /queue/pc-acks (client-individual) and ACKs each message with
    a RECEIPT, one at a time (the MESSAGEs that come meanwhile wait)."""
    RATE = 400

    def work(self):
        self.acks_sent = set()      # preloaded numbers whose ACK was sent
        subscribe(self.c, "/queue/pc-acks", ack="client-individual")
        backlog = collections.deque()
        n = 0
        while self.going():
            f = backlog.popleft() if backlog else self.c.read_frame()
            if f.command != "MESSAGE":
                raise AssertionError("expected a MESSAGE, got %r" % f)
            num = int(f.body.split()[1])
            self.acks_sent.add(num)
            self.c.send_frame("ACK", [("id", f.get("ack")), ("receipt", "a-%d" % num)])
            while True:
                f = self.c.read_frame()
                if f.command != "MESSAGE":
                    break
                backlog.append(f)
            if f.command != "RECEIPT" or f.get("receipt-id") != "a-%d" % num:
                raise AssertionError("expected RECEIPT a-%d, got %r" % (num, f))
            self.receipts[num] = time.monotonic()
            n += 1
            self.pace(n, self.RATE)


class Churner(Worker):
    """Takes /queue/pc-churn (ack:auto: each message is gone once written
    to it), until the cut."""

    def work(self):
        self.got = 0
        subscribe(self.c, "/queue/pc-churn")
        while self.going():
            for f in self.c.poll(0.05):
                if f.command != "MESSAGE":
                    raise AssertionError("expected a MESSAGE, got %r" % f)
                self.got += 1


def drain(port, dest):
    """Every message on dest, in order: up to a marker sent after subscribing."""
    c = RawClient(port, tls=False)
    try:
        c.connect()
        subscribe(c, dest)
        c.send_frame("SEND", [("destination", dest), ("receipt", "end")], b"end-marker")
        out = []
        deadline = time.monotonic() + 30 * SLOW
        while time.monotonic() < deadline:
            f = c.read_frame()
            if f.command == "RECEIPT":
                continue
            if f.command != "MESSAGE":
                raise AssertionError("draining %s: %r" % (dest, f))
            if f.body == b"end-marker":
                return out
            out.append(f.body)
        raise AssertionError("draining %s: no end marker within 30 s" % dest)
    finally:
        c.close()


@TCP_ONLY
class PowerCutTest(DataDirTest):
    data_prefix = "eftd-powercut-"

    @classmethod
    def setUpClass(cls):
        build_lib()

    def dirs(self, name):
        top = os.path.join(self.dir, name)
        data, image, after = (os.path.join(top, d) for d in ("data", "image", "after"))
        os.makedirs(image)
        return data, image, after

    def preload(self, data, messages):
        """messages, (destination, body) pairs, sent persistent to an eftd on
        data stopped cleanly: on disk when the round begins."""
        b = self.start_on_data("journal-segment-size = 64K\n", data=data)
        c = self.connect(b)
        c.send(b"".join(frame("SEND", [("destination", dest), ("persistent", "true")], body)
                        for dest, body in messages))
        c.send_frame("SEND", [("destination", "/queue/pc-end"), ("receipt", "p")])
        expect_receipt(c, "p", 30 * SLOW)
        c.close()
        self.assertEqual(b.stop(), 0, b.read_log()[-3000:])

    def cut(self, config, data, image, workers, cut_after):
        """eftd under the library on data, workers (classes) as its clients;
        the power cut cut_after seconds later.  Returns the workers and the
        moment of the cut."""
        b = self.start_on_data(config, data=data, env=preload_env(data, image))
        self.cutting = threading.Event()
        self.t0 = time.monotonic()
        workers = [w(b.port, self, w.__name__.lower()) for w in workers]
        for w in workers:
            w.start()
        deadline = self.t0 + cut_after
        while time.monotonic() < deadline and all(w.is_alive() for w in workers):
            time.sleep(0.01)
        self.cutting.set()
        cut = time.monotonic()
        b.crash()   # it must still run, and die of this
        for w in workers:
            w.join(10 * SLOW)
            self.assertFalse(w.is_alive(), "%s still running after the cut" % w.name)
        errors = [w.error for w in workers if w.error]
        self.assertEqual(errors, [], "eftd log:\n" + b.read_log()[-3000:])
        return workers, cut

    def restart(self, after, dests):
        """A plain eftd on the data dir the cut left (it must start, without
        --recover): what each of dests holds, and its log."""
        b = self.start_on_data("", data=after)
        got = [drain(b.port, d) for d in dests]
        log = b.read_log()
        self.assertEqual(b.stop(), 0, log[-3000:])
        return got, log

    def round(self, policy, n, mode, segment):
        """One round: load, cut, restart on the image, check.  Returns what
        was lost: RECEIPTed SENDs, COMMITs and ACKs not on disk."""
        rng = random.Random("%d %s %d" % (SEED, policy, n))
        data, image, after = self.dirs("r%d" % n)
        self.preload(data, [("/queue/pc-acks", b"pc-acks %d" % i) for i in range(PRELOAD)])
        cut_after = LOSS_WINDOW + rng.uniform(0.5, 2.0)
        workers, cut = self.cut("fsync = %s\njournal-segment-size = %s\n" % (policy, segment),
                                data, image, [Sender, Transactor, Acker], cut_after)
        torn = restore(image, data, after, rng if mode == "tear" else None)
        (sends, txs, acks), log = self.restart(after, ["/queue/pc-sends", "/queue/pc-tx",
                                                       "/queue/pc-acks"])
        sender, transactor, acker = workers
        what = "round %d (fsync = %s, %s, %sB segments, cut at %.2f s)" % (n, policy, mode, segment,
                                                                           cut_after)

        # Nothing invented, doubled or out of order: a prefix of what was sent.
        got = [int(m.split()[1]) for m in sends]
        self.assertEqual(got, list(range(len(got))), what + ": /queue/pc-sends")
        self.assertLessEqual(len(got), sender.sent, what)
        got_tx = [tuple(int(x) for x in m.split()[1:]) for m in txs]
        ntx = len(got_tx) // 3
        self.assertEqual(got_tx, [(k, j) for k in range(ntx) for j in range(3)],
                         what + ": /queue/pc-tx: whole transactions, a prefix of them")
        self.assertLessEqual(ntx, transactor.sent, what)
        got_acks = [int(m.split()[1]) for m in acks]
        self.assertEqual(got_acks, sorted(set(got_acks)), what + ": /queue/pc-acks in order")
        never_acked = set(range(PRELOAD)) - acker.acks_sent
        self.assertEqual(never_acked - set(got_acks), set(),
                         what + ": preloaded messages never ACKed are back")
        self.assertLessEqual(set(got_acks), set(range(PRELOAD)), what)

        # What was RECEIPTed and is not on disk.
        lost = {
            "SEND": {i: t for i, t in sender.receipts.items() if i >= len(got)},
            "COMMIT": {k: t for k, t in transactor.receipts.items() if k >= ntx},
            "ACK": {i: t for i, t in acker.receipts.items() if i in set(got_acks)},
        }
        ages = [cut - t for d in lost.values() for t in d.values()]
        print("\n  %s: %d SENDs sent, %d RECEIPTed, %d back; %d COMMITs, %d back; %d ACKs "
              "RECEIPTed; lost %s%s%s" % (
                  what, sender.sent, len(sender.receipts), len(got), transactor.sent, ntx,
                  len(acker.receipts), ", ".join("%d %ss" % (len(d), k) for k, d in lost.items()),
                  "; the oldest lost RECEIPT came %.2f s before the cut" % max(ages) if ages else "",
                  "; %d bytes of unsynced appends kept" % torn if mode == "tear" else ""),
              end="", flush=True)
        self.assertGreater(len(sender.receipts), 0, what + ": no SEND was RECEIPTed")
        self.assertGreater(len(transactor.receipts), 0, what + ": no COMMIT was RECEIPTed")
        self.assertGreater(len(acker.receipts), 0, what + ": no ACK was RECEIPTed")
        if policy == "always":
            self.assertEqual({k: sorted(d) for k, d in lost.items() if d}, {},
                             what + ": RECEIPTed under fsync = always, and lost; eftd log:\n" +
                             log[-3000:])
        elif policy == "everysec":
            old = {k: sorted(i for i, t in d.items() if cut - t > LOSS_WINDOW)
                   for k, d in lost.items()}
            self.assertEqual({k: v for k, v in old.items() if v}, {},
                             what + ": RECEIPTed more than %.1f s before the cut, and lost"
                             % LOSS_WINDOW)
        return lost

    def run_policy(self, policy):
        print("\n  EFT_POWERCUT_SEED=%d" % SEED, end="")
        return [(mode, self.round(policy, n, mode, segment))
                for n, (mode, segment) in enumerate(ROUNDS)]

    def test_always(self):
        self.run_policy("always")

    def test_everysec(self):
        self.run_policy("everysec")

    def test_no(self):
        lost = self.run_policy("no")
        self.assertGreater(sum(len(d) for mode, l in lost if mode == "drop" for d in l.values()),
                           0, "fsync = no lost nothing RECEIPTed in the 'drop' rounds: the power "
                           "cut did not drop what was not synced")

    def test_compaction(self):
        """Messages on disk that nobody takes survive a power cut while the
        journal moves them: when the messages around them are consumed, the
        journal writes them again at its end and deletes their old segments.
        Under every policy, at a random moment of that."""
        print("\n  EFT_POWERCUT_SEED=%d" % SEED, end="")
        keep = list(range(0, COMPACT_PRELOAD, 50))
        for n, policy in enumerate(COMPACTION_ROUNDS):
            rng = random.Random("%d compaction %d" % (SEED, n))
            data, image, after = self.dirs("c%d" % n)
            self.preload(data, [("/queue/pc-keep" if i in keep else "/queue/pc-churn",
                                 b"pc %d " % i + b"c" * 200) for i in range(COMPACT_PRELOAD)])
            # Under no, a cut after the first checkpoint that follows the
            # compaction (within a second): nothing syncs the copies after it.
            cut_after = rng.uniform(1.3 if policy == "no" else 0.3, 2.5) * SLOW
            (churner,), _ = self.cut("fsync = %s\njournal-segment-size = 64K\n" % policy, data,
                                     image, [Churner], cut_after)
            torn = restore(image, data, after, rng if n % 2 else None)
            (kept, churn), log = self.restart(after, ["/queue/pc-keep", "/queue/pc-churn"])
            what = "compaction round %d (fsync = %s, %s, cut at %.2f s)" % (
                n, policy, "tear" if n % 2 else "drop", cut_after)
            print("\n  %s: %d of %d churned consumed, %d back%s" % (
                what, churner.got, COMPACT_PRELOAD - len(keep), len(churn),
                "; %d bytes of unsynced appends kept" % torn if n % 2 else ""), end="", flush=True)
            self.assertEqual([int(m.split()[1]) for m in kept], keep,
                             what + ": /queue/pc-keep, on disk before the round; eftd log:\n" +
                             log[-3000:])


def strace_events(path):
    """(pid, syscall, args, start, end) for each call in an strace -f log,
    start and end its line numbers (they differ when another thread's call
    came between: '<unfinished ...>' then '<... resumed>')."""
    events, open_calls = [], {}
    call = re.compile(r"^(\d+) +(\w+)\((.*)$")
    resumed = re.compile(r"^(\d+) +<\.\.\. (\w+) resumed>(.*)$")
    with open(path, errors="replace") as f:
        for n, line in enumerate(f):
            m = resumed.match(line)
            if m:
                pid, name, rest = int(m.group(1)), m.group(2), m.group(3)
                if pid in open_calls:
                    start, args = open_calls.pop(pid)
                    events.append((pid, name, args + rest, start, n))
                continue
            m = call.match(line)
            if not m:
                continue
            pid, name, args = int(m.group(1)), m.group(2), m.group(3)
            if args.endswith("<unfinished ...>"):
                open_calls[pid] = (n, args)
            else:
                events.append((pid, name, args, n, n))
    events.sort(key=lambda e: e[4])
    return events


@TCP_ONLY
@unittest.skipUnless(shutil.which("strace"), "strace not installed (tools/install-deps test "
                     "installs it)")
class ReceiptAfterSyncTest(DataDirTest):
    data_prefix = "eftd-order-"
    N = 20

    def trace(self, policy):
        """N persistent SENDs, one at a time, with eftd under strace.  For
        each: did the RECEIPT's write come after an fdatasync of the
        segment the SEND was written to, begun after that write?"""
        b = self.start_on_data("fsync = %s\n" % policy)
        log = os.path.join(self.dir, "strace.log")
        st = subprocess.Popen(["strace", "-f", "-y", "-s", "4096", "-o", log, "-e",
                               "trace=write,writev,sendmsg,sendto,pwrite64,fdatasync,fsync",
                               "-p", str(b.proc.pid)],
                              stderr=subprocess.PIPE, text=True)
        try:
            line = st.stderr.readline()     # "strace: Process N attached ..."
            self.assertIn("attached", line, "strace -p: %s" % line)
            c = self.connect(b)
            for i in range(self.N):
                c.send_frame("SEND", [("destination", "/queue/order"), ("persistent", "true"),
                                      ("receipt", "r-%d" % i)], b"pc-order-%03d" % i)
                expect_receipt(c, "r-%d" % i)
            c.close()
        finally:
            st.send_signal(signal.SIGINT)   # detaches; eftd goes on
            st.communicate(timeout=10 * SLOW)
        self.assertEqual(b.stop(), 0, b.read_log()[-3000:])
        events = strace_events(log)
        journal = re.compile(r"^\d+<([^>]*/journal-\d+\.log)>")
        covered = []
        for i in range(self.N):
            body, rid = "pc-order-%03d" % i, "receipt-id:r-%d\\n" % i
            wrote = [e for e in events if e[1] == "write" and body in e[2] and journal.match(e[2])]
            answered = [e for e in events if e[1] in ("write", "writev", "sendmsg", "sendto") and
                        rid in e[2] and not journal.match(e[2])]
            self.assertEqual(len(wrote), 1, "%s: the journal write: %r" % (body, wrote))
            self.assertEqual(len(answered), 1, "%s: the RECEIPT's write: %r" % (rid, answered))
            w, r = wrote[0], answered[0]
            self.assertEqual(w[0], r[0], "the journal write and the RECEIPT on one thread")
            segment = journal.match(w[2]).group(1)
            synced = [e for e in events if e[1] in ("fdatasync", "fsync") and e[3] > w[4] and
                      e[4] < r[3] and journal.match(e[2]) and
                      journal.match(e[2]).group(1) == segment and e[2].rstrip().endswith("= 0")]
            covered.append(bool(synced))
        return covered

    def test_always(self):
        covered = self.trace("always")
        self.assertEqual(covered, [True] * self.N,
                         "RECEIPTs written before an fdatasync covering their SEND")

    def test_no_is_told_apart(self):
        """The check can fail: under fsync = no nothing syncs a SEND before
        its RECEIPT."""
        self.assertEqual(self.trace("no"), [False] * self.N)


if __name__ == "__main__":
    unittest.main()
