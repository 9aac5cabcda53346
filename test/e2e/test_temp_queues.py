"""Temp-queues for request/reply (issue 3), end to end, in raw bytes.

RabbitMQ's rules (README "Temp-queues", STOMP-NOTES): a SEND with
reply-to:/temp-queue/NAME gives the sending connection a private queue (once
per connection and NAME), subscribes it automatically (auto ack, subscription
id /temp-queue/NAME), and the delivered request carries an unguessable
reply-to:/reply-queue/eft.gen-<22 chars>.  Anyone may SEND to that name; the
reply reaches the owner only.  ActiveMQ-style clients may SUBSCRIBE to
/temp-queue/NAME themselves.  The queue dies with its owner; later replies
are dropped.  Nobody may SUBSCRIBE to a /reply-queue/ name.

Version-sensitive tests run once per STOMP version (test_*_10/_11/_12); the
service then speaks another version, so every reply crosses versions.  The
load tests run 16 raw clients pipelining 10,000 requests through one
responder, and a client that disconnects with replies in flight.

    /usr/bin/python3 test/e2e/run.py 'test_temp_queues.py'
"""

import os
import re
import threading
import time
import unittest

import harness

REPLY_RE = re.compile(r"^/reply-queue/eft\.gen-[A-Za-z0-9_-]{22}$")
VERSIONS = ("1.0", "1.1", "1.2")
# The service in a version test speaks another version than the requester.
OTHER = {"1.0": "1.2", "1.1": "1.0", "1.2": "1.1"}
SVC = "/queue/svc"
QUIET = 0.2   # how long "nothing arrives" is watched (expect_nothing scales it by SLOW)


def names(f, name):
    return [v for k, v in f.headers if k == name]


def ack_frame(c, version, m, sub_id):
    """ACK of MESSAGE m, in the form the version uses."""
    if version == "1.2":
        c.send_frame("ACK", [("id", m["ack"])])
    elif version == "1.1":
        c.send_frame("ACK", [("subscription", sub_id), ("message-id", m["message-id"])])
    else:
        c.send_frame("ACK", [("message-id", m["message-id"])])


class TempQueueBase(harness.BrokerTest):
    args = ("-l", "debug")

    # ---- helpers

    def receipt(self, c, rid):
        f = c.read_frame()
        self.assertEqual(f.command, "RECEIPT", "expected RECEIPT %s, got %r" % (rid, f))
        self.assertEqual(f["receipt-id"], rid)
        return f

    def sync(self, c, tag):
        """A frame with a receipt: everything c sent before has taken effect."""
        c.send_frame("SEND", [("destination", "/topic/sync"), ("receipt", tag)])
        self.receipt(c, tag)

    def service(self, version, dest=SVC, sub_id="svc", ack="auto"):
        s = self.client(version)
        s.send_frame("SUBSCRIBE", [("destination", dest), ("id", sub_id), ("ack", ack),
                                   ("receipt", "svc-sub")])
        self.receipt(s, "svc-sub")
        return s

    def request(self, c, cid, body="ping", reply_to="/temp-queue/rpc", dest=SVC, receipt=None,
                extra=()):
        h = [("destination", dest), ("reply-to", reply_to), ("correlation-id", cid)]
        h += list(extra)
        if receipt:
            h.append(("receipt", receipt))
        c.send_frame("SEND", h, body)
        if receipt:
            self.receipt(c, receipt)

    def take_request(self, s, cid=None, dest=SVC):
        """The next request at the service; returns (frame, reply name)."""
        m = s.expect("MESSAGE")
        self.assertEqual(m["destination"], dest)
        if cid is not None:
            self.assertEqual(m["correlation-id"], cid)
        self.assertEqual(len(names(m, "reply-to")), 1, "one reply-to header: %r" % m)
        return m, m["reply-to"]

    def reply(self, s, to, cid, body="pong", receipt=None, extra=()):
        h = [("destination", to), ("correlation-id", cid)] + list(extra)
        if receipt:
            h.append(("receipt", receipt))
        s.send_frame("SEND", h, body)
        if receipt:
            self.receipt(s, receipt)

    def expect_reply(self, c, to, cid, body="pong", sub="/temp-queue/rpc"):
        m = c.expect("MESSAGE")
        self.assertEqual(m.get("subscription"), sub, "reply's subscription: %r" % m)
        self.assertEqual(m["destination"], to, "reply's destination: %r" % m)
        self.assertEqual(m["correlation-id"], cid, "reply's correlation-id: %r" % m)
        self.assertEqual(m.body, body.encode())
        self.assertIsNone(m.get("receipt"), "receipt header passed on: %r" % m)
        self.assertIsNone(m.get("transaction"), "transaction header passed on: %r" % m)
        return m

    def peer_of(self, c):
        return "127.0.0.1:%d" % c.sock.getsockname()[1]

    def wait_log(self, pred, what, timeout=5):
        deadline = time.time() + timeout * harness.SLOW
        while True:
            log = self.broker.read_log()
            if pred(log):
                return log
            if time.time() > deadline:
                self.fail("eftd log never showed %s; log:\n%s" % (what, log[-4000:]))
            time.sleep(0.02)

    def close_and_wait(self, c, how="abrupt"):
        """Close c (abruptly, or by DISCONNECT with a receipt); returns once
        eftd has logged the connection closed."""
        peer = self.peer_of(c)
        if how == "disconnect":
            c.send_frame("DISCONNECT", [("receipt", "bye")])
            self.receipt(c, "bye")
            c.expect_closed()
        c.close()
        self.wait_log(lambda log: (peer + ": connection closed") in log,
                      "%s closed" % peer)

    def drops_logged(self, name):
        return sum(1 for line in self.broker.read_log().splitlines()
                   if name in line and "dropped" in line)


class TempQueueTest(TempQueueBase):

    # ---- the basic exchange, per version

    def _rewrite_and_reply(self, v):
        svc = self.service(OTHER[v])
        a = self.client(v)
        self.request(a, "c-1", body="ping", receipt="req-1", extra=[("x-app", "yes")])
        m, to = self.take_request(svc, "c-1")
        self.assertRegex(to, REPLY_RE)
        self.assertNotIn("rpc", to[len("/reply-queue/eft.gen-"):])
        self.assertEqual(m["x-app"], "yes")
        self.assertEqual(m.body, b"ping")
        self.assertIsNone(m.get("receipt"))
        self.reply(svc, to, "c-1", "pong", receipt="rep-1", extra=[("x-answer", "42")])
        r = self.expect_reply(a, to, "c-1", "pong")
        self.assertEqual(r["x-answer"], "42")
        self.assertIsNone(r.get("ack"), "automatic subscription is auto-ack: %r" % r)
        self.assertTrue(r["message-id"])
        a.expect_nothing(QUIET)
        svc.expect_nothing(QUIET)

    def _reused_per_name(self, v):
        svc = self.service(OTHER[v])
        a = self.client(v)
        for i in range(3):
            self.request(a, "r-%d" % i)
        self.request(a, "o-0", reply_to="/temp-queue/other", receipt="sent")
        got = [self.take_request(svc)[1] for _ in range(4)]
        self.assertEqual(got[0], got[1])
        self.assertEqual(got[0], got[2])
        self.assertNotEqual(got[0], got[3])
        for n in got:
            self.assertRegex(n, REPLY_RE)
        for i in range(3):
            self.reply(svc, got[i], "r-%d" % i, "pong %d" % i)
        self.reply(svc, got[3], "o-0", "other", receipt="replied")
        for i in range(3):
            self.expect_reply(a, got[0], "r-%d" % i, "pong %d" % i)
        self.expect_reply(a, got[3], "o-0", "other", sub="/temp-queue/other")
        a.expect_nothing(QUIET)   # one automatic subscription per name, not one per SEND

    def _non_temp_reply_to_passes(self, v):
        svc = self.service(OTHER[v])
        a = self.client(v)
        self.request(a, "p-1", reply_to="/queue/replies")
        self.request(a, "p-2", reply_to="/topic/replies", receipt="sent")
        _, to1 = self.take_request(svc, "p-1")
        _, to2 = self.take_request(svc, "p-2")
        self.assertEqual(to1, "/queue/replies")
        self.assertEqual(to2, "/topic/replies")
        # Nothing subscribed a to /queue/replies: the reply waits there.
        self.reply(svc, to1, "p-1", "queued", receipt="rep")
        a.expect_nothing(QUIET)
        a.send_frame("SUBSCRIBE", [("destination", "/queue/replies"), ("id", "mine")])
        m = a.expect("MESSAGE")
        self.assertEqual((m["destination"], m["subscription"], m.body),
                         ("/queue/replies", "mine", b"queued"))

    def _reply_from_anyone(self, v):
        svc = self.service(OTHER[v])
        a = self.client(v)
        third = self.client(OTHER[OTHER[v]])
        self.request(a, "x-1")
        _, to = self.take_request(svc, "x-1")
        self.reply(third, to, "x-1", "from a third connection", receipt="t")
        self.expect_reply(a, to, "x-1", "from a third connection")
        self.reply(a, to, "x-2", "to myself")
        self.expect_reply(a, to, "x-2", "to myself")
        third.expect_nothing(QUIET)
        svc.expect_nothing(0)

    def _subscribe_first(self, v):
        """ActiveMQ style: the client's own subscription, its id and ack mode."""
        svc = self.service(OTHER[v])
        a = self.client(v)
        a.send_frame("SUBSCRIBE", [("destination", "/temp-queue/replies"), ("id", "mine"),
                                   ("ack", "client"), ("receipt", "sub")])
        self.receipt(a, "sub")
        self.request(a, "s-1", reply_to="/temp-queue/replies", receipt="req")
        _, to = self.take_request(svc, "s-1")
        self.assertRegex(to, REPLY_RE)
        self.reply(svc, to, "s-1", "one")
        self.reply(svc, to, "s-2", "two", receipt="rep")
        m1 = self.expect_reply(a, to, "s-1", "one", sub="mine")
        m2 = self.expect_reply(a, to, "s-2", "two", sub="mine")
        if v == "1.2":
            self.assertTrue(m1.get("ack") and m2.get("ack"), "client ack mode: ack headers")
        a.expect_nothing(QUIET)   # no second (automatic) subscription
        # ack:client is the subscription's: ACK only the first, give the
        # subscription up, and the second comes back redelivered.
        ack_frame(a, v, m1, "mine")
        a.send_frame("UNSUBSCRIBE", [("id", "mine"), ("receipt", "unsub")])
        self.receipt(a, "unsub")
        a.send_frame("SUBSCRIBE", [("destination", "/temp-queue/replies"), ("id", "again")])
        m = self.expect_reply(a, to, "s-2", "two", sub="again")
        self.assertEqual(m.get("redelivered"), "true")
        a.expect_nothing(QUIET)

    def _same_name_two_connections(self, v):
        svc = self.service(OTHER[v])
        a = self.client(v)
        b = self.client(OTHER[v])
        # b subscribes ActiveMQ-style first; a relies on the automatic subscription.
        b.send_frame("SUBSCRIBE", [("destination", "/temp-queue/rpc"), ("id", "b-sub"),
                                   ("receipt", "bs")])
        self.receipt(b, "bs")
        self.request(a, "a-1", body="from a", receipt="ra")
        self.request(b, "b-1", body="from b", receipt="rb")
        _, to_a = self.take_request(svc, "a-1")
        _, to_b = self.take_request(svc, "b-1")
        self.assertNotEqual(to_a, to_b)
        self.reply(svc, to_b, "b-1", "for b")
        self.reply(svc, to_a, "a-1", "for a", receipt="r")
        self.expect_reply(a, to_a, "a-1", "for a")
        self.expect_reply(b, to_b, "b-1", "for b", sub="b-sub")
        a.expect_nothing(QUIET)
        b.expect_nothing(0)
        # A SEND to /temp-queue/rpc itself reaches only the sender's own queue.
        b.send_frame("SEND", [("destination", "/temp-queue/rpc"), ("receipt", "own")], "self")
        got = {f.command: f for f in b.read_frames(2)}   # MESSAGE and RECEIPT, either order
        self.assertEqual(sorted(got), ["MESSAGE", "RECEIPT"])
        self.assertEqual(got["RECEIPT"]["receipt-id"], "own")
        m = got["MESSAGE"]
        self.assertEqual((m["subscription"], m["destination"], m.body),
                         ("b-sub", "/temp-queue/rpc", b"self"))
        a.expect_nothing(QUIET)

    def _owner_closes(self, v, how):
        svc = self.service(OTHER[v])
        a = self.client(v)
        # One reply delivered but not acknowledged, two waiting in the queue.
        a.send_frame("SUBSCRIBE", [("destination", "/temp-queue/held"), ("id", "h"),
                                   ("ack", "client"), ("prefetch-count", "1"), ("receipt", "s")])
        self.receipt(a, "s")
        self.request(a, "h-0", reply_to="/temp-queue/held", receipt="r0")
        self.request(a, "c-0", reply_to="/temp-queue/rpc", receipt="r1")
        _, old_held = self.take_request(svc, "h-0")
        _, old_rpc = self.take_request(svc, "c-0")
        for i in range(3):
            self.reply(svc, old_held, "h-%d" % i, "held %d" % i)
        self.reply(svc, old_rpc, "c-0", "live", receipt="rep")
        self.expect_reply(a, old_held, "h-0", "held 0", sub="h")
        self.expect_reply(a, old_rpc, "c-0", "live")
        a.expect_nothing(QUIET)   # prefetch-count:1 keeps the other two queued

        self.close_and_wait(a, how)

        # A new connection reusing both names gets new queues and nothing old.
        c = self.client(v)
        c.send_frame("SUBSCRIBE", [("destination", "/temp-queue/held"), ("id", "h"),
                                   ("receipt", "s")])
        self.receipt(c, "s")
        self.request(c, "n-0", reply_to="/temp-queue/held", receipt="n0")
        self.request(c, "n-1", reply_to="/temp-queue/rpc", receipt="n1")
        _, new_held = self.take_request(svc, "n-0")
        _, new_rpc = self.take_request(svc, "n-1")
        self.assertNotIn(new_held, (old_held, old_rpc))
        self.assertNotIn(new_rpc, (old_held, old_rpc))
        c.expect_nothing(QUIET)   # the dead queues' messages went with them

        # Replies to the dead names: accepted (RECEIPT), delivered to nobody.
        self.reply(svc, old_rpc, "late-1", "late", receipt="late-1")
        self.reply(svc, old_held, "late-2", "late", receipt="late-2")
        svc.send_frame("BEGIN", [("transaction", "t")])
        self.reply(svc, old_rpc, "late-3", "late", extra=[("transaction", "t")])
        svc.send_frame("COMMIT", [("transaction", "t"), ("receipt", "commit")])
        self.receipt(svc, "commit")
        c.expect_nothing(QUIET)
        svc.expect_nothing(0)
        self.wait_log(lambda log: self.drops_logged(old_rpc) >= 2 and self.drops_logged(old_held) >= 1,
                      "the late replies dropped")

        # The broker and the new queues work.
        self.reply(svc, new_rpc, "n-1", "fresh", receipt="fresh")
        self.expect_reply(c, new_rpc, "n-1", "fresh")
        self.reply(svc, new_held, "n-0", "fresh held", receipt="fresh2")
        self.expect_reply(c, new_held, "n-0", "fresh held", sub="h")
        self.assertTrue(self.broker.alive())

    def _subscribe_reply_queue_is_error(self, v):
        svc = self.service(OTHER[v])
        a = self.client(v)
        self.request(a, "e-1")
        _, to = self.take_request(svc, "e-1")
        thief = self.client(v)
        thief.send_frame("SUBSCRIBE", [("destination", to), ("id", "steal"), ("receipt", "st")])
        err = thief.expect_error_and_close()
        self.assertTrue(err["message"])
        self.assertEqual(err.get("receipt-id"), "st")
        bogus = self.client(v)
        bogus.send_frame("SUBSCRIBE", [("destination", "/reply-queue/eft.gen-AAAAAAAAAAAAAAAAAAAAAA"),
                                       ("id", "x")])
        bogus.expect_error_and_close()
        # Everyone else is untouched: the owner still gets its reply.
        self.reply(svc, to, "e-1", "still mine", receipt="r")
        self.expect_reply(a, to, "e-1", "still mine")
        # Not even the owner may subscribe to the reply name.
        a.send_frame("SUBSCRIBE", [("destination", to), ("id", "own")])
        a.expect_error_and_close()
        self.sync(svc, "alive")

    def _transaction(self, v):
        svc = self.service(OTHER[v])
        a = self.client(v)
        a.send_frame("BEGIN", [("transaction", "tx1"), ("receipt", "b1")])
        self.receipt(a, "b1")
        # (a SEND's RECEIPT in a transaction comes at COMMIT, before the COMMIT's)
        self.request(a, "t-1", reply_to="/temp-queue/tx",
                     extra=[("transaction", "tx1"), ("receipt", "s1")])
        svc.expect_nothing(QUIET)
        a.send_frame("COMMIT", [("transaction", "tx1"), ("receipt", "c1")])
        self.receipt(a, "s1")
        self.receipt(a, "c1")
        m, to = self.take_request(svc, "t-1")
        self.assertRegex(to, REPLY_RE)
        self.assertIsNone(m.get("transaction"))
        # The service answers in its own transaction: nothing until COMMIT.
        svc.send_frame("BEGIN", [("transaction", "st")])
        self.reply(svc, to, "t-1", "in tx", extra=[("transaction", "st"), ("receipt", "sr")])
        a.expect_nothing(QUIET)
        svc.send_frame("COMMIT", [("transaction", "st"), ("receipt", "sc")])
        self.receipt(svc, "sr")
        self.receipt(svc, "sc")
        self.expect_reply(a, to, "t-1", "in tx", sub="/temp-queue/tx")
        # ABORT: the request never goes.
        a.send_frame("BEGIN", [("transaction", "tx2")])
        self.request(a, "t-2", reply_to="/temp-queue/tx", extra=[("transaction", "tx2")])
        a.send_frame("ABORT", [("transaction", "tx2"), ("receipt", "ab")])
        self.receipt(a, "ab")
        svc.expect_nothing(QUIET)
        self.request(a, "t-3", reply_to="/temp-queue/tx", receipt="s3")
        _, to3 = self.take_request(svc, "t-3")
        self.assertEqual(to3, to)
        self.reply(svc, to3, "t-3", "after abort")
        self.expect_reply(a, to, "t-3", "after abort", sub="/temp-queue/tx")
        a.expect_nothing(QUIET)

    # ---- version-independent

    def test_reply_names_unique_and_unguessable(self):
        svc = self.service("1.2")
        clients = [self.client("1.2") for _ in range(20)]
        for i, c in enumerate(clients):
            self.request(c, "u-%d" % i)
        got = {}
        for _ in clients:
            m, to = self.take_request(svc)
            self.assertRegex(to, REPLY_RE)
            got[m["correlation-id"]] = to
        self.assertEqual(len(set(got.values())), 20, "reply names not unique: %r" % got)
        rand = [to[len("/reply-queue/eft.gen-"):] for to in got.values()]
        # 20 x 22 characters of 16 random bytes each use most of the alphabet,
        # and no two names share a long common prefix (no counter in them).
        self.assertGreater(len(set("".join(rand))), 40, "names look guessable: %r" % rand)
        for i in range(len(rand)):
            for j in range(i + 1, len(rand)):
                self.assertNotEqual(rand[i][:8], rand[j][:8], "names share a prefix: %r" % rand)
        for i in range(len(clients)):
            self.reply(svc, got["u-%d" % i], "u-%d" % i, "r%d" % i)
        for i, c in enumerate(clients):
            self.expect_reply(c, got["u-%d" % i], "u-%d" % i, "r%d" % i)

    def test_subscribe_first_without_id_10(self):
        """1.0 SUBSCRIBE to /temp-queue/NAME without an id: replies arrive once."""
        svc = self.service("1.2")
        a = self.client("1.0")
        a.send_frame("SUBSCRIBE", [("destination", "/temp-queue/noid"), ("receipt", "s")])
        self.receipt(a, "s")
        self.request(a, "n-1", reply_to="/temp-queue/noid")
        _, to = self.take_request(svc, "n-1")
        self.reply(svc, to, "n-1", "hello", receipt="r")
        m = a.expect("MESSAGE")
        self.assertEqual((m["destination"], m["correlation-id"], m.body), (to, "n-1", b"hello"))
        a.expect_nothing(QUIET)

    def test_reply_in_tx_committed_after_owner_closed(self):
        svc = self.service("1.2")
        a = self.client("1.1")
        self.request(a, "k-1", receipt="r")
        _, to = self.take_request(svc, "k-1")
        svc.send_frame("BEGIN", [("transaction", "late")])
        self.reply(svc, to, "k-1", "too late", extra=[("transaction", "late"), ("receipt", "in-tx")])
        self.close_and_wait(a)
        b = self.client("1.1")   # reuses the name, must not get the old reply
        self.request(b, "k-2", receipt="r2")
        _, to_b = self.take_request(svc, "k-2")
        self.assertNotEqual(to_b, to)
        svc.send_frame("COMMIT", [("transaction", "late"), ("receipt", "c")])
        self.receipt(svc, "in-tx")   # at COMMIT: the reply went (nowhere)
        self.receipt(svc, "c")
        b.expect_nothing(QUIET)
        svc.expect_nothing(0)
        self.wait_log(lambda log: self.drops_logged(to) >= 1, "the committed reply dropped")

    def test_send_with_dead_reply_name_without_owner(self):
        """A reply name that never existed: dropped, RECEIPT, no crash, no queue made."""
        s = self.client("1.2")
        bogus = "/reply-queue/eft.gen-0123456789abcdefghijkl"
        for i in range(3):
            s.send_frame("SEND", [("destination", bogus), ("receipt", "b%d" % i)], "x")
            self.receipt(s, "b%d" % i)
        s.expect_nothing(QUIET)
        other = self.client("1.0")
        other.send_frame("SUBSCRIBE", [("destination", bogus), ("receipt", "sb")])
        other.expect_error_and_close()
        self.sync(s, "alive")

    def test_reply_to_whose_id_is_taken_is_an_error(self):
        """The automatic subscription's id is /temp-queue/NAME: if the client
        already uses that id for another destination, replies could never
        arrive, so the SEND is refused with an ERROR instead of lost silently."""
        c = self.client("1.2")
        c.send_frame("SUBSCRIBE", [("destination", "/queue/other"), ("id", "/temp-queue/rpc")])
        c.send_frame("SEND", [("destination", "/queue/svc"), ("reply-to", "/temp-queue/rpc"),
                              ("receipt", "r1")], "q")
        err = c.expect_error_and_close()
        self.assertEqual(err["message"], "subscription id already in use")
        self.assertEqual(err["receipt-id"], "r1")


def _add_version_tests(cls):
    cases = {
        "rewrite_and_reply": TempQueueTest._rewrite_and_reply,
        "reused_per_name": TempQueueTest._reused_per_name,
        "non_temp_reply_to_passes": TempQueueTest._non_temp_reply_to_passes,
        "reply_from_anyone": TempQueueTest._reply_from_anyone,
        "subscribe_first": TempQueueTest._subscribe_first,
        "same_name_two_connections": TempQueueTest._same_name_two_connections,
        "owner_closes_abruptly": lambda self, v: TempQueueTest._owner_closes(self, v, "abrupt"),
        "owner_disconnects": lambda self, v: TempQueueTest._owner_closes(self, v, "disconnect"),
        "subscribe_reply_queue_is_error": TempQueueTest._subscribe_reply_queue_is_error,
        "transaction": TempQueueTest._transaction,
    }
    for name, fn in cases.items():
        for v in VERSIONS:
            def test(self, fn=fn, v=v):
                fn(self, v)
            test.__name__ = "test_%s_%s" % (name, v.replace(".", ""))
            test.__doc__ = None
            setattr(cls, test.__name__, test)


_add_version_tests(TempQueueTest)


# ------------------------------------------------------------------ load

def answer(body):
    """What the responder makes of a request body."""
    return b"re:" + body[::-1]


class Responder(threading.Thread):
    """One connection serving SVC: answers every request to its reply-to,
    copying correlation-id; requests for which hold(frame) is true wait
    until release is set."""

    def __init__(self, port, hold=None):
        super().__init__(daemon=True)
        self.client = harness.RawClient(port, timeout=10)
        self.client.connect()
        self.client.send_frame("SUBSCRIBE", [("destination", SVC), ("id", "svc"),
                                             ("receipt", "svc")])
        got = []
        while not got:
            got = self.client.poll(10 * harness.SLOW)
        assert got[0].command == "RECEIPT", got
        assert len(got) == 1
        self.hold = hold
        self.held = []
        self.release = threading.Event()
        self.stop = threading.Event()
        self.seen = {}          # correlation-id -> reply-to
        self.answered = 0
        self.anomalies = []     # anything but a request on SVC
        self.error = None

    def _reply(self, m):
        return harness.frame("SEND", [("destination", m["reply-to"]),
                                      ("correlation-id", m["correlation-id"]),
                                      ("content-length", str(len(answer(m.body))))],
                             answer(m.body))

    def run(self):
        try:
            while not self.stop.is_set():
                out = []
                if self.release.is_set() and self.held:
                    out += [self._reply(m) for m in self.held]
                    self.held = []
                for m in self.client.poll(0.05):
                    if m.command != "MESSAGE" or m.get("destination") != SVC:
                        self.anomalies.append(m)
                        continue
                    cid = m.get("correlation-id")
                    if cid in self.seen:
                        self.anomalies.append(("duplicate request", m))
                    self.seen[cid] = m.get("reply-to")
                    if self.hold and self.hold(m):
                        self.held.append(m)
                    else:
                        out.append(self._reply(m))
                if out:
                    self.client.sock.settimeout(10 * harness.SLOW)
                    self.client.send(b"".join(out))
                    self.answered += len(out)
        except Exception as e:  # reported by the test
            self.error = repr(e)

    def finish(self):
        self.stop.set()
        self.join(10 * harness.SLOW)
        self.client.close()


class RpcClient(threading.Thread):
    """A raw 1.2 client pipelining n requests with reply-to:/temp-queue/rpc,
    collecting the replies; with quit_after it stops reading after that many
    replies and, once quit_now is set, closes its socket abruptly (replies
    still unread or on their way)."""

    def __init__(self, port, tag, n, quit_after=None):
        super().__init__(daemon=True)
        self.client = harness.RawClient(port, timeout=10)
        self.client.connect()
        self.peer = "127.0.0.1:%d" % self.client.sock.getsockname()[1]
        self.tag, self.n, self.quit_after = tag, n, quit_after
        self.bodies = {"%s-%d" % (tag, i): ("%s:%d:%s" % (tag, i, os.urandom(6).hex())).encode()
                       for i in range(n)}
        self.replies = []       # (correlation-id, subscription, destination, body)
        self.others = []        # frames that are not MESSAGEs
        self.extra = []         # anything after the expected replies
        self.done = threading.Event()
        self.stop = threading.Event()
        self.quit_now = threading.Event()
        self.error = None

    def run(self):
        try:
            reqs = b"".join(
                harness.frame("SEND", [("destination", SVC), ("reply-to", "/temp-queue/rpc"),
                                       ("correlation-id", cid),
                                       ("content-length", str(len(body)))], body)
                for cid, body in self.bodies.items())
            self.client.send(reqs)
            want = self.quit_after if self.quit_after is not None else self.n
            while not self.stop.is_set():
                try:
                    frames = self.client.poll(0.1)
                except harness.Closed:
                    raise harness.Closed("%s: connection closed by eftd" % self.tag)
                for m in frames:
                    if m.command != "MESSAGE":
                        self.others.append(m)
                    elif len(self.replies) < want:
                        self.replies.append((m.get("correlation-id"), m.get("subscription"),
                                             m.get("destination"), m.body))
                    else:
                        self.extra.append(m)
                if len(self.replies) >= want:
                    self.done.set()
                    if self.quit_after is not None:
                        self.quit_now.wait(10 * harness.SLOW)
                        self.client.close()     # with replies unread and still coming
                        return
        except Exception as e:
            self.error = repr(e)
        finally:
            self.done.set()

    def finish(self):
        self.stop.set()
        self.join(10 * harness.SLOW)
        self.client.close()


class TempQueueLoadTest(TempQueueBase):

    def run_clients(self, clients, deadline, start=True):
        for c in clients if start else ():
            c.start()
        for c in clients:
            if not c.done.wait(max(0.0, deadline - time.time())):
                break

    def check_client(self, c, responder):
        self.assertIsNone(c.error, "%s: %s" % (c.tag, c.error))
        self.assertEqual(c.others, [], "%s got non-MESSAGE frames" % c.tag)
        self.assertEqual(c.extra, [], "%s got more than its replies" % c.tag)
        self.assertEqual(len(c.replies), c.n, "%s: %d of %d replies" % (c.tag, len(c.replies), c.n))
        cids = [r[0] for r in c.replies]
        self.assertEqual(len(set(cids)), len(cids), "%s got duplicate replies" % c.tag)
        self.assertEqual(set(cids), set(c.bodies), "%s got someone else's replies" % c.tag)
        dests = {r[2] for r in c.replies}
        self.assertEqual(len(dests), 1, "%s: replies from several queues %r" % (c.tag, dests))
        dest = dests.pop()
        self.assertRegex(dest, REPLY_RE)
        for cid, sub, d, body in c.replies:
            self.assertEqual(sub, "/temp-queue/rpc", "%s: subscription of %s" % (c.tag, cid))
            self.assertEqual(body, answer(c.bodies[cid]), "%s: body of %s" % (c.tag, cid))
            self.assertEqual(responder.seen.get(cid), dest, "%s: reply-to of %s" % (c.tag, cid))
        return dest

    def test_load_16_clients_10000_requests(self):
        t0 = time.time()
        responder = Responder(self.broker.port)
        clients = [RpcClient(self.broker.port, "c%02d" % k, 625) for k in range(16)]
        responder.start()
        try:
            self.run_clients(clients, time.time() + 20 * harness.SLOW)
            time.sleep(QUIET * harness.SLOW)   # duplicates would arrive now
        finally:
            for c in clients:
                c.finish()
            responder.finish()
        elapsed = time.time() - t0
        self.assertIsNone(responder.error, responder.error)
        self.assertEqual(responder.anomalies, [])
        self.assertEqual(len(responder.seen), 16 * 625)
        self.assertEqual(responder.answered, 16 * 625)
        dests = [self.check_client(c, responder) for c in clients]
        self.assertEqual(len(set(dests)), 16, "clients shared a reply queue")
        self.assertTrue(self.broker.alive())
        print("\n    10000 requests/replies, 16 clients: %.2fs" % elapsed, end=" ", flush=True)

    def test_disconnect_with_replies_in_flight(self):
        total_q, streamed, read_before_quit = 400, 100, 20
        # The quitter's replies after the first `streamed` are held back
        # until its connection is gone, so they certainly meet a dead name.
        responder = Responder(
            self.broker.port,
            hold=lambda h: h.get("correlation-id", "").startswith("quit-")
            and int(h["correlation-id"].split("-")[1]) >= streamed)
        clients = [RpcClient(self.broker.port, "c%d" % k, 400) for k in range(4)]
        quitter = RpcClient(self.broker.port, "quit", total_q, quit_after=read_before_quit)
        responder.start()
        reuser = None
        try:
            quitter.start()
            for c in clients:
                c.start()
            self.assertTrue(quitter.done.wait(10 * harness.SLOW), "quitter got no replies")
            # Every request of the quitter has reached the service before it goes.
            deadline = time.time() + 10 * harness.SLOW
            while len(responder.held) < total_q - streamed and time.time() < deadline:
                time.sleep(0.01)
            quitter.quit_now.set()
            self.run_clients(clients, time.time() + 15 * harness.SLOW, start=False)
            self.wait_log(lambda log: (quitter.peer + ": connection closed") in log,
                          "the quitter's connection closed")
            self.assertEqual(len(responder.held), total_q - streamed,
                             "responder did not get all the quitter's requests")
            responder.release.set()
            dead = responder.seen["quit-0"]
            self.assertRegex(dead, REPLY_RE)
            self.wait_log(lambda log: self.drops_logged(dead) >= total_q - streamed,
                          "%d replies to %s dropped" % (total_q - streamed, dead))
            # A new connection using the same NAME gets a new queue and only its reply.
            reuser = RpcClient(self.broker.port, "reuse", 1)
            reuser.start()
            self.assertTrue(reuser.done.wait(10 * harness.SLOW), "reuser got no reply")
            time.sleep(QUIET * harness.SLOW)
        finally:
            for c in clients + [quitter] + ([reuser] if reuser else []):
                c.finish()
            responder.finish()
        self.assertIsNone(responder.error, responder.error)
        self.assertEqual(responder.anomalies, [], "the service got something not a request")
        self.assertEqual(responder.answered, 4 * 400 + total_q + 1)
        self.assertIsNone(quitter.error, quitter.error)
        self.assertEqual(quitter.others, [])
        qcids = [r[0] for r in quitter.replies]
        self.assertEqual(len(set(qcids)), read_before_quit)
        dests = {self.check_client(c, responder) for c in clients}
        self.assertEqual(len(dests), 4)
        new = self.check_client(reuser, responder)
        self.assertNotEqual(new, dead)
        self.assertNotIn(dead, dests)
        self.assertTrue(self.broker.alive())
        # eftd's closing summary counts deliveries: the held replies are not among them.
        self.assertEqual(self.broker.stop(), 0)
        log = self.broker.read_log()
        m = re.search(r"stopped: \d+ connections, (\d+) messages in, (\d+) deliveries", log)
        if m:
            requests = 4 * 400 + total_q + 1
            base = requests + 4 * 400 + 1   # requests to the service, other clients' replies
            delivered = int(m.group(2)) - base
            self.assertGreaterEqual(delivered, read_before_quit, log[-2000:])
            self.assertLessEqual(delivered, streamed,
                                 "replies to a closed connection's temp-queue were delivered")


if __name__ == "__main__":
    unittest.main()
