"""Message lifetimes and policies (issue 14), end to end against a real eftd,
in both dialects: ActiveMQ's (expires, priority, selector) and RabbitMQ's
(expiration, NACK requeue:false, dead-letter queues, drop-head overflow).

- Expiry: what expired while waiting, or was expired at SEND, is never
  delivered (nor redelivered); expires:0 never expires; with both headers the
  sooner wins; the 100 ms timer empties queues nobody reads (depth and
  eft_messages_dropped_total{reason="expired"} on /metrics); bad values get
  an ERROR and a close.
- Dead letters, global and per policy: expired, rejected, max-redeliveries
  (NACKs, consumers leaving), overflow; the copy's x-death-* headers, new
  message-id, body and headers; no loop from the dead-letter queue; dropped
  and counted without one.
- Overflow: drop-head never pauses a producer and keeps the newest; block is
  still the default.
- Priority: order, FIFO within one, default 4, >9 is 9, redelivered to the
  head of its priority.
- Selectors on queues and topics: the operators, JMSPriority, errors naming
  the position, none on durable subscriptions.
- Policies from a config file: first match wins, unset keys fall back, * and
  >; a bad line stops eftd with one line naming the file and line.
- With a data-dir, across kill -9: expiry kept and still enforced, what
  expired or died before the crash does not come back, dead letters in one
  place exactly once, priorities kept.
- The Ruby gem and stomp.py sending these headers (test/clients/
  ruby_lifetime.rb and stomp_py_lifetime.py), with /metrics checked after.

Raw tests speak exact bytes over the run's transport (tcp or tls); what
does not depend on the transport (config files, the journal) runs in the tcp
pass only.  Every wait is bounded.

    BUILD=build EFT_TRANSPORT=tcp /usr/bin/python3 test/e2e/run.py test_lifetime.py
"""

import os
import socket
import subprocess
import tempfile
import time
import unittest

import harness
from clientscript import (CLIENTS, HAVE_RUBY_STOMP, HAVE_STOMP_PY, PYTHON, RUBY,
                          ScriptTest)
from harness import (send, DataDirTest, RawClient, SLOW, expect_receipt, subscribe,
                     wait_for)
from test_admin import get_json, scrape

TCP_ONLY = unittest.skipIf(harness.TRANSPORT == "tls",
                           "config files and the journal do not depend on the transport: "
                           "runs in the tcp pass")
# STOMP over the run's transport, and the admin listener for /metrics.
ADMIN = [(harness.TRANSPORT, "127.0.0.1"), ("http", "127.0.0.1")]
REASONS = ("expired", "rejected", "max_redeliveries", "overflow")
# eftd reads the time from libevent's cache (the monotonic clock plus an
# offset it resynchronizes every few seconds), which may be a few ms off this
# process's time.time(): comparisons between the two allow this much.
CLOCK_SLACK_MS = 50


def now_ms():
    return int(time.time() * 1000)



def bodies(frames):
    return [f.body.decode() for f in frames]


def names(f):
    return [k for k, _ in f.headers]


def counts(m):
    """({reason: dropped}, {reason: dead-lettered}) of a scrape, lifetime reasons only."""
    return ({r: int(m['eft_messages_dropped_total{reason="%s"}' % r]) for r in REASONS},
            {r: int(m['eft_messages_dead_lettered_total{reason="%s"}' % r]) for r in REASONS})


def expected_counts(dropped=None, dead=None):
    return ({r: (dropped or {}).get(r, 0) for r in REASONS},
            {r: (dead or {}).get(r, 0) for r in REASONS})


class AdminMixin:
    """/metrics and the admin API of the test's eftd (admin listener second)."""

    def admin_port(self):
        return self.broker.ports[1]

    def metrics(self):
        return scrape(self.admin_port())

    def depth(self, queue, m=None):
        """Messages waiting in queue (0 for a queue eftd has forgotten)."""
        m = m or self.metrics()
        return int(m.get('eft_queue_messages{queue="%s"}' % queue, 0))

    def queues(self):
        """{name: depth} of GET /api/queues."""
        return {q["name"]: q["depth"] for q in get_json(self.admin_port(), "/api/queues")}

    def assert_counts(self, dropped=None, dead=None):
        """eft_messages_dropped_total and eft_messages_dead_lettered_total for
        the four lifetime reasons are exactly these (others 0)."""
        self.assertEqual(counts(self.metrics()), expected_counts(dropped, dead))

    def wait_counts(self, dropped=None, dead=None, timeout=3):
        """Until the counters are exactly these (the timer acts every 100 ms)."""
        want = expected_counts(dropped, dead)
        try:
            wait_for(lambda: counts(self.metrics()) == want, timeout, "counts %r" % (want,))
        except AssertionError:
            self.assertEqual(counts(self.metrics()), want)
            raise


class StompMixin:
    """Raw STOMP steps shared by the tests; self.client(version) gives a
    connected RawClient."""

    def drain(self, dest, version="1.2", headers=()):
        """Every message waiting on dest, read by a new auto-ack subscriber:
        what is queued is written at SUBSCRIBE, ahead of a later RECEIPT
        (then anything late, until 0.1 s pass quietly)."""
        c = self.client(version)
        subscribe(c, dest, sid="drain", headers=headers)
        frames = self.sync(c, "drained")
        frames += [f for f in c.drain(10 * SLOW, idle=0.1 * SLOW)[0] if f.command == "MESSAGE"]
        c.close()
        return frames

    def sync(self, c, rid="sync"):
        """Every frame c sent before has taken effect (a RECEIPT for a SEND
        to a topic nobody reads); returns the MESSAGEs that came first."""
        c.send_frame("SEND", [("destination", "/topic/sync"), ("receipt", rid)])
        out = []
        while True:
            f = c.read_frame()
            if f.command == "RECEIPT" and f.get("receipt-id") == rid:
                return out
            self.assertEqual(f.command, "MESSAGE", f)
            out.append(f)

    def assert_dead_letter(self, f, reason, origin, t0, t1, dlq):
        """f is a dead letter in dlq of a message of origin that died
        between t0 and t1 (ms since the epoch)."""
        self.assertEqual(f["destination"], dlq)
        self.assertEqual(f["x-death-reason"], reason)
        self.assertEqual(f["x-original-destination"], origin)
        at = int(f["x-death-time"])
        self.assertTrue(t0 - CLOCK_SLACK_MS <= at <= t1 + CLOCK_SLACK_MS,
                        "x-death-time %d not in [%d, %d]" % (at, t0, t1))
        self.assertNotIn("expires", names(f))
        self.assertNotIn("expiration", names(f))


class Lifetime(AdminMixin, StompMixin, harness.BrokerTest):
    listen = ADMIN


# ---- 1. expiry --------------------------------------------------------------

class ExpiryTest(Lifetime):
    @staticmethod
    def expiring(now, short):
        """(body, headers) of every case: two expired at SEND, four that
        expire `short` ms after now, four that survive."""
        return [
            ("stale-abs", [("expires", str(now + short))]),
            ("stale-rel", [("expiration", str(short))]),
            ("doa-abs", [("expires", str(now - 1))]),
            ("doa-rel", [("expiration", "0")]),
            ("forever", [("expires", "0")]),
            ("fresh-abs", [("expires", str(now + 60000))]),
            ("fresh-rel", [("expiration", "60000")]),
            ("sooner-abs", [("expires", str(now + short)), ("expiration", "60000")]),
            ("sooner-rel", [("expires", str(now + 60000)), ("expiration", str(short))]),
            ("later", [("expiration", "90000"), ("expires", str(now + 60000)), ("x-k", "v")]),
        ]

    def test_expired_at_send_or_while_waiting_never_delivered_sooner_wins(self):
        short = 400 * SLOW   # time enough (scaled) to look before they expire
        now = now_ms()
        for version in ("1.0", "1.2"):
            p = self.client(version)
            for body, h in self.expiring(now, short):
                send(p, "/queue/e%s" % version, body, h)
            send(p, "/queue/e%s" % version, "", [("expires", "0")], "last")
        # Only the two expired at SEND are gone from each queue (which holds
        # a trailing empty message too): 8 + 1 wait.
        m = self.metrics()
        self.assertLess(now_ms(), now + short - CLOCK_SLACK_MS,
                        "too slow to see the queues before expiry")
        self.assertEqual(self.depth("/queue/e1.0", m), 9)
        self.assertEqual(self.depth("/queue/e1.2", m), 9)
        self.assertEqual(counts(m), expected_counts({"expired": 4}))
        # Nobody reads: the timer takes the four that expire later from each queue.
        self.wait_counts({"expired": 12})
        self.assertGreaterEqual(now_ms(), now + short - CLOCK_SLACK_MS)
        self.assertEqual(self.depth("/queue/e1.0"), 5)
        for version in ("1.0", "1.2"):
            got = self.drain("/queue/e%s" % version, version)
            self.assertEqual(bodies(got), ["forever", "fresh-abs", "fresh-rel", "later", ""])
            later = got[3]
            self.assertEqual(later["x-k"], "v")
            self.assertEqual(later["expiration"], "90000")  # passed on as sent
        self.assert_counts({"expired": 12})

    def test_expired_behind_an_unacknowledged_message_is_skipped(self):
        c = self.client()
        subscribe(c, "/queue/w", ack="client-individual", headers=[("prefetch-count", "1")])
        p = self.client()
        send(p, "/queue/w", "first")
        send(p, "/queue/w", "short", [("expiration", "200")])
        send(p, "/queue/w", "short-abs", [("expires", str(now_ms() + 200))])
        send(p, "/queue/w", "third", receipt="sent")
        first = c.expect("MESSAGE")
        self.assertEqual(first.body, b"first")
        time.sleep(0.35)
        c.send_frame("ACK", [("id", first["ack"])])
        third = c.expect("MESSAGE")
        self.assertEqual(third.body, b"third")
        c.send_frame("ACK", [("id", third["ack"])])
        c.expect_nothing(0.2)
        self.assert_counts({"expired": 2})

    def test_expired_while_handed_out_is_not_redelivered(self):
        """A delivered message that expires before its NACK, or before its
        consumer leaves, dies instead of going back."""
        p = self.client()
        a = self.client()
        subscribe(a, "/queue/n", ack="client-individual")
        b = self.client("1.1")
        subscribe(b, "/queue/l", ack="client")
        send(p, "/queue/n", "nacked late", [("expiration", "200")])
        send(p, "/queue/l", "left late", [("expires", str(now_ms() + 200))], receipt="sent")
        ma = a.expect("MESSAGE")
        self.assertEqual(b.expect("MESSAGE").body, b"left late")
        time.sleep(0.35)
        a.send_frame("NACK", [("id", ma["ack"])])
        b.close()
        self.wait_counts({"expired": 2})
        a.expect_nothing(0.2)
        self.assertEqual(self.drain("/queue/l"), [])
        self.assertEqual(self.drain("/queue/n"), [])

    def test_timer_empties_a_queue_nobody_reads(self):
        m = self.metrics()
        memory = m["eft_message_memory_bytes"]
        self.assertEqual(m["eft_messages_queued"], 0)
        p = self.client()
        ttl = 1000 * SLOW    # time enough (scaled) to look before they expire
        t0 = now_ms()
        for i in range(49):
            send(p, "/queue/idle", "x%d" % i, [("expiration", str(ttl))])
        send(p, "/queue/idle", "x49", [("expires", str(t0 + ttl))], receipt="sent")
        m = self.metrics()
        self.assertLess(now_ms(), t0 + ttl - CLOCK_SLACK_MS,
                        "too slow to see the queue before expiry")
        self.assertEqual(self.depth("/queue/idle", m), 50)
        self.assertEqual(m["eft_messages_queued"], 50)
        self.assertGreater(m["eft_message_memory_bytes"], memory)
        self.assertEqual(self.queues(), {"/queue/idle": 50})
        wait_for(lambda: self.depth("/queue/idle") == 0, 3, "the timer to empty /queue/idle")
        self.assertGreaterEqual(now_ms(), t0 + ttl - CLOCK_SLACK_MS,
                                "emptied before the messages expired")
        m = self.metrics()
        self.assertEqual(m["eft_messages_queued"], 0)
        self.assertEqual(m["eft_message_memory_bytes"], memory)
        self.assertEqual(counts(m), expected_counts({"expired": 50}))
        self.assertEqual(self.queues().get("/queue/idle", 0), 0)
        self.assertEqual(self.drain("/queue/idle"), [])

    def test_topic_message_already_expired_is_dropped(self):
        s = self.client()
        subscribe(s, "/topic/t")
        p = self.client()
        send(p, "/topic/t", "rel0", [("expiration", "0")])  # RabbitMQ's TTL 0: delivered now
        send(p, "/topic/t", "abs-past", [("expires", str(now_ms() - 10))])
        send(p, "/topic/t", "fresh", [("expiration", "60000"), ("expires", "0")], receipt="sent")
        self.assertEqual(bodies([s.expect("MESSAGE"), s.expect("MESSAGE")]), ["rel0", "fresh"])
        s.expect_nothing(0.2)
        self.assert_counts({"expired": 1})

    def test_expiration_0_goes_to_a_consumer_that_can_take_it_now(self):
        """RabbitMQ's TTL 0: delivered if a consumer can take it as it comes
        (one with room under its prefetch), else it expires then, and never
        waits in the queue."""
        ready = self.client()
        subscribe(ready, "/queue/now")
        full = self.client()
        subscribe(full, "/queue/full", ack="client", headers=[("prefetch-count", "1")])
        p = self.client()
        send(p, "/queue/now", "taken", [("expiration", "0")])
        send(p, "/queue/nobody", "lost", [("expiration", "0")])
        send(p, "/queue/full", "first")
        send(p, "/queue/full", "no room", [("expiration", "0")], receipt="sent")
        self.assertEqual(ready.expect("MESSAGE").body, b"taken")
        first = full.expect("MESSAGE")
        self.assertEqual(first.body, b"first")
        full.send_frame("ACK", [("id", first["ack"])])
        full.expect_nothing(0.2)
        self.assert_counts({"expired": 2})
        self.assertEqual(self.queues(), {"/queue/now": 0, "/queue/full": 0})
        send(p, "/queue/full", "room again", [("expiration", "0")])
        self.assertEqual(full.expect("MESSAGE").body, b"room again")

    def test_expired_before_its_transaction_commits(self):
        p = self.client()
        s = self.client()
        subscribe(s, "/queue/tx")
        p.send_frame("BEGIN", [("transaction", "t")])
        send(p, "/queue/tx", "late", [("transaction", "t"), ("expires", str(now_ms() + 200))])
        send(p, "/queue/tx", "ok", [("transaction", "t"), ("expires", str(now_ms() + 60000))])
        time.sleep(0.35)
        p.send_frame("COMMIT", [("transaction", "t"), ("receipt", "c")])
        expect_receipt(p, "c")
        self.assertEqual(s.expect("MESSAGE").body, b"ok")
        s.expect_nothing(0.2)
        self.assert_counts({"expired": 1})

    def test_bad_values_get_an_error_and_a_close(self):
        cases = [("priority", "high", "priority must be a number from 0 (lowest) to 9 (highest); "
                  "got 'high'."),
                 ("priority", "-1", None), ("priority", "", None),
                 ("expires", "x", "expires must be a time in milliseconds since the epoch, or 0 "
                  "for never; got 'x'."),
                 ("expires", "-5", None), ("expires", "1.5e12", None),
                 ("expiration", "-1", "expiration must be a number of milliseconds the message "
                  "may wait; got '-1'."),
                 ("expiration", "1.5", None), ("expiration", "ten", None)]
        for version in ("1.0", "1.2"):
            for name, value, text in cases:
                with self.subTest(version=version, header=name, value=value):
                    c = self.client(version)
                    c.send_frame("SEND", [("destination", "/queue/bad"), (name, value),
                                          ("receipt", "r")], "never")
                    err = c.expect_error_and_close()
                    self.assertEqual(err["message"], "bad %s header" % name)
                    self.assertEqual(err["receipt-id"], "r")
                    if text:
                        self.assertEqual(err.body.decode(), text)
        self.assertNotIn("/queue/bad", self.queues())
        self.assertEqual(self.drain("/queue/bad"), [])
        self.assert_counts()


# ---- 2. dead letters ---------------------------------------------------------

class DeadLetterTest(Lifetime):
    config = ("dead-letter-queue = /queue/dlq\n"
              "policy = /queue/redeliver.> max-redeliveries=2\n"
              "policy = /queue/small max-queue-messages=3 queue-overflow=drop-head\n")

    def test_expired_goes_to_the_dlq_with_its_headers_in_both_versions(self):
        p = self.client()
        t0 = now_ms()
        send(p, "/queue/orders", "late order", [
            ("expires", str(t0 + 200)), ("expiration", "600000"), ("x-color", "red"),
            ("x-colon", "a\\cb"), ("content-type", "text/plain"), ("priority", "7")], receipt="sent")
        self.wait_counts(dead={"expired": 1})
        t1 = now_ms()
        self.assertEqual(self.queues(), {"/queue/dlq": 1})
        f = self.drain("/queue/dlq")
        self.assertEqual(len(f), 1, f)
        f = f[0]
        self.assertEqual(f.body, b"late order")
        self.assert_dead_letter(f, "expired", "/queue/orders", t0 + 200, t1, "/queue/dlq")
        self.assertEqual(f["x-color"], "red")
        self.assertEqual(f["x-colon"], "a\\cb")   # 1.2: escaped as it was sent
        self.assertEqual(f["content-type"], "text/plain")
        self.assertEqual(f["priority"], "7")
        self.assertEqual(sorted(names(f)), sorted([
            "subscription", "destination", "message-id", "x-death-reason",
            "x-original-destination", "x-death-time", "x-color", "x-colon", "content-type",
            "priority", "content-length"]))
        # The same over STOMP 1.0 (another one, since the first was consumed).
        send(p, "/queue/orders", "again", [("expiration", "100"), ("x-colon", "a\\cb")],
             receipt="sent2")
        self.wait_counts(dead={"expired": 2})
        f10 = self.drain("/queue/dlq", "1.0")
        self.assertEqual(bodies(f10), ["again"])
        self.assertEqual(f10[0]["x-colon"], "a:b")
        self.assertEqual(f10[0]["x-original-destination"], "/queue/orders")
        self.assertNotEqual(f10[0]["message-id"], f["message-id"])
        self.assert_counts(dead={"expired": 2})

    def test_original_destination_escaped_per_version(self):
        c = self.client()
        subscribe(c, "/queue/a\\cb", ack="client-individual")  # /queue/a:b
        send(c, "/queue/a\\cb", "colon")
        m = c.expect("MESSAGE")
        c.send_frame("NACK", [("id", m["ack"]), ("requeue", "false")])
        self.sync(c)
        self.assertEqual(self.drain("/queue/dlq", "1.0")[0]["x-original-destination"],
                         "/queue/a:b")
        send(c, "/queue/a\\cb", "colon2")
        m = c.expect("MESSAGE")
        c.send_frame("NACK", [("id", m["ack"]), ("requeue", "false")])
        self.sync(c)
        self.assertEqual(self.drain("/queue/dlq", "1.2")[0]["x-original-destination"],
                         "/queue/a\\cb")

    def test_rejected_goes_to_the_dlq_once_and_is_dropped_from_there(self):
        c12 = self.client("1.2")
        c11 = self.client("1.1")
        subscribe(c12, "/queue/work", "w12", ack="client-individual")
        p = self.client()
        send(p, "/queue/work", "poison-12", [("x-order", "1"), ("expiration", "600000")],
             receipt="s1")
        m12 = c12.expect("MESSAGE")
        t0 = now_ms()
        c12.send_frame("NACK", [("id", m12["ack"]), ("requeue", "false")])
        self.sync(c12)
        t1 = now_ms()
        c12.send_frame("UNSUBSCRIBE", [("id", "w12")])
        subscribe(c11, "/queue/work", "w11", ack="client")
        send(p, "/queue/work", "poison-11", [("x-order", "2")], receipt="s2")
        m11 = c11.expect("MESSAGE")
        t2 = now_ms()
        c11.send_frame("NACK", [("message-id", m11["message-id"]), ("subscription", "w11"),
                                ("requeue", "false")])
        self.sync(c11)
        t3 = now_ms()
        c12.expect_nothing(0.1)
        c11.expect_nothing(0.1)
        self.assert_counts(dead={"rejected": 2})
        self.assertEqual(self.queues(), {"/queue/dlq": 2, "/queue/work": 0})  # c11 is on it
        d = self.client()
        subscribe(d, "/queue/dlq", "dead", ack="client-individual")
        dl = d.read_frames(2)
        self.assertEqual(bodies(dl), ["poison-12", "poison-11"])
        self.assert_dead_letter(dl[0], "rejected", "/queue/work", t0, t1, "/queue/dlq")
        self.assert_dead_letter(dl[1], "rejected", "/queue/work", t2, t3, "/queue/dlq")
        self.assertEqual([f["x-order"] for f in dl], ["1", "2"])
        ids = {m12["message-id"], m11["message-id"], dl[0]["message-id"], dl[1]["message-id"]}
        self.assertEqual(len(ids), 4, "dead letters need new message-ids")
        # Rejected from the dead-letter queue: dropped, never dead-lettered again.
        for f in dl:
            d.send_frame("NACK", [("id", f["ack"]), ("requeue", "false")])
        # ... and a queue is never its own dead-letter queue.
        send(p, "/queue/dlq", "sent to the dlq itself", receipt="s3")
        own = d.expect("MESSAGE")
        self.assertEqual(own.body, b"sent to the dlq itself")
        d.send_frame("NACK", [("id", own["ack"]), ("requeue", "false")])
        self.sync(d)
        d.expect_nothing(0.2)
        self.assert_counts(dropped={"rejected": 3}, dead={"rejected": 2})
        self.assertEqual(self.drain("/queue/dlq"), [])
        self.assertEqual(self.drain("/queue/work"), [])

    def test_nack_without_requeue_false_gives_it_back(self):
        c = self.client()
        subscribe(c, "/queue/back", ack="client-individual")
        send(c, "/queue/back", "again")
        first = c.expect("MESSAGE")
        for requeue in (None, "true"):
            h = [("id", first["ack"])]
            if requeue:
                h.append(("requeue", requeue))
            c.send_frame("NACK", h)
            f = c.expect("MESSAGE")
            self.assertEqual((f.body, f["redelivered"], f["message-id"]),
                             (b"again", "true", first["message-id"]))
            first = f
        c.send_frame("ACK", [("id", first["ack"])])
        self.sync(c)
        self.assert_counts()

    def test_max_redeliveries_by_nack_and_by_consumers_leaving(self):
        p = self.client()
        c = self.client()
        subscribe(c, "/queue/redeliver.nack", ack="client-individual")
        send(p, "/queue/redeliver.nack", "nacked", [("x-n", "1")], receipt="s1")
        t0 = now_ms()
        for i in range(3):  # delivered, then given back twice: the third NACK kills it
            f = c.expect("MESSAGE")
            self.assertEqual((f.body, f.get("redelivered")), (b"nacked", "true" if i else None))
            c.send_frame("NACK", [("id", f["ack"])])
        self.sync(c)
        c.expect_nothing(0.2)
        t1 = now_ms()
        # Three consumers that leave without acknowledging: DISCONNECT, a
        # dropped socket, UNSUBSCRIBE.
        send(p, "/queue/redeliver.leave", "left", receipt="s2")
        t2 = now_ms()
        for how in ("disconnect", "drop", "unsubscribe"):
            k = self.client("1.1" if how == "drop" else "1.2")
            subscribe(k, "/queue/redeliver.leave", "k", ack="client")
            self.assertEqual(k.expect("MESSAGE").body, b"left")
            if how == "disconnect":
                k.send_frame("DISCONNECT", [("receipt", "bye")])
                expect_receipt(k, "bye")
                k.close()
            elif how == "drop":
                k.close()
            else:
                k.send_frame("UNSUBSCRIBE", [("id", "k"), ("receipt", "u")])
                expect_receipt(k, "u")
        self.wait_counts(dead={"max_redeliveries": 2})
        t3 = now_ms()
        self.assertEqual(self.drain("/queue/redeliver.leave"), [])
        dl = self.drain("/queue/dlq")
        self.assertEqual(bodies(dl), ["nacked", "left"])
        self.assert_dead_letter(dl[0], "max-redeliveries", "/queue/redeliver.nack", t0, t1,
                                "/queue/dlq")
        self.assertEqual(dl[0]["x-n"], "1")
        self.assert_dead_letter(dl[1], "max-redeliveries", "/queue/redeliver.leave", t2, t3,
                                "/queue/dlq")
        # Without the policy (max-redeliveries 0): no limit.
        send(p, "/queue/plain", "forever", receipt="s3")
        subscribe(c, "/queue/plain", "pl", ack="client-individual")
        for i in range(6):
            f = c.expect("MESSAGE")
            self.assertEqual(f.body, b"forever")
            c.send_frame("NACK" if i < 5 else "ACK", [("id", f["ack"])])
        self.sync(c)
        self.assert_counts(dead={"max_redeliveries": 2})

    def test_reject_in_a_transaction_takes_effect_at_commit(self):
        c = self.client()
        subscribe(c, "/queue/txr", ack="client-individual")
        send(c, "/queue/txr", "x")
        f = c.expect("MESSAGE")
        c.send_frame("BEGIN", [("transaction", "t1")])
        c.send_frame("NACK", [("id", f["ack"]), ("requeue", "false"), ("transaction", "t1")])
        c.send_frame("ABORT", [("transaction", "t1"), ("receipt", "a")])
        expect_receipt(c, "a")
        c.send_frame("BEGIN", [("transaction", "t2")])
        c.send_frame("NACK", [("id", f["ack"]), ("requeue", "false"), ("transaction", "t2")])
        self.sync(c)
        self.assert_counts()
        self.assertEqual(self.queues(), {"/queue/txr": 0})
        c.send_frame("COMMIT", [("transaction", "t2"), ("receipt", "c")])
        expect_receipt(c, "c")
        self.assert_counts(dead={"rejected": 1})
        self.assertEqual([(f.body, f["x-death-reason"]) for f in self.drain("/queue/dlq")],
                         [(b"x", "rejected")])
        c.expect_nothing(0.1)

    def test_expired_topic_message_with_a_durable_subscription_dies_once(self):
        """One message, one death: an already expired message sent to a topic
        whose only subscriber is a durable one that is away, and one that
        expires in the durable subscription's queue."""
        c = RawClient(self.broker.port)
        self.clients.append(c)
        c.connect("1.2", {"client-id": "app"})
        subscribe(c, "/topic/news", "d", headers=[("activemq.subscriptionName", "s1")])
        c.close()
        p = self.client()
        send(p, "/topic/news", "dead on arrival", [("expiration", "0")])
        send(p, "/topic/news", "short", [("expiration", "100")])
        send(p, "/topic/news", "kept", receipt="sent")
        self.wait_counts(dead={"expired": 2})   # 'short' too, by the timer (every 100 ms)
        dl = self.drain("/queue/dlq")
        self.assertEqual([(f.body, f["x-death-reason"]) for f in dl],
                         [(b"dead on arrival", "expired"), (b"short", "expired")])
        self.assert_counts(dead={"expired": 2})

    def test_drop_head_overflow_dead_letters_the_oldest_of_the_lowest_priority(self):
        p = self.client()
        send(p, "/queue/small", "1", [("priority", "9")])
        for i in range(2, 6):
            send(p, "/queue/small", str(i), [("x-i", str(i))])
        send(p, "/queue/other", "x", receipt="sent")
        self.assertEqual(self.queues(), {"/queue/small": 3, "/queue/dlq": 2, "/queue/other": 1})
        self.assert_counts(dead={"overflow": 2})
        self.assertEqual(bodies(self.drain("/queue/small")), ["1", "4", "5"])
        dl = self.drain("/queue/dlq")
        self.assertEqual(bodies(dl), ["2", "3"])
        self.assertEqual([(f["x-death-reason"], f["x-original-destination"], f["x-i"])
                          for f in dl],
                         [("overflow", "/queue/small", "2"), ("overflow", "/queue/small", "3")])


class NoDeadLetterQueueTest(Lifetime):
    config = ("max-redeliveries = 1\n"
              "policy = /queue/small max-queue-messages=2 queue-overflow=drop-head\n")

    def test_dead_messages_are_dropped_and_counted(self):
        p = self.client()
        c = self.client()
        send(p, "/queue/exp", "expires", [("expiration", "100")])
        subscribe(c, "/queue/rej", "r", ack="client-individual")
        subscribe(c, "/queue/mr", "m", ack="client-individual")
        send(p, "/queue/rej", "rejected")
        f = c.expect("MESSAGE")
        c.send_frame("NACK", [("id", f["ack"]), ("requeue", "false")])
        send(p, "/queue/mr", "redelivered")
        for _ in range(2):
            f = c.expect("MESSAGE")
            self.assertEqual(f.body, b"redelivered")
            c.send_frame("NACK", [("id", f["ack"])])
        for i in range(4):
            send(p, "/queue/small", "s%d" % i)
        self.sync(p)
        c.expect_nothing(0.2)
        self.wait_counts(dropped={"expired": 1, "rejected": 1, "max_redeliveries": 1,
                                  "overflow": 2})
        self.assertEqual(self.queues(), {"/queue/small": 2, "/queue/rej": 0, "/queue/mr": 0})
        self.assertEqual(bodies(self.drain("/queue/small")), ["s2", "s3"])


class DeadLetterQueueOverflowTest(Lifetime):
    config = ("dead-letter-queue = /queue/dlq\n"
              "policy = /queue/dlq max-queue-messages=2 queue-overflow=drop-head "
              "dead-letter-queue=/queue/dlq2\n")

    def test_a_dead_letter_pushed_out_of_its_queue_is_dropped_not_dead_lettered_again(self):
        c = self.client()
        subscribe(c, "/queue/w", ack="client-individual")
        for i in range(4):
            send(c, "/queue/w", "w%d" % i)
            f = c.expect("MESSAGE")
            c.send_frame("NACK", [("id", f["ack"]), ("requeue", "false")])
        self.sync(c)
        self.assert_counts(dropped={"overflow": 2}, dead={"rejected": 4})
        self.assertEqual(self.queues(), {"/queue/w": 0, "/queue/dlq": 2})
        self.assertEqual(bodies(self.drain("/queue/dlq")), ["w2", "w3"])
        self.assertEqual(self.drain("/queue/dlq2"), [])


# ---- 3. overflow --------------------------------------------------------------

class OverflowTest(Lifetime):
    config = ("max-queue-messages = 10\n"
              "policy = /queue/dh.> queue-overflow=drop-head\n")

    def test_drop_head_never_pauses_and_keeps_the_newest(self):
        p = self.client()
        frames = b"".join(harness.frame("SEND", [("destination", "/queue/dh.x")], "m%d" % i)
                          for i in range(99))
        p.send(frames + harness.frame("SEND", [("destination", "/queue/dh.x"),
                                               ("receipt", "last")], "m99"))
        expect_receipt(p, "last", timeout=5 * SLOW)
        self.assertEqual(self.depth("/queue/dh.x"), 10)
        self.assert_counts(dropped={"overflow": 90})
        self.assertEqual(bodies(self.drain("/queue/dh.x")), ["m%d" % i for i in range(90, 100)])

    def test_block_is_still_the_default(self):
        p = self.client()
        for i in range(10):
            send(p, "/queue/blk", "b%d" % i)
        p.send_frame("SEND", [("destination", "/queue/blk"), ("receipt", "paused")], "b10")
        p.expect_nothing(0.5)   # paused: the eleventh is not even read
        self.assertEqual(self.depth("/queue/blk"), 10)
        c = self.client()
        subscribe(c, "/queue/blk")
        expect_receipt(p, "paused")
        self.assertEqual(bodies(c.read_frames(11)), ["b%d" % i for i in range(11)])
        self.assert_counts()


# ---- 4. priority ----------------------------------------------------------------

class PriorityTest(Lifetime):
    def test_higher_first_fifo_within_default_4_larger_is_9(self):
        sent = [("a-def", None), ("a-0", "0"), ("a-9", "9"), ("a-255", "255"), ("a-5", "5"),
                ("a-4", "4"), ("a-10", "10"), ("a-1", "1"), ("a-def2", None), ("a-9b", "9"),
                ("a-0b", "0"), ("a-5b", "5")]
        for version in ("1.0", "1.2"):
            p = self.client(version)
            for body, prio in sent:
                send(p, "/queue/p" + version, body, [("priority", prio)] if prio else [])
            self.sync(p)
            m = self.metrics()
            self.assertEqual(self.depth("/queue/p" + version, m), len(sent))
            got = self.drain("/queue/p" + version, version)
            self.assertEqual(bodies(got), ["a-9", "a-255", "a-10", "a-9b", "a-5", "a-5b",
                                           "a-def", "a-4", "a-def2", "a-1", "a-0", "a-0b"])

    def test_in_a_transaction(self):
        p = self.client()
        p.send_frame("BEGIN", [("transaction", "t")])
        for body, prio in (("low", "1"), ("high", "8"), ("mid", "4"), ("high2", "8")):
            send(p, "/queue/ptx", body, [("priority", prio), ("transaction", "t")])
        p.send_frame("COMMIT", [("transaction", "t"), ("receipt", "c")])
        expect_receipt(p, "c")
        self.assertEqual(bodies(self.drain("/queue/ptx")), ["high", "high2", "mid", "low"])

    def test_given_back_to_the_head_of_its_priority(self):
        p = self.client()
        for body, prio in (("a1", "9"), ("a2", "9"), ("b1", "5"), ("c1", "0")):
            send(p, "/queue/pr", body, [("priority", prio)])
        self.sync(p)
        c = self.client()
        subscribe(c, "/queue/pr", ack="client-individual", headers=[("prefetch-count", "1")])
        f = c.expect("MESSAGE")
        self.assertEqual(f.body, b"a1")
        c.send_frame("NACK", [("id", f["ack"])])
        f = c.expect("MESSAGE")
        self.assertEqual((f.body, f["redelivered"]), (b"a1", "true"))
        c.send_frame("ACK", [("id", f["ack"])])
        f = c.expect("MESSAGE")
        self.assertEqual(f.body, b"a2")
        # A newer priority-9 message arrives; then the consumer leaves with a2.
        send(p, "/queue/pr", "a3", [("priority", "9")], receipt="a3")
        c.close()
        got = self.drain("/queue/pr")
        self.assertEqual(bodies(got), ["a2", "a3", "b1", "c1"])
        self.assertEqual(got[0]["redelivered"], "true")
        self.assertIsNone(got[1].get("redelivered"))


# ---- 5. selectors ----------------------------------------------------------------

# Messages on a topic: (body, headers).
TOPIC_MESSAGES = [
    ("m1", [("region", "eu"), ("price", "15"), ("qty", "5"), ("code", "A_1"),
            ("priority", "9"), ("vip", "yes"), ("type", "order"), ("expiration", "60000")]),
    ("m2", [("region", "us"), ("price", "25"), ("qty", "3"), ("code", "AB1"),
            ("flag", "true"), ("x-kind", "a"), ("activemq.foo", "b")]),
    ("m3", [("region", "asia"), ("price", "10"), ("qty", "10"), ("code", "A_xyz"),
            ("priority", "2"), ("x-kind", "a")]),
    ("m4", [("region", "eu"), ("price", "9.5"), ("code", "B_1"), ("vip", "no"),
            ("flag", "FALSE"), ("timestamp", "5000")]),
    ("m5", [("price", "abc"), ("qty", "6"), ("code", "%A")]),
    ("m6", [("region", "us"), ("price", "20"), ("qty", "0"), ("name", "O'Neil"),
            ("priority", "12")]),
]
# (selector, the bodies it selects), worked out by hand with JMS's
# three-valued logic (a missing header is NULL: comparisons are UNKNOWN).
TOPIC_SELECTORS = [
    ("region IN ('eu', 'us')", ["m1", "m2", "m4", "m6"]),
    ("region NOT IN ('eu', 'us')", ["m3"]),
    ("code LIKE 'A!_%' ESCAPE '!'", ["m1", "m3"]),
    ("code LIKE '_B%'", ["m2"]),
    ("code NOT LIKE 'A%'", ["m4", "m5"]),
    ("code LIKE '%\\%%' ESCAPE '\\'", ["m5"]),   # backslash: escaped on the 1.2 wire
    ("price BETWEEN 10 AND 20", ["m1", "m3", "m6"]),
    ("price NOT BETWEEN 10 AND 20", ["m2", "m4"]),
    ("vip IS NULL", ["m2", "m3", "m5", "m6"]),
    ("vip IS NOT NULL", ["m1", "m4"]),
    ("(region = 'eu' OR region = 'asia') AND NOT price > 12", ["m3", "m4"]),
    ("qty * 2 >= 10 AND qty <> 6", ["m1", "m3"]),
    ("price > 9.25 AND price < 10", ["m4"]),
    ("qty / 0 = 1 OR qty - 1 = -1", ["m6"]),
    ("JMSPriority >= 7", ["m1", "m6"]),
    ("JMSPriority = 4", ["m2", "m4", "m5"]),
    ("name = 'O''Neil'", ["m6"]),
    ("JMSType = 'order'", ["m1"]),
    ("JMSExpiration > 0", ["m1"]),
    ("JMSTimestamp > 1000", ["m4"]),
    ("x-kind = 'a' AND activemq.foo = 'b'", ["m2"]),
    ("flag", ["m2"]),
    ("NOT flag", ["m4"]),
    ("flag = TRUE OR vip = 'no'", ["m2", "m4"]),
    ("   ", ["m1", "m2", "m3", "m4", "m5", "m6"]),
]


def escape12(value):
    """A header value as STOMP 1.1/1.2 writes it."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c")


class SelectorTest(Lifetime):
    def test_topic_subscribers_get_what_matches(self):
        want = {sel: b for sel, b in TOPIC_SELECTORS}
        for version in ("1.0", "1.2"):
            s = self.client(version)
            for i, (sel, _) in enumerate(TOPIC_SELECTORS):
                value = sel if version == "1.0" else escape12(sel)
                subscribe(s, "/topic/sel", "s%d" % i, headers=[("selector", value)])
            p = self.client(version)
            for body, h in TOPIC_MESSAGES:
                send(p, "/topic/sel", body, h)
            self.sync(p)
            got = {sel: [] for sel, _ in TOPIC_SELECTORS}
            for f in s.drain(5 * SLOW, idle=0.3 * SLOW)[0]:
                got[TOPIC_SELECTORS[int(f["subscription"][1:])][0]].append(f.body.decode())
            self.assertEqual(got, want, "over STOMP " + version)
            s.close()
            p.close()

    def test_jms_delivery_mode_follows_the_persistent_header(self):
        """ActiveMQ maps JMSDeliveryMode to the persistent header; the
        message says what it is whether or not eftd has a data-dir."""
        s = self.client()
        subscribe(s, "/topic/dm", "p", headers=[("selector", "JMSDeliveryMode = 'PERSISTENT'")])
        subscribe(s, "/topic/dm", "n",
                  headers=[("selector", "JMSDeliveryMode = 'NON_PERSISTENT'")])
        p = self.client()
        send(p, "/topic/dm", "persistent", [("persistent", "true")])
        send(p, "/topic/dm", "plain", receipt="sent")
        got = sorted((f["subscription"], f.body.decode())
                     for f in s.drain(5 * SLOW, idle=0.3 * SLOW)[0])
        self.assertEqual(got, [("n", "plain"), ("p", "persistent")])

    def test_queue_with_two_selective_consumers_and_one_plain(self):
        red = self.client()
        subscribe(red, "/queue/s", "red", headers=[("selector", "color = 'red'")])
        blue = self.client("1.0")
        subscribe(blue, "/queue/s", "blue", headers=[("selector", "color='blue' OR n > 10")])
        p = self.client()
        for body, h in (("r1", "red"), ("b1", "blue"), ("g1", "green"), ("g2", "green:11"),
                        ("r2", "red"), ("g3", "green:5"), ("x1", None)):
            hdrs = []
            if h:
                color, _, n = h.partition(":")
                hdrs = [("color", color)] + ([("n", n)] if n else [])
            send(p, "/queue/s", body, hdrs)
        self.sync(p)
        self.assertEqual(bodies(red.read_frames(2)), ["r1", "r2"])
        self.assertEqual(bodies(blue.read_frames(2)), ["b1", "g2"])
        self.assertEqual(self.depth("/queue/s"), 3)   # g1, g3, x1 wait for a taker
        plain = self.client()
        subscribe(plain, "/queue/s", "plain")
        self.assertEqual(bodies(plain.read_frames(3)), ["g1", "g3", "x1"])
        # All three at once: each message once, to a consumer that selects it.
        sent = []
        for i in range(30):
            color = ("red", "blue", "green")[i % 3]
            sent.append(("q%d" % i, color, i))
            send(p, "/queue/s", "q%d" % i, [("color", color), ("n", str(i))])
        self.sync(p)
        got = {}
        for name, c in (("red", red), ("blue", blue), ("plain", plain)):
            got[name] = bodies(c.drain(2 * SLOW, idle=0.2 * SLOW)[0])
        everything = got["red"] + got["blue"] + got["plain"]
        self.assertEqual(sorted(everything), sorted(b for b, _, _ in sent))
        info = {b: (color, n) for b, color, n in sent}
        for b in got["red"]:
            self.assertEqual(info[b][0], "red", got)
        for b in got["blue"]:
            self.assertTrue(info[b][0] == "blue" or info[b][1] > 10, got)
        for b, color, n in sent:
            if color == "green" and n <= 10:
                self.assertIn(b, got["plain"])
        for name in got:  # each in the order sent
            self.assertEqual(got[name], sorted(got[name], key=lambda b: int(b[1:])))
        self.assertEqual(self.depth("/queue/s"), 0)

    def test_selected_by_priority_and_given_back_only_to_a_match(self):
        p = self.client()
        for body, color, prio in (("r1", "red", "1"), ("b9", "blue", "9"), ("r5", "red", "5"),
                                  ("r9", "red", "9")):
            send(p, "/queue/sp", body, [("color", color), ("priority", prio)])
        self.sync(p)
        red = self.client()
        subscribe(red, "/queue/sp", "red", ack="client-individual",
                  headers=[("selector", "color = 'red'")])
        got = red.read_frames(3)
        self.assertEqual(bodies(got), ["r9", "r5", "r1"])
        blue = self.client()
        subscribe(blue, "/queue/sp", "blue", ack="client-individual",
                  headers=[("selector", "color = 'blue'")])
        self.assertEqual(blue.expect("MESSAGE").body, b"b9")
        red.send_frame("NACK", [("id", got[0]["ack"])])
        again = red.expect("MESSAGE")
        self.assertEqual((again.body, again["redelivered"]), (b"r9", "true"))
        blue.expect_nothing(0.2)

    def test_malformed_selector_error_names_the_position(self):
        cases = [
            ("color = 'red' AND (", "position 20: unexpected end"),
            ("a IN (1,", "position 7: expected a string"),
            ("a = 1 )", "position 7: unexpected ')'"),
            ("", None),
        ]
        for version in ("1.0", "1.2"):
            for sel, why in cases:
                with self.subTest(version=version, selector=sel):
                    c = self.client(version)
                    h = [("destination", "/queue/sel-bad"), ("id", "0"), ("receipt", "r"),
                         ("selector", sel if version == "1.0" else escape12(sel))]
                    c.send_frame("SUBSCRIBE", h)
                    if why is None:   # empty: no selector at all
                        expect_receipt(c, "r")
                        c.close()
                        continue
                    err = c.expect_error_and_close()
                    want = "invalid selector: " + why
                    self.assertEqual(err["message"],
                                     want if version == "1.0" else escape12(want))
                    self.assertEqual(err["receipt-id"], "r")
                    self.assertIn(sel, err.body.decode())
        self.assertEqual(self.metrics().get('eft_queue_consumers{queue="/queue/sel-bad"}', 0), 0)

    def test_selector_on_a_durable_subscription_is_refused(self):
        for dialect, connect, sub in (
                ("activemq", {"client-id": "app"}, [("activemq.subscriptionName", "s1")]),
                ("rabbitmq", None, [("durable", "true"), ("auto-delete", "false")])):
            with self.subTest(dialect=dialect):
                c = RawClient(self.broker.port)
                self.clients.append(c)
                c.connect("1.2", connect)
                c.send_frame("SUBSCRIBE", [("destination", "/topic/d"), ("id", "d"),
                                           ("selector", "a = 1")] + sub)
                err = c.expect_error_and_close()
                self.assertEqual(err["message"],
                                 "selectors on durable subscriptions are not supported")
        self.assertEqual(self.metrics()["eft_durable_subscriptions"], 0)


# ---- 6. policies -------------------------------------------------------------------

class PolicyTest(Lifetime):
    config = ("max-redeliveries = 3\n"
              "dead-letter-queue = /queue/dlq\n"
              "policy = /queue/orders.eu max-redeliveries=1\n"
              "policy = /queue/orders.* dead-letter-queue=/queue/orders.dlq\n"
              "policy = /queue/orders.> max-redeliveries=2 dead-letter-queue=/queue/deep.dlq\n"
              "policy = /queue/ttl.> message-ttl=300\n"
              "policy = /queue/shop.dlq.short message-ttl=300\n"
              "policy = /queue/shop.> message-ttl=300 dead-letter-queue=/queue/shop.dlq\n"
              "policy = /queue/cart.> dead-letter-queue=/queue/shop.dlq.short\n")

    def nack_until_dead(self, c, queue, limit):
        """Deliveries of one message NACKed until it dies (at most limit+1)."""
        p = self.client()
        send(p, queue, "to " + queue, receipt="s")
        p.close()
        subscribe(c, queue, queue, ack="client-individual")
        n = 0
        while n <= limit + 1:
            try:
                f = c.read_frame(0.3 * SLOW)
            except socket.timeout:   # no more deliveries
                break
            self.assertEqual(f.body.decode(), "to " + queue)
            c.send_frame("NACK", [("id", f["ack"])])
            n += 1
        c.send_frame("UNSUBSCRIBE", [("id", queue)])
        return n

    def test_first_match_wins_and_unset_keys_fall_back(self):
        c = self.client()
        deliveries = {q: self.nack_until_dead(c, q, 5) for q in (
            "/queue/orders.eu",        # line 1: 1 redelivery; DLQ: the global one
            "/queue/orders.us",        # line 2: the global 3; its own DLQ
            "/queue/orders.us.east",   # line 3 (> is one or more segments; * is one)
            "/queue/orders",           # > is not zero segments: the globals
            "/queue/other")}           # no policy: the globals
        self.assertEqual(deliveries, {"/queue/orders.eu": 2, "/queue/orders.us": 4,
                                      "/queue/orders.us.east": 3, "/queue/orders": 4,
                                      "/queue/other": 4})
        self.assertEqual(bodies(self.drain("/queue/dlq")), ["to /queue/orders.eu",
                                                            "to /queue/orders", "to /queue/other"])
        self.assertEqual(bodies(self.drain("/queue/orders.dlq")), ["to /queue/orders.us"])
        dl = self.drain("/queue/deep.dlq")
        self.assertEqual(bodies(dl), ["to /queue/orders.us.east"])
        self.assertEqual(dl[0]["x-original-destination"], "/queue/orders.us.east")
        self.assert_counts(dead={"max_redeliveries": 5})

    def test_message_ttl_policy(self):
        p = self.client()
        t0 = now_ms()
        send(p, "/queue/ttl.a.b", "ttl")                  # > matches two segments
        send(p, "/queue/ttl.c", "own sooner", [("expiration", "100")])
        send(p, "/queue/ttl.c", "own later", [("expires", str(t0 + 60000))])
        send(p, "/queue/ttlx", "no ttl", receipt="sent")      # not ttl.>
        self.wait_counts(dead={"expired": 3})
        self.assertEqual(bodies(self.drain("/queue/ttlx")), ["no ttl"])
        dl = self.drain("/queue/dlq")
        self.assertEqual(sorted(bodies(dl)), ["own later", "own sooner", "ttl"])
        self.assertEqual({f["x-death-reason"] for f in dl}, {"expired"})
        self.assertGreaterEqual(min(int(f["x-death-time"]) for f in dl
                                    if f.body != b"own sooner"), t0 + 300 - CLOCK_SLACK_MS)

    def test_a_dead_letter_queue_keeps_what_it_collects_unless_named_with_a_ttl(self):
        """/queue/shop.dlq matches /queue/shop.> too, but does not take its
        message-ttl: dead letters wait to be read.  A line naming a
        dead-letter queue exactly with a message-ttl still gives it one."""
        p = self.client()
        send(p, "/queue/shop.a", "order")
        send(p, "/queue/cart.a", "cart", [("expiration", "100")], receipt="sent")
        self.wait_counts(dead={"expired": 2})          # order after 300 ms, cart after 100
        self.wait_counts({"expired": 1}, {"expired": 2})  # cart's dead letter, 300 ms later
        time.sleep(0.5 * SLOW)                            # order's would have gone by now
        self.assert_counts({"expired": 1}, {"expired": 2})
        self.assertEqual(self.queues(), {"/queue/shop.dlq": 1})
        dl = self.drain("/queue/shop.dlq")
        self.assertEqual([(f.body, f["x-original-destination"]) for f in dl],
                         [(b"order", "/queue/shop.a")])


@TCP_ONLY
class BadPolicyTest(unittest.TestCase):
    def run_config(self, text):
        fd, path = tempfile.mkstemp(prefix="eftd-policy-", suffix=".conf")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        self.addCleanup(os.unlink, path)
        try:
            r = subprocess.run([harness.EFTD, "-c", path, "-p", "0"], capture_output=True,
                               text=True, timeout=5 * SLOW, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            self.fail("eftd started with %r" % text)
        return path, r

    def test_a_bad_policy_line_stops_eftd_with_one_line(self):
        cases = [
            ("policy = /queue/x max-redeliveries=abc\n", 1, "abc"),
            ("max-redeliveries = 2\npolicy = queue/x max-redeliveries=1\n", 2,
             "does not start with /queue/, /topic/ or /temp-queue/"),
            ("policy = /queue/a.>.b max-redeliveries=1\n", 1, "'>' may only end a pattern"),
            ("policy = /queue/a* message-ttl=5\n", 1, "they stand only for a whole segment"),
            ("# ok\npolicy = /queue/x max-redeliveries=1\n\npolicy = /queue/y priority=5\n", 4,
             "policy /queue/y: 'priority' is not a policy key"),
            ("policy = /queue/x\n", 1, "policy /queue/x: no key=value settings"),
            ("policy = /queue/x queue-overflow=sometimes\n", 1, "sometimes"),
            ("policy = /queue/x dead-letter-queue=/topic/dlq\n", 1, "/topic/dlq"),
            ("policy = /queue/x max-redeliveries=1 max-redeliveries=2\n", 1, "given twice"),
            ("policy = /queue/x max-redeliveries\n", 1, "is not key=value"),
            ("queue-overflow = drop-tail\n", 1, "drop-tail"),
            ("dead-letter-queue = dlq\n", 1, "dlq"),
        ]
        for text, line, needle in cases:
            with self.subTest(config=text):
                path, r = self.run_config(text)
                self.assertEqual(r.returncode, 1, r.stderr)
                err = [l for l in r.stderr.splitlines() if l.strip()]
                self.assertEqual(len(err), 1, r.stderr)
                self.assertIn("%s:%d: " % (path, line), err[0])
                self.assertIn(needle, err[0])


# ---- 7. with a data-dir, across kill -9 -----------------------------------------------

@TCP_ONLY
class DurableLifetimeTest(AdminMixin, StompMixin, DataDirTest):
    config = "dead-letter-queue = /queue/dlq\n"
    data_prefix = "eftd-lifetime-"

    def start(self, config=None):
        self.broker = self.start_on_data(self.config if config is None else config,
                                         listen=ADMIN)
        return self.broker

    def crash(self):
        for c in self.clients:
            c.close()
        self.clients = []
        DataDirTest.crash(self.broker)

    def client(self, version="1.2"):
        return self.connect(self.broker, version)

    def psend(self, c, dest, body, headers=(), rid=None):
        send(c, dest, body, [("persistent", "true")] + list(headers), rid)

    def back(self, n, queues):
        """The restart log says n messages came back on that many queues."""
        line = "%d message%s back on %d queue%s" % (n, "" if n == 1 else "s", queues,
                                                     "" if queues == 1 else "s")
        self.assertIn(line, self.broker.read_log())

    def test_expiry_survives_a_crash_and_is_still_enforced(self):
        self.start("")
        c = self.client()
        life = 4000 * SLOW   # time enough (scaled) for a crash and a restart
        t0 = now_ms()
        self.psend(c, "/queue/alive", "alive", [("expiration", str(life)), ("x-k", "v")])
        self.psend(c, "/queue/dies", "dies", [("expires", str(t0 + life))])
        self.psend(c, "/queue/dies", "forever", [("expires", "0"), ("priority", "0")])
        self.psend(c, "/queue/down", "expires while eftd is down", [("expiration", "300")],
                   rid="sent")
        self.crash()
        time.sleep(max(0, (t0 + 400 - now_ms()) / 1000))
        self.start("")
        self.assertLess(now_ms(), t0 + life - CLOCK_SLACK_MS,
                        "too slow to see the messages before expiry")
        got = self.drain("/queue/alive")
        self.assertEqual(bodies(got), ["alive"])
        self.assertEqual(got[0]["expiration"], str(life))
        self.assertEqual(got[0]["x-k"], "v")
        self.assertEqual(self.depth("/queue/dies"), 2)
        self.assertEqual(self.drain("/queue/down"), [])
        wait_for(lambda: self.depth("/queue/dies") == 1, 6, "the timer to take 'dies'")
        self.assertGreaterEqual(now_ms(), t0 + life - CLOCK_SLACK_MS)
        self.assertEqual(bodies(self.drain("/queue/dies")), ["forever"])
        self.assert_counts({"expired": 2})   # 'dies', and the one that expired while down

    def test_message_ttl_keeps_its_clock_across_a_crash(self):
        """A policy's message-ttl counts from when the message was queued,
        not from the restart."""
        ttl = 2000 * SLOW    # time enough (scaled) for a crash and a restart
        config = "policy = /queue/ttl message-ttl=%d\n" % ttl
        self.start(config)
        c = self.client()
        self.psend(c, "/queue/ttl", "ttl", rid="sent")
        self.psend(c, "/queue/ttl2", "ttl2", [("expiration", str(ttl))], rid="sent2")
        time.sleep(ttl / 2000)      # half of it passes before the crash
        self.crash()
        restarted = time.time()     # a clock restarted now would run past this + ttl
        self.start(config)
        self.back(2, 2)
        m = self.metrics()
        self.assertEqual((self.depth("/queue/ttl", m), self.depth("/queue/ttl2", m)), (1, 1))
        wait_for(lambda: self.depth("/queue/ttl") + self.depth("/queue/ttl2") == 0, 3,
                 "both to expire")
        # from the restart they would last ttl more: half of it more than now
        self.assertLess(time.time(), restarted + (ttl - CLOCK_SLACK_MS) / 1000,
                        "the restart restarted the ttl")
        self.assert_counts({"expired": 2})

    def test_persistent_expiration_0_is_taken_now_or_dead_lettered_once(self):
        """A persistent expiration:0 message: one that nobody could take is
        a dead letter at once, in one place after a crash; one taken and not
        acknowledged comes back as any other, and dies then (expired, as with
        RabbitMQ: TTL 0 has passed)."""
        self.start()
        s = self.client()
        subscribe(s, "/queue/now", ack="client")
        c = self.client()
        self.psend(c, "/queue/now", "taken", [("expiration", "0")])
        self.psend(c, "/queue/nobody", "lost", [("expiration", "0")], rid="sent")
        self.assertEqual(s.expect("MESSAGE").body, b"taken")
        self.assert_counts(dead={"expired": 1})
        self.assertEqual(self.queues(), {"/queue/now": 0, "/queue/dlq": 1})
        self.crash()
        self.start()
        self.back(2, 2)
        self.assertEqual(self.drain("/queue/nobody"), [])
        self.assertEqual(self.drain("/queue/now"), [])
        dl = self.drain("/queue/dlq")
        self.assertEqual([(f.body, f["x-original-destination"]) for f in dl],
                         [(b"lost", "/queue/nobody"), (b"taken", "/queue/now")])

    def test_what_expired_before_the_crash_stays_gone(self):
        self.start("")
        c = self.client()
        self.psend(c, "/queue/gone", "gone", [("expiration", "100")])
        self.psend(c, "/queue/kept", "kept", rid="sent")
        self.wait_counts({"expired": 1})
        self.psend(c, "/queue/sync", "a turn later", rid="sync")
        self.crash()
        self.start("")
        self.back(2, 2)
        self.assertEqual(self.drain("/queue/gone"), [])
        self.assertEqual(bodies(self.drain("/queue/kept")), ["kept"])
        self.assert_counts()

    def test_dead_letters_are_in_one_place_once_after_a_crash(self):
        self.start()
        c = self.client()
        subscribe(c, "/queue/work", ack="client-individual")
        t0 = now_ms()
        self.psend(c, "/queue/work", "rejected", [("x-k", "1")])
        f = c.expect("MESSAGE")
        original_id = f["message-id"]
        c.send_frame("NACK", [("id", f["ack"]), ("requeue", "false")])
        self.psend(c, "/queue/exp", "expired", [("expiration", "100"), ("x-k", "2")])
        self.wait_counts(dead={"rejected": 1, "expired": 1})
        t1 = now_ms()
        self.psend(c, "/queue/sync", "a turn later", rid="sync")
        self.crash()
        self.start()
        self.back(3, 2)   # two dead letters and the sync message
        self.assertEqual(self.drain("/queue/work"), [])
        self.assertEqual(self.drain("/queue/exp"), [])
        dl = self.drain("/queue/dlq")
        self.assertEqual(bodies(dl), ["rejected", "expired"])
        for f, reason, origin, k in ((dl[0], "rejected", "/queue/work", "1"),
                                     (dl[1], "expired", "/queue/exp", "2")):
            self.assert_dead_letter(f, reason, origin, t0, t1, "/queue/dlq")
            self.assertEqual(f["x-k"], k)
            self.assertEqual(f["persistent"], "true")
        self.assertNotEqual(dl[0]["message-id"], original_id)
        self.assert_counts()
        # Consumed from the DLQ: gone after another crash.
        self.crash()
        self.start()
        self.assertEqual(self.drain("/queue/dlq"), [])

    def test_priorities_survive_a_crash(self):
        self.start("")
        c = self.client()
        sent = [("d1", None), ("p0", "0"), ("p9", "9"), ("p5", "5"), ("d2", "4"), ("p12", "12"),
                ("p1", "1"), ("p9b", "9")]
        for body, prio in sent:
            self.psend(c, "/queue/prio", body, [("priority", prio)] if prio else [])
        self.psend(c, "/queue/prio", "last", [("priority", "0")], rid="sent")
        self.crash()
        self.start("")
        self.back(9, 1)
        self.assertEqual(bodies(self.drain("/queue/prio")),
                         ["p9", "p12", "p9b", "p5", "d1", "d2", "p1", "p0", "last"])


# ---- real clients: the Ruby gem and stomp.py --------------------------------------

CLIENT_CONFIG = ("policy = /queue/dl.> dead-letter-queue=/queue/dl-dead\n"
                 "policy = /queue/mr.> max-redeliveries=2 dead-letter-queue=/queue/mr-dead\n")
# scenario: (dropped, dead-lettered) eftd counts once the script has run;
# the same for both scripts.
CLIENT_SCENARIOS = {
    "expiry": ({"expired": 5}, None),
    "bad_headers": (None, None),
    "priority": (None, None),
    "dead_letter": ({"rejected": 1}, {"rejected": 2}),
    "max_redeliveries": (None, {"max_redeliveries": 2}),
    "selectors": (None, None),
}


class LifetimeScript(AdminMixin, ScriptTest):
    listen = ADMIN
    config = CLIENT_CONFIG

    def scenario(self, name):
        self.run_scenario(name)
        dropped, dead = CLIENT_SCENARIOS[name]
        self.assert_counts(dropped, dead)


def add_client_tests(cls):
    for name in CLIENT_SCENARIOS:
        def test(self, name=name):
            self.scenario(name)
        test.__name__ = "test_" + name
        setattr(cls, test.__name__, test)
    return cls


@unittest.skipUnless(HAVE_RUBY_STOMP, "ruby with the stomp gem (ruby-stomp) not available")
@add_client_tests
class RubyLifetimeTest(LifetimeScript):
    command = [RUBY, os.path.join(CLIENTS, "ruby_lifetime.rb")]
    summary = "ruby-lifetime"


@unittest.skipUnless(HAVE_STOMP_PY, "python3 with stomp.py (python3-stomp) not available")
@add_client_tests
class StompPyLifetimeTest(LifetimeScript):
    command = [PYTHON, os.path.join(CLIENTS, "stomp_py_lifetime.py")]
    summary = "stomp.py-lifetime"
