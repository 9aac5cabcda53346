#!/usr/bin/python3
"""The crash soak (issue 23): a long mixed workload against eftd under
`fsync = always`, with eftd killed by kill -9 at a random moment every few
minutes and restarted on the same data directory and ports, and every
message that got a RECEIPT checked after every restart.

    crash_soak.py [--hours H] [--kill-every MIN-MAX] [--seed S] [--out DIR] ...
    make crash-soak HOURS=2                     (kills every 60-300 s)
    make crash-soak HOURS=0.05 KILL_EVERY=20-40 (a CI-sized run, ~3 minutes)

Each round: eftd starts (the first time on an empty data directory); the
checker drains everything eftd kept and holds it to its promises; then, until
the kill, these run at once, each on its own connection:

  producers (3)    persistent SENDs with a RECEIPT each, in windows, to
                   four queues and a topic; a quarter of them in
                   transactions (1-5 SENDs) that commit (70%) or abort;
                   3% go to /queue/soak.parked, which only the checker
                   reads: messages never handed out before the kill
  consumers        /queue/soak.individual: two client-individual consumers
                   (prefetch 100) that ACK (a RECEIPT on about one ACK in
                   three), NACK 3%, and leave 5% unacknowledged;
                   /queue/soak.client: one client-mode consumer that ACKs
                   every 1-10 messages; /queue/soak.auto: one auto-ack one;
                   each stops reading for 1-6 s now and then (1 message
                   in 500), so that messages wait when the kill comes
  durable          one durable subscriber of /topic/soak (RabbitMQ's
                   dialect: durable:true, auto-delete:false), as the
                   client-individual consumers; the subscription lives
                   through every restart
  rpc              a responder on /queue/soak.rpc and two clients asking it
                   with reply-to:/temp-queue/rpc, one request at a time
                   (not persistent: a request in flight at a kill may be
                   lost; every reply must match its correlation-id and body)

Then eftd is checked to be still running, killed with SIGKILL, and checked
to have died of it; the workers read until their connections end, and the
round must have made progress: ACK RECEIPTs, RPC replies, durable and auto
deliveries all > 0, and RECEIPTs for at least a tenth of the SENDs the
producers aimed at (--rate).  After the restart the
checker subscribes to the four queues and claims the durable subscription
and takes everything, and:

- every message whose SEND (or COMMIT) got a RECEIPT arrives, unless an ACK
  of it got a RECEIPT (a RECEIPT confirms every ACK its connection sent
  before it) or its ACK was sent without a RECEIPT coming back;
- nothing acknowledged with a RECEIPT, nothing aborted, nothing never sent
  and nothing of an earlier round arrives; nothing arrives twice;
- a message some client was handed before arrives again only with
  redelivered:true.

Messages handed to the auto-ack consumer are gone once eftd writes them to
its connection's output: eftd journals them consumed then, and one may be
lost if eftd dies before the bytes leave (at-most-once, as auto-ack is
everywhere).  /queue/soak.auto has only that consumer, so what eftd handed
it is a prefix of the queue, and of each producer's messages in the order
sent: a promised message of producer P missing from that queue after the
restart is allowed only if it lies after the last of P's the consumer got
and before the first of P's that is still there.  Those are counted ("auto
cut by the kill"), and together they must fit in what eftd keeps as a
connection's pending output (--auto-cut-max, 2 MiB: output-high-water is
512 KiB; what had reached the kernel's socket buffer still arrives, since
that consumer sends eftd nothing and so gets a FIN, not a reset); any other
is lost.  One the consumer got never comes back.

During a round every delivery is checked as it comes (round, never sent,
aborted, acknowledged, a second delivery without redelivered:true).  A worker
that gets an ERROR frame, times out waiting for eftd, or loses its connection
before the kill was sent fails the soak; only connections ended by the kill
are expected.  If eftd exits on its own the soak fails.

Every --rss-every seconds eftd's VmRSS and, from /metrics,
eft_messages_queued and eft_journal_bytes go to rss.csv; before each kill its
VmHWM (the incarnation's peak, reached while it read the journal back: it
maps the journal's files, so their pages count) is noted.  RSS is judged flat if the highest sample of the last third of the
rounds is at most the highest of the first third plus --rss-slack-pct
percent and --rss-slack-mb MiB.  Each incarnation starts afresh, so this
catches memory that grows with the run (what the journal brings back); a
leak within one incarnation of 1-5 minutes shows only as its rounds' own
rise in rss.csv, and is tools/soak's to find in a long uninterrupted run.

The run's folder (--out, default build/crash-soak/DATE-TIME) gets eftd.log
(every incarnation's output, each after a line naming its round), rss.csv,
rounds.csv and summary.txt; the data directory is removed after a run that
passed and kept after one that failed, with everything else.  The ledger
holds one round's messages (cleared once the next check settled them; a
message of an older round is then a violation by itself), so memory does
not grow with the run.  Exit status 0 when every check passed, 1 otherwise.
"""

import argparse
import collections
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import Closed, RawClient, SLOW  # noqa: E402

QUEUES = {"qi": "/queue/soak.individual", "qc": "/queue/soak.client", "qa": "/queue/soak.auto",
          "qp": "/queue/soak.parked"}
TOPIC = "/topic/soak"
DESTS = dict(QUEUES, t=TOPIC)
RPC_QUEUE = "/queue/soak.rpc"
DURABLE_ID = "soak-durable"
DURABLE = [("durable", "true"), ("auto-delete", "false")]  # RabbitMQ's dialect
# Where producers send: code, weight.
SEND_MIX = [("qi", 32), ("qc", 20), ("qa", 20), ("qp", 3), ("t", 25)]

# A connection that ends: expected once the kill is sent, a failure before.
GONE = (Closed, ConnectionResetError, BrokenPipeError, ConnectionAbortedError,
        ConnectionRefusedError)

MAX_VIOLATIONS_KEPT = 200     # the first ones are printed; all are counted
GRACE = 60                    # seconds a worker may outlive the kill time


class StompError(Exception):
    pass


def message_id(round_no, worker, dest, seq):
    return "r%d.%s.%s.%d" % (round_no, worker, dest, seq)


def parse_id(mid):
    """(round, worker, dest code, seq) of a message id, or None."""
    parts = mid.split(".")
    if len(parts) != 4 or not parts[0].startswith("r"):
        return None
    try:
        return int(parts[0][1:]), parts[1], parts[2], int(parts[3])
    except ValueError:
        return None


def body_size(mid):
    """A message's body size follows from its id: 16 B to 2 KB, 1% 64 KB."""
    h = zlib.crc32(mid.encode())
    return 65536 if h % 100 == 0 else 16 + h % 2032


def make_body(mid):
    return (mid + "|").encode().ljust(body_size(mid), b"x")


def body_id(f):
    """The id a MESSAGE carries, after checking its body against the id."""
    mid = f.body.split(b"|", 1)[0].decode("utf-8", "replace")
    if f.get("x-id") != mid or f.body != make_body(mid):
        raise StompError("damaged message: x-id %r, body %d bytes starting %r"
                         % (f.get("x-id"), len(f.body), f.body[:60]))
    return mid


class Report:
    """Violations and counters of the whole run, shared by every thread."""

    def __init__(self, log):
        self.lock = threading.Lock()
        self.violations = []
        self.n_violations = 0
        self.log = log

    def violation(self, text):
        with self.lock:
            self.n_violations += 1
            if len(self.violations) < MAX_VIOLATIONS_KEPT:
                self.violations.append(text)
        self.log("VIOLATION: " + text)


class Ledger:
    """What the clients of one round were told, as flags per message id.  It
    holds one round's messages: once the check after the round's restart has
    taken everything, it is dropped, and a message of that round that turns
    up later is a violation for its round number alone."""

    PROMISED = 1      # SEND or COMMIT got a RECEIPT
    MAYBE = 2         # sent (or committed), no RECEIPT seen
    ABORTED = 4       # in a transaction that was aborted (or never committed)
    ACKED = 8         # an ACK of it got a RECEIPT (or an auto-ack consumer got it)
    ACK_SENT = 16     # ACKed, no RECEIPT seen: it may come back, or not
    SEEN = 32         # handed to some client at least once
    UNFLAGGED = 64    # handed once without redelivered:true

    def __init__(self, round_no, report, limit):
        self.round = round_no
        self.report = report
        self.limit = limit
        self.lock = threading.Lock()
        self.flags = {}
        self.auto_seen = {}          # producer -> highest seq the auto consumer got
        self.n = collections.Counter()

    def _set(self, ids, add, clear=0):
        flags = self.flags
        for mid in ids:
            flags[mid] = (flags.get(mid, 0) & ~clear) | add
        if len(flags) > self.limit:
            raise StompError("the ledger holds %d messages (--ledger-max %d): the round is too "
                             "long for its rate" % (len(flags), self.limit))

    def sending(self, ids):
        with self.lock:
            self._set(ids, self.MAYBE)
            self.n["sent"] += len(ids)

    def aborting(self, ids):
        with self.lock:
            self._set(ids, self.ABORTED, self.MAYBE)
            self.n["aborted"] += len(ids)

    def promised(self, ids):
        with self.lock:
            self._set(ids, self.PROMISED, self.MAYBE)
            self.n["receipted"] += len(ids)

    def ack_sent(self, ids):
        with self.lock:
            self._set(ids, self.ACK_SENT)

    def acked(self, ids):
        with self.lock:
            self._set(ids, self.ACKED)
            self.n["acked"] += len(ids)

    def delivered(self, mid, redelivered, who, auto=False, checker=False):
        """A MESSAGE with id mid reached `who`: check it against the rules.
        The order in which two workers record deliveries of one message is
        not known, so during a round the rules hold whatever the order: at
        most one delivery without redelivered:true, none after an ACK with
        a RECEIPT.  The checker runs alone, after the round: there, anything
        handed out before must carry redelivered:true."""
        where = "round %d, %s: %s" % (self.round, who, mid)
        parsed = parse_id(mid)
        if parsed is None:
            self.report.violation(where + ": not a message of this soak")
            return
        with self.lock:
            if parsed[0] != self.round:
                self.report.violation(where + ": a message of round %d (settled at the check "
                                      "after it) arrived again" % parsed[0])
                return
            f = self.flags.get(mid)
            if f is None:
                self.report.violation(where + ": never sent")
                return
            if f & self.ABORTED:
                self.report.violation(where + ": its transaction was aborted, yet it arrived")
            if f & self.ACKED:
                self.report.violation(where + ": arrived again after its ACK got a RECEIPT"
                                      + (" (or an auto-ack consumer had it)" if parsed[2] == "qa"
                                         else ""))
            if not redelivered:
                if f & self.UNFLAGGED or (checker and f & self.SEEN):
                    self.report.violation(where + ": delivered again without redelivered:true")
                    self.n["duplicates"] += 1
                f |= self.UNFLAGGED
            self.n["deliveries"] += 1
            self.n["redelivered"] += redelivered
            f |= self.SEEN
            if auto:
                f |= self.ACKED
                _, worker, _, seq = parsed
                if seq > self.auto_seen.get(worker, -1):
                    self.auto_seen[worker] = seq
            self.flags[mid] = f

    def due(self):
        """The ids the checker must find (all but the auto queue's) and the
        auto queue's ids that were promised, never handed to its consumer."""
        must, auto = set(), set()
        with self.lock:
            for mid, f in self.flags.items():
                if f & self.PROMISED and not f & (self.ACKED | self.ACK_SENT):
                    (auto if ".qa." in mid else must).add(mid)
        return must, auto


class Round:
    """What the workers of one round share: where eftd is, whether the kill
    has been sent, the round's counters and the deadline."""

    def __init__(self, number, port, ledger, report, rate, deadline):
        self.number = number
        self.port = port
        self.ledger = ledger
        self.report = report
        self.rate = rate
        self.deadline = deadline
        self.killed = threading.Event()
        self.lock = threading.Lock()
        self.n = collections.Counter()
        self.errors = 0

    def count(self, key, k=1):
        with self.lock:
            self.n[key] += k

    def error(self, text):
        with self.lock:
            self.errors += 1
        self.report.violation("round %d, %s" % (self.number, text))


class Worker(threading.Thread):
    """One client connection for one round.  It works until its connection
    ends; an end after the kill was sent is expected, anything else (an
    ERROR frame, a timeout, a connection lost while eftd ran, outliving the
    round) is reported as a failure."""

    def __init__(self, rnd_, name, seed):
        super().__init__(name=name, daemon=True)
        self.r = rnd_
        self.ledger = rnd_.ledger
        self.rnd = random.Random(seed)
        self.c = None

    def run(self):
        try:
            self.c = RawClient(self.r.port, timeout=10)
            self.c.connect(headers={"heart-beat": "0,0"})
            self.work()
            self.r.error("%s: still running %d s after the kill was due" % (self.name, GRACE))
        except GONE as e:
            if self.r.killed.is_set():
                self.r.count("connections ended by the kill")
            else:
                self.r.error("%s: connection lost while eftd was running: %r" % (self.name, e))
        except Exception as e:  # noqa: BLE001 - every failure is reported
            self.r.error("%s: %s: %s" % (self.name, type(e).__name__, e))
        finally:
            if self.c is not None:
                self.c.close()

    def running(self):
        return time.time() < self.r.deadline

    def read(self, timeout):
        """The next frame; an ERROR frame is a failure."""
        f = self.c.read_frame(timeout)
        if f.command == "ERROR":
            raise StompError("ERROR frame: %s %r" % (f.get("message"), f.body[:200]))
        return f

    def poll(self, timeout=1.0):
        """The next frame, or None if none came within timeout."""
        try:
            return self.read(timeout)
        except socket.timeout:
            return None

    def stall(self):
        """Now and then stop reading for a few seconds, so that messages
        wait in eftd, not yet handed out, when the kill comes."""
        if self.rnd.random() < 0.002:
            self.r.count("consumer stalls")
            time.sleep(self.rnd.uniform(1, 6))

    def wait_for(self, timeout, what):
        """The next frame; no frame within timeout (x SLOW) is a failure."""
        try:
            return self.read(timeout * SLOW)
        except socket.timeout:
            raise StompError("nothing from eftd for %d s while waiting for %s"
                             % (timeout * SLOW, what)) from None


class Producer(Worker):
    """Windows of persistent SENDs, a RECEIPT each, or a transaction of 1-5
    SENDs ending in COMMIT or ABORT with a RECEIPT; at about --rate
    messages a second."""

    def work(self):
        seq = 0
        codes = [c for c, _ in SEND_MIX]
        weights = [w for _, w in SEND_MIX]
        next_at = time.time()
        while self.running():
            before = seq
            if self.rnd.random() < 0.25:
                seq = self.transaction(seq, codes, weights)
            else:
                seq = self.window(seq, codes, weights)
            next_at += (seq - before) / self.r.rate
            if next_at < time.time() - 1:
                next_at = time.time()  # behind: do not burst to catch up
            while self.running() and not self.r.killed.is_set():
                left = next_at - time.time()  # read once: it may pass 0 between two reads
                if left <= 0:
                    break
                time.sleep(min(left, 0.2))

    def send(self, mid, code, extra):
        return harness.frame("SEND", [("destination", DESTS[code]), ("persistent", "true"),
                                      ("x-id", mid)] + extra, make_body(mid))

    def window(self, seq, codes, weights):
        ids = []
        for code in self.rnd.choices(codes, weights, k=self.rnd.randint(1, 10)):
            ids.append(message_id(self.r.number, self.name, code, seq))
            seq += 1
        self.ledger.sending(ids)
        self.c.send(b"".join(self.send(mid, mid.split(".")[2], [("receipt", mid)])
                             for mid in ids))
        for mid in ids:
            f = self.wait_for(30, "the RECEIPT of a SEND")
            if f.command != "RECEIPT" or f.get("receipt-id") != mid:
                raise StompError("expected the RECEIPT for %s, got %r" % (mid, f))
            self.ledger.promised([mid])
        self.r.count("receipted SENDs", len(ids))
        return seq

    def transaction(self, seq, codes, weights):
        tx = "tx%d" % seq
        ids = []
        for code in self.rnd.choices(codes, weights, k=self.rnd.randint(1, 5)):
            ids.append(message_id(self.r.number, self.name, code, seq))
            seq += 1
        commit = self.rnd.random() < 0.7
        if commit:
            self.ledger.sending(ids)
        else:
            self.ledger.aborting(ids)
        out = [harness.frame("BEGIN", [("transaction", tx)])]
        out += [self.send(mid, mid.split(".")[2], [("transaction", tx)]) for mid in ids]
        out.append(harness.frame("COMMIT" if commit else "ABORT",
                                 [("transaction", tx), ("receipt", tx)]))
        self.c.send(b"".join(out))
        f = self.wait_for(30, "the RECEIPT of a COMMIT or ABORT")
        if f.command != "RECEIPT" or f.get("receipt-id") != tx:
            raise StompError("expected the RECEIPT for %s, got %r" % (tx, f))
        if commit:
            self.ledger.promised(ids)
            self.r.count("receipted SENDs", len(ids))
            self.r.count("transactions committed")
        else:
            self.r.count("transactions aborted")
        return seq


class IndividualConsumer(Worker):
    """client-individual, prefetch 100: ACK most (a RECEIPT on about one ACK
    in three), NACK 3%, keep 5% (at most 20 a round) unacknowledged.  On a
    durable subscription too."""

    def __init__(self, rnd_, name, seed, dest, sid, headers=()):
        super().__init__(rnd_, name, seed)
        self.dest, self.sid, self.headers = dest, sid, list(headers)

    def work(self):
        self.c.send_frame("SUBSCRIBE", [("destination", self.dest), ("id", self.sid),
                                        ("ack", "client-individual"),
                                        ("prefetch-count", "100"), ("receipt", "sub")]
                          + self.headers)
        pending = {}        # receipt id -> the ACKed ids it confirms
        unconfirmed = []    # ACKed since the last ACK that asked for a RECEIPT
        held = 0
        n = 0
        while self.running():
            f = self.poll()
            if f is None:
                continue
            if f.command == "RECEIPT":
                rid = f.get("receipt-id")
                if rid == "sub":
                    continue
                if rid not in pending:
                    raise StompError("unexpected %r" % f)
                self.ledger.acked(pending.pop(rid))
                self.r.count("ACK RECEIPTs")
                continue
            if f.command != "MESSAGE":
                raise StompError("unexpected %r" % f)
            mid = body_id(f)
            self.ledger.delivered(mid, f.get("redelivered") == "true", self.name)
            self.r.count("durable deliveries" if self.dest == TOPIC else "individual deliveries")
            self.stall()
            x = self.rnd.random()
            if x < 0.03:
                self.c.send_frame("NACK", [("id", f["ack"])])
                self.r.count("NACKs")
                continue
            if x < 0.08 and held < 20:
                held += 1
                continue
            n += 1
            unconfirmed.append(mid)
            self.ledger.ack_sent([mid])
            h = [("id", f["ack"])]
            if self.rnd.random() < 0.3:
                rid = "a%d" % n
                pending[rid], unconfirmed = unconfirmed, []
                h.append(("receipt", rid))
            self.c.send_frame("ACK", h)


class ClientConsumer(Worker):
    """ack:client, prefetch 100: an ACK every 1-10 messages covers them all,
    with a RECEIPT on most."""

    def work(self):
        self.c.send_frame("SUBSCRIBE", [("destination", QUEUES["qc"]), ("id", "c"),
                                        ("ack", "client"), ("prefetch-count", "100")])
        pending = {}
        got = []            # delivered since the last ACK
        unconfirmed = []    # covered by ACKs whose RECEIPT did not come yet
        every = self.rnd.randint(1, 10)
        n = 0
        while self.running():
            f = self.poll()
            if f is None:
                continue
            if f.command == "RECEIPT":
                rid = f.get("receipt-id")
                if rid not in pending:
                    raise StompError("unexpected %r" % f)
                self.ledger.acked(pending.pop(rid))
                self.r.count("ACK RECEIPTs")
                continue
            if f.command != "MESSAGE":
                raise StompError("unexpected %r" % f)
            mid = body_id(f)
            self.ledger.delivered(mid, f.get("redelivered") == "true", self.name)
            self.r.count("client deliveries")
            got.append(mid)
            if len(got) < every:
                continue
            n += 1
            self.ledger.ack_sent(got)
            unconfirmed += got
            got = []
            every = self.rnd.randint(1, 10)
            h = [("id", f["ack"])]
            if self.rnd.random() < 0.6:
                rid = "a%d" % n
                pending[rid], unconfirmed = unconfirmed, []
                h.append(("receipt", rid))
            self.c.send_frame("ACK", h)
            self.stall()


class AutoConsumer(Worker):
    """ack:auto on /queue/soak.auto, its only consumer."""

    def work(self):
        self.c.send_frame("SUBSCRIBE", [("destination", QUEUES["qa"]), ("id", "a")])
        while self.running():
            f = self.poll()
            if f is None:
                continue
            if f.command != "MESSAGE":
                raise StompError("unexpected %r" % f)
            self.ledger.delivered(body_id(f), f.get("redelivered") == "true", self.name,
                                  auto=True)
            self.r.count("auto deliveries")
            self.stall()


class Responder(Worker):
    def work(self):
        self.c.send_frame("SUBSCRIBE", [("destination", RPC_QUEUE), ("id", "rpc")])
        while self.running():
            f = self.poll()
            if f is None:
                continue
            reply_to = f.get("reply-to", "")
            if f.command != "MESSAGE" or not reply_to.startswith("/reply-queue/"):
                raise StompError("unexpected request %r" % f)
            self.c.send_frame("SEND", [("destination", reply_to),
                                       ("correlation-id", f.get("correlation-id", ""))],
                              b"re:" + f.body)
            self.r.count("RPC requests served")


class RpcClient(Worker):
    def work(self):
        n = 0
        while self.running():
            n += 1
            cid = "%s-%d" % (self.name, n)
            body = ("request %s " % cid).encode() * self.rnd.randint(1, 20)
            self.c.send_frame("SEND", [("destination", RPC_QUEUE),
                                       ("reply-to", "/temp-queue/rpc"),
                                       ("correlation-id", cid)], body)
            f = self.wait_for(10, "the reply to " + cid)
            if f.command != "MESSAGE" or f.get("correlation-id") != cid or \
                    f.body != b"re:" + body or f.get("subscription") != "/temp-queue/rpc":
                raise StompError("bad reply to %s: %r" % (cid, f))
            self.r.count("RPC replies")
            time.sleep(self.rnd.uniform(0.01, 0.1))


def workers(rnd_, rnd):
    seed = lambda: rnd.random()  # noqa: E731
    return ([Producer(rnd_, "p%d" % i, seed()) for i in range(3)] +
            [IndividualConsumer(rnd_, "ci%d" % i, seed(), QUEUES["qi"], "i") for i in range(2)] +
            [ClientConsumer(rnd_, "cc", seed()), AutoConsumer(rnd_, "ca", seed()),
             IndividualConsumer(rnd_, "dur", seed(), TOPIC, DURABLE_ID, DURABLE),
             Responder(rnd_, "resp", seed())] +
            [RpcClient(rnd_, "rpc%d" % i, seed()) for i in range(2)])


# ---------------------------------------------------------------------------
# the check after each restart


def check(port, ledger, report, auto_cut_max):
    """Take everything eftd kept (the four queues, the durable subscription)
    and hold it to the ledger's round.  Everything taken is acknowledged, and
    a RECEIPT confirms it, so the next round starts from nothing kept.
    Returns the round's check counters."""
    n = collections.Counter()
    dups_before = ledger.n["duplicates"]
    where = "check after round %d" % ledger.round
    c = RawClient(port, timeout=10)
    try:
        c.connect(headers={"heart-beat": "0,0"})
        for code, q in QUEUES.items():
            c.send_frame("SUBSCRIBE", [("destination", q), ("id", code),
                                       ("ack", "client-individual")])
        c.send_frame("SUBSCRIBE", [("destination", TOPIC), ("id", DURABLE_ID),
                                   ("ack", "client-individual")] + DURABLE)
        must, auto_due = ledger.due()
        got = {}
        deadline = time.time() + 120 * SLOW
        quiet_since = time.time()
        while True:
            if time.time() > deadline:
                report.violation("%s: still receiving after %d s" % (where, 120 * SLOW))
                break
            try:
                f = c.read_frame(0.2)
            except socket.timeout:
                # Done when all that is due came and 1 s passed quietly;
                # after 15 s of quiet, what is missing will not come.
                quiet = time.time() - quiet_since
                if quiet > 15 * SLOW or quiet > 1.0 and must <= got.keys():
                    break
                continue
            quiet_since = time.time()
            if f.command != "MESSAGE":
                report.violation("%s: unexpected %r" % (where, f))
                continue
            try:
                mid = body_id(f)
            except StompError as e:
                report.violation("%s: %s" % (where, e))
                continue
            if mid in got:
                report.violation("%s: %s arrived twice" % (where, mid))
                n["duplicates"] += 1
                continue
            parsed = parse_id(mid)
            if parsed is not None and f.get("destination") != DESTS.get(parsed[2]):
                report.violation("%s: %s arrived on %s" % (where, mid, f.get("destination")))
            ledger.delivered(mid, f.get("redelivered") == "true", "checker", checker=True)
            got[mid] = f
        lost = must - got.keys()
        for mid in sorted(lost)[:20]:
            report.violation("%s: %s got a RECEIPT and is missing" % (where, mid))
        if len(lost) > 20:
            report.violation("%s: ... and %d more missing" % (where, len(lost) - 20))
        # The auto queue: promised, never handed to its consumer, not there
        # now; allowed only between what the consumer got and what is left.
        first_left = {}
        for mid in got:
            p = parse_id(mid)
            if p and p[2] == "qa" and p[3] < first_left.get(p[1], float("inf")):
                first_left[p[1]] = p[3]
        auto_lost = []
        cut_bytes = 0
        for mid in auto_due - got.keys():
            _, worker, _, seq = parse_id(mid)
            if ledger.auto_seen.get(worker, -1) < seq < first_left.get(worker, float("inf")):
                n["auto cut by the kill"] += 1
                cut_bytes += body_size(mid) + 200   # with its headers
            else:
                auto_lost.append(mid)
        for mid in sorted(auto_lost)[:20]:
            report.violation("%s: %s got a RECEIPT and is missing from %s (not where an auto-ack "
                             "delivery could have been cut)" % (where, mid, QUEUES["qa"]))
        if cut_bytes > auto_cut_max:
            report.violation("%s: %d messages (about %d bytes) missing from %s: more than eftd "
                             "may hold as a connection's pending output (--auto-cut-max %d)"
                             % (where, n["auto cut by the kill"], cut_bytes, QUEUES["qa"],
                                auto_cut_max))
        n["lost"] = len(lost) + len(auto_lost)
        n["duplicates"] += ledger.n["duplicates"] - dups_before
        n["drained"] = len(got)
        n["drained durable"] = sum(1 for m in got if ".t." in m)
        n["drained redelivered"] = sum(1 for f in got.values() if f.get("redelivered") == "true")
        n["drained parked"] = sum(1 for m in got if ".qp." in m)
        for f in got.values():
            c.send_frame("ACK", [("id", f["ack"])])
        # A plain UNSUBSCRIBE keeps the durable subscription and frees it for
        # the next round's subscriber; its RECEIPT confirms the ACKs before it.
        c.send_frame("UNSUBSCRIBE", [("id", DURABLE_ID), ("receipt", "done")])
        f = c.read_frame(30 * SLOW)
        if f.command != "RECEIPT" or f.get("receipt-id") != "done":
            report.violation("%s: expected the final RECEIPT, got %r" % (where, f))
        c.send_frame("DISCONNECT", [("receipt", "bye")])
        c.read_frame(10 * SLOW)
        return n
    finally:
        c.close()


# ---------------------------------------------------------------------------
# eftd


def pick_port(avoid=()):
    """A free loopback port below the ephemeral range, so that no outgoing
    connection takes it while eftd is down between a kill and its restart."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    top = max(low, 12000)
    for _ in range(200):
        port = random.randrange(10000, top)
        if port in avoid:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
    return harness.free_port()


class Eftd:
    """eftd on a data directory, with fsync = always, a STOMP and an admin
    listener on fixed ports, its output appended to one log file."""

    def __init__(self, binary, data, conf, log_path, log):
        self.binary, self.data, self.conf, self.log_path = binary, data, conf, log_path
        self.say = log
        self.port = pick_port()
        self.http = pick_port({self.port})
        self.proc = None
        self.log_read = 0        # how much of the log has been scanned

    def start(self, round_no):
        """Start and wait until both listeners answer.  A port taken meanwhile
        (eftd says "Address already in use") is retried, then replaced."""
        for attempt in range(8):
            with open(self.log_path, "a") as log:
                log.write("=== crash soak: round %d, eftd starting on tcp %d, http %d (%s) ===\n"
                          % (round_no, self.port, self.http, time.strftime("%Y-%m-%d %H:%M:%S")))
                log.flush()
                self.proc = subprocess.Popen(
                    [self.binary, "-L", "tcp://127.0.0.1:%d" % self.port,
                     "-L", "http://127.0.0.1:%d" % self.http, "--data-dir", self.data,
                     "-c", self.conf], stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL)
            deadline = time.time() + 60 * SLOW
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    for port in (self.port, self.http):
                        harness.open_socket(port, timeout=1, tls=False).close()
                    return
                except OSError:
                    time.sleep(0.05)
            if self.proc.poll() is None:
                raise AssertionError("eftd did not listen within %d s (log: %s)"
                                     % (60 * SLOW, self.log_path))
            if "Address already in use" not in self.tail():
                raise AssertionError("eftd exited at start: %s (log: %s)"
                                     % (harness.exit_status(self.proc.returncode), self.log_path))
            if attempt >= 3:
                self.port, self.http = pick_port(), pick_port({self.port})
                self.say("a port was taken; eftd moves to tcp %d, http %d" % (self.port,
                                                                              self.http))
            time.sleep(1)
        raise AssertionError("eftd found no free port to listen on (log: %s)" % self.log_path)

    def tail(self, size=4096):
        with open(self.log_path, "rb") as f:
            f.seek(max(os.path.getsize(self.log_path) - size, 0))
            return f.read().decode("utf-8", "replace")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        harness.kill9(self.proc)

    def stop(self):
        """SIGTERM; the exit status (None if it had to be killed)."""
        if not self.alive():
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=30 * SLOW)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            return None

    def status(self, field):
        try:
            return harness.rss_bytes(self.proc.pid, field) // 1024
        except (OSError, AssertionError):
            return None

    def metrics(self):
        """eft_messages_queued and eft_journal_bytes, or Nones."""
        want = {"eft_messages_queued": None, "eft_journal_bytes": None}
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.http,
                                        timeout=2 * SLOW) as r:
                for line in r.read().decode().splitlines():
                    name, _, value = line.partition(" ")
                    if name in want:
                        want[name] = int(float(value))
        except (OSError, ValueError):
            pass
        return want["eft_messages_queued"], want["eft_journal_bytes"]

    def problems(self):
        """New lines of the log that tell of trouble: eftd's error level,
        and what ASan, UBSan or glibc print when a process goes wrong."""
        with open(self.log_path, "rb") as f:
            f.seek(self.log_read)
            text = f.read()
            self.log_read = f.tell()
        # sanitizer, valgrind and glibc reports as the harness knows them
        bad = re.compile(r" eftd error: |corrupted |Assertion .* failed")
        lines = text.decode("utf-8", "replace").splitlines()
        return [line for line in lines if bad.search(line) or harness.reports(line)], \
            sum(1 for line in lines if " eftd warn: " in line)


# ---------------------------------------------------------------------------
# the run


def describe(binary):
    """eftd's version and the commit of the checkout it was built in."""
    what = []
    for cmd in ([binary, "-V"], ["git", "-C", harness.ROOT, "describe", "--always", "--dirty"]):
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=10,
                               stdin=subprocess.DEVNULL)
            what.append(r.stdout.strip() or r.stderr.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    return ", commit ".join(w for w in what if w)


def kill_range(text):
    lo, _, hi = text.partition("-")
    lo, hi = float(lo), float(hi or lo)
    if not 0 < lo <= hi:
        raise argparse.ArgumentTypeError("MIN-MAX seconds, 0 < MIN <= MAX")
    return lo, hi


class Soak:
    def __init__(self, args):
        self.a = args
        self.out = args.out
        os.makedirs(self.out, exist_ok=True)
        self.data = os.path.join(self.out, "data")
        self.summary_lines = []
        self.report = Report(self.say)
        self.rnd = random.Random(args.seed)
        conf = os.path.join(self.out, "eftd.conf")
        with open(conf, "w") as f:
            f.write("fsync = always\n")
            for kv in args.set:
                k, _, v = kv.partition("=")
                f.write("%s = %s\n" % (k.strip(), v.strip()))
        self.eftd = Eftd(args.eftd, self.data, conf, os.path.join(self.out, "eftd.log"),
                         self.say)
        self.rss_csv = open(os.path.join(self.out, "rss.csv"), "w")
        self.rss_csv.write("unix_time,elapsed_s,round,pid,rss_kb,queued,journal_bytes\n")
        self.rounds_csv = open(os.path.join(self.out, "rounds.csv"), "w")
        self.rounds_csv.write("round,started_s,ran_s,max_rss_kb,hwm_kb,sent,receipted,acked,aborted,"
                              "deliveries,redelivered,rpc_replies,durable_deliveries,"
                              "drained_after,lost,auto_cut,ledger_size\n")
        self.totals = collections.Counter()
        self.peaks = []              # (round, highest VmRSS sample, VmHWM) per round, kB
        self.round_rss = 0           # highest VmRSS sample of the running round
        self.rss_all = []            # every VmRSS sample, kB (a 2 h run: ~1,500)
        self.warns = 0
        self.described = describe(args.eftd)
        self.died = None             # how eftd died on its own, if it did
        self.t0 = time.time()

    def say(self, text):
        line = "[%s +%s] %s" % (time.strftime("%H:%M:%S"), self.clock(), text)
        print(line, flush=True)

    def clock(self):
        s = int(time.time() - getattr(self, "t0", time.time()))
        return "%d:%02d:%02d" % (s // 3600, s // 60 % 60, s % 60)

    def sample(self, round_no):
        rss = self.eftd.status("VmRSS")
        if rss is None:
            return
        queued, journal = self.eftd.metrics()
        self.rss_all.append(rss)
        self.round_rss = max(self.round_rss, rss)
        self.rss_csv.write("%.0f,%.1f,%d,%d,%d,%s,%s\n" % (
            time.time(), time.time() - self.t0, round_no, self.eftd.proc.pid, rss,
            "" if queued is None else queued, "" if journal is None else journal))
        self.rss_csv.flush()

    def scan_log(self):
        bad, warns = self.eftd.problems()
        self.warns += warns
        for line in bad[:20]:
            self.report.violation("eftd log: " + line)

    def run(self):
        a = self.a
        end = self.t0 + a.hours * 3600
        max_rounds = int(a.hours * 3600 / a.kill_every[0]) + 2
        ledger = Ledger(-1, self.report, a.ledger_max)   # nothing is due before round 0
        self.say("crash soak: %.2f h, kill -9 every %g-%g s, %g messages/s per producer, seed %s, "
                 "%s (%s), config: %s; output in %s"
                 % (a.hours, a.kill_every[0], a.kill_every[1], a.rate, a.seed, a.eftd,
                    self.described, "; ".join(["fsync = always"] + a.set), self.out))
        round_no = 0
        clean_stop = None
        try:
            while True:
                self.eftd.start(round_no)
                self.sample(round_no)
                checked = check(self.eftd.port, ledger, self.report, a.auto_cut_max)
                self.totals.update({"drained after restarts": checked["drained"],
                                    "drained durable": checked["drained durable"],
                                    "drained redelivered": checked["drained redelivered"],
                                    "drained parked": checked["drained parked"],
                                    "lost": checked["lost"],
                                    "auto cut by the kill": checked["auto cut by the kill"],
                                    "duplicates": checked["duplicates"]})
                if ledger.round >= 0:
                    self.round_row(ledger, checked)
                self.scan_log()
                if self.report.n_violations:
                    break
                # a round starts only if it can run its shortest length
                if time.time() + a.kill_every[0] > end or round_no >= max_rounds:
                    rc = self.eftd.stop()
                    clean_stop = rc
                    if rc != 0:
                        self.report.violation("eftd did not stop cleanly on SIGTERM: %s"
                                              % harness.exit_status(rc))
                    self.scan_log()
                    break
                ledger = self.one_round(round_no, end)
                round_no += 1
        except Exception as e:  # noqa: BLE001 - a failure of the soak itself fails it
            self.report.violation("round %d: %s: %s" % (round_no, type(e).__name__, e))
            # e.g. the checker's connection closed: did eftd die meanwhile?
            if self.eftd.proc is not None and self.eftd.proc.poll() is not None \
                    and self.eftd.proc.returncode != -signal.SIGKILL and self.died is None:
                self.died = ("round %d: eftd is not running: %s (log: %s)"
                             % (round_no, harness.exit_status(self.eftd.proc.returncode),
                                self.eftd.log_path))
                self.report.violation(self.died)
        finally:
            if self.eftd.alive():
                self.eftd.proc.kill()
                self.eftd.proc.wait(timeout=10)
            self.rss_csv.close()
            self.rounds_csv.close()
        return self.summary(round_no, clean_stop)

    def one_round(self, round_no, end):
        """Workers until a kill -9 at a random moment (not after the end of
        the run, unless the shortest round would); returns the round's ledger."""
        a = self.a
        ledger = Ledger(round_no, self.report, a.ledger_max)
        started = time.time()
        kill_at = started + min(self.rnd.uniform(*a.kill_every),
                                max(end - started, a.kill_every[0]))
        rnd_ = Round(round_no, self.eftd.port, ledger, self.report, a.rate, kill_at + GRACE)
        threads = workers(rnd_, self.rnd)
        for t in threads:
            t.start()
        next_sample = time.time()
        self.round_rss = 0
        died = False
        while time.time() < kill_at:
            time.sleep(max(min(0.25, kill_at - time.time()), 0))
            if not self.eftd.alive():
                died = True
                break
            if rnd_.errors:
                break       # the kill comes early; the check after it still runs
            if time.time() >= next_sample:
                self.sample(round_no)
                next_sample += a.rss_every
        peak = self.eftd.status("VmHWM")
        self.sample(round_no)
        if died:
            self.died = ("round %d: eftd exited on its own after %.0f s: %s (log: %s)"
                         % (round_no, time.time() - started,
                            harness.exit_status(self.eftd.proc.returncode), self.eftd.log_path))
            self.report.violation(self.died)
        else:
            rnd_.killed.set()
            try:
                self.eftd.kill9()
            except AssertionError as e:
                self.died = "round %d: %s (log: %s)" % (round_no, e, self.eftd.log_path)
                self.report.violation(self.died)
            self.totals["kills"] += 1
        join_by = time.time() + 30 * SLOW
        for t in threads:
            t.join(max(join_by - time.time(), 0.1))
            if t.is_alive():
                self.report.violation("round %d: %s still running 30 s after eftd ended"
                                      % (round_no, t.name))
        ran = time.time() - started
        self.peaks.append((round_no, self.round_rss, peak or 0))
        self.totals.update(ledger.n)
        self.totals.update(rnd_.n)
        need = ["receipted SENDs", "ACK RECEIPTs", "RPC replies", "durable deliveries",
                "auto deliveries"]
        idle = [k for k in need if rnd_.n[k] == 0]
        if idle and not died and not rnd_.errors:
            self.report.violation("round %d: no progress in %.0f s: none of %s"
                                  % (round_no, ran, ", ".join(idle)))
        # and the producers got at least a tenth of what they asked for
        aimed = 3 * a.rate * (kill_at - started)
        if rnd_.n["receipted SENDs"] < 0.1 * aimed and not died and not rnd_.errors:
            self.report.violation("round %d: %d SENDs got a RECEIPT in %.0f s, less than a tenth "
                                  "of the %.0f the producers aimed at"
                                  % (round_no, rnd_.n["receipted SENDs"], kill_at - started,
                                     aimed))
        self.round_stats = (started - self.t0, ran, self.round_rss, peak, rnd_.n,
                            collections.Counter(ledger.n))
        self.say("round %d: %s after %.0f s; %d sent, %d with a RECEIPT, %d ACKed with a RECEIPT, "
                 "%d aborted, %d deliveries (%d redelivered, %d durable), %d RPC replies; "
                 "eftd RSS at most %.1f MB (VmHWM %s)"
                 % (round_no, "killed -9" if not died else "eftd DIED", ran, ledger.n["sent"],
                    ledger.n["receipted"], ledger.n["acked"], ledger.n["aborted"],
                    ledger.n["deliveries"], ledger.n["redelivered"],
                    rnd_.n["durable deliveries"], rnd_.n["RPC replies"], self.round_rss / 1024,
                    "%.1f MB" % (peak / 1024) if peak else "-"))
        return ledger

    def round_row(self, ledger, checked):
        started, ran, rss, peak, n, led = self.round_stats   # led: before the check
        self.rounds_csv.write("%d,%.0f,%.1f,%d,%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\n" % (
            ledger.round, started, ran, rss, peak or "", led["sent"], led["receipted"],
            led["acked"], led["aborted"], led["deliveries"],
            led["redelivered"], n["RPC replies"], n["durable deliveries"],
            checked["drained"], checked["lost"], checked["auto cut by the kill"],
            len(ledger.flags)))
        self.rounds_csv.flush()
        self.totals["ledger peak"] = max(self.totals["ledger peak"], len(ledger.flags))
        self.say("check after round %d: %d drained (%d durable, %d redelivered, %d parked), "
                 "%d lost, %d auto-ack deliveries cut by the kill"
                 % (ledger.round, checked["drained"], checked["drained durable"],
                    checked["drained redelivered"], checked["drained parked"], checked["lost"],
                    checked["auto cut by the kill"]))

    def rss_verdict(self):
        """(flat, text) from the highest RSS sample of each round.  VmHWM is
        not judged: it is reached while eftd reads the journal back at
        start, and so follows what the kill left (rounds are 1-5 minutes at
        random), not the run's age."""
        a = self.a
        peaks = [p for _, p, _ in self.peaks]
        if len(peaks) < 3:
            return True, "not judged (%d rounds; 3 needed)" % len(peaks)
        third = len(peaks) // 3
        first, last = max(peaks[:third]), max(peaks[-third:])
        allowed = first * (1 + a.rss_slack_pct / 100) + a.rss_slack_mb * 1024
        flat = last <= allowed
        return flat, ("%s: highest RSS of the last %d rounds %.1f MB, of the first %d %.1f MB "
                      "(allowed %.1f MB: +%g%% +%g MB)"
                      % ("flat" if flat else "GROWING", third, last / 1024, third,
                         first / 1024, allowed / 1024, a.rss_slack_pct, a.rss_slack_mb))

    def summary(self, rounds, clean_stop):
        t, a = self.totals, self.a
        flat, rss_text = self.rss_verdict()
        if not flat:
            self.report.violation("RSS " + rss_text)
        lines = [
            "",
            "crash soak summary: seed %s, %s (%s), kill -9 every %g-%g s, %s"
            % (a.seed, a.eftd, self.described, a.kill_every[0], a.kill_every[1], self.out),
            "  ran %s (%.2f h asked), %d rounds, %d kills -9, eftd stopped cleanly at the end: %s"
            % (self.clock(), a.hours, rounds, t["kills"],
               "yes" if clean_stop == 0 else "no" if clean_stop is not None else "-"),
            "  messages: %d sent, %d with a RECEIPT (%d transactions committed, %d aborted: %d "
            "messages), %d ACKed with a RECEIPT"
            % (t["sent"], t["receipted"], t["transactions committed"],
               t["transactions aborted"], t["aborted"], t["acked"]),
            "  deliveries: %d during rounds (%d with redelivered:true), %d durable, %d auto, "
            "%d NACKs"
            % (t["deliveries"], t["redelivered"],
               t["durable deliveries"], t["auto deliveries"], t["NACKs"]),
            "  after restarts: %d drained (%d from the durable subscription, %d redelivered, "
            "%d never handed out from %s), %d auto-ack deliveries cut by a kill"
            % (t["drained after restarts"], t["drained durable"], t["drained redelivered"],
               t["drained parked"], QUEUES["qp"],
               t["auto cut by the kill"]),
            "  RPC: %d replies, %d requests served" % (t["RPC replies"],
                                                       t["RPC requests served"]),
            "  LOST %d, DUPLICATES without redelivered:true %d, violations %d"
            % (t["lost"], t["duplicates"], self.report.n_violations),
        ]
        if self.rss_all:
            r = self.rss_all
            lines.append("  eftd RSS (kB): min %d, max %d, first %d, last %d (%d samples); "
                         "per round, highest sample/VmHWM: %s"
                         % (min(r), max(r), r[0], r[-1], len(r),
                            " ".join("%d/%d" % (m, h) for _, m, h in self.peaks)))
        lines.append("  RSS " + rss_text)
        lines.append("  ledger at most %d messages; eftd log: %d warn lines, %d bytes"
                     % (t["ledger peak"], self.warns, os.path.getsize(self.eftd.log_path)
                        if os.path.exists(self.eftd.log_path) else 0))
        if self.died:
            lines.append("  EFTD DIED ON ITS OWN: " + self.died)
        for v in self.report.violations[:30]:
            lines.append("  violation: " + v)
        if self.report.n_violations > 30:
            lines.append("  ... %d more violations" % (self.report.n_violations - 30))
        ok = self.report.n_violations == 0
        if ok and not a.keep_data:
            shutil.rmtree(self.data, True)
            lines.append("  data directory removed (nothing wrong); log, rss.csv, rounds.csv "
                         "kept in %s" % self.out)
        else:
            lines.append("  kept for inspection: %s (data/, eftd.log, rss.csv, rounds.csv)"
                         % self.out)
        lines.append("RESULT: %s" % ("OK" if ok else "FAIL"))
        text = "\n".join(lines)
        print(text, flush=True)
        with open(os.path.join(self.out, "summary.txt"), "w") as f:
            f.write(text + "\n")
        return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(
        prog="crash_soak.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__[__doc__.index("\n\n") + 2:])
    p.add_argument("--hours", type=float, default=2.0, help="how long (default 2; may be 0.05)")
    p.add_argument("--kill-every", type=kill_range, default=(60.0, 300.0), metavar="MIN-MAX",
                   help="seconds between restart and kill, uniformly (default 60-300)")
    p.add_argument("--rate", type=float, default=100,
                   help="messages a second per producer (3 producers; default 100)")
    p.add_argument("--rss-every", type=float, default=5, help="RSS sampling period, s (5)")
    p.add_argument("--rss-slack-pct", type=float, default=20)
    p.add_argument("--rss-slack-mb", type=float, default=8)
    p.add_argument("--auto-cut-max", type=int, default=2 << 20, metavar="BYTES",
                   help="auto-ack deliveries a kill may cut, in bytes (default 2 MiB: four "
                        "times eftd's output-high-water)")
    p.add_argument("--ledger-max", type=int, default=2000000,
                   help="messages one round's ledger may hold before the soak gives up")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="another line for eftd's config file (repeatable; fsync = always is "
                        "always there)")
    p.add_argument("--seed", default=str(int(time.time())))
    p.add_argument("--eftd", default=harness.EFTD)
    p.add_argument("--out", help="folder for the log, CSVs and data (default "
                                 "build/crash-soak/DATE-TIME)")
    p.add_argument("--keep-data", action="store_true", help="keep the data directory on success")
    args = p.parse_args()
    if args.hours <= 0 or args.rate <= 0 or args.rss_every <= 0:
        p.error("--hours, --rate and --rss-every must be positive")
    if args.out is None:
        args.out = os.path.join(harness.ROOT, harness.BUILD, "crash-soak",
                                time.strftime("%Y%m%d-%H%M%S"))
    sys.exit(Soak(args).run())


if __name__ == "__main__":
    main()
