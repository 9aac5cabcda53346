"""Durable messages (issue 12): a journal in data-dir, and durable topic
subscriptions in ActiveMQ's and RabbitMQ's dialects.

What a restart brings back, proven by stopping eftd (SIGTERM) and by
killing it (kill -9), then starting a new eftd on the same data-dir:
- persistent:true queue messages nobody acknowledged, in their order; the
  ones a consumer had been handed come back with redelivered:true;
- nothing acknowledged, nothing aborted, no message without persistent:true
  (unless persistent-default = yes), no topic message;
- a transaction whole or not at all;
- message ids that were never used before.
Damage: a torn tail is cut off with a log line; other damage stops eftd with
one line naming the file and offset, and --recover skips it (the rest of
damage: test_journal_damage.py).  Start-up errors (two eftd on one dir, a
dir that cannot be made) are one line and exit 1.  Disk: max-disk pauses
producers, and its log line comes once however often it is reached; a full
filesystem holds RECEIPTs until the journal can be written again.

The journal is the same over every transport, so all but the first test run
in the tcp pass only."""

import datetime
import glob
import os
import re
import shutil
import socket
import subprocess
import unittest

import clientscript
import harness
from harness import (send, Broker, DataDirTest, RawClient, SLOW, expect_receipt, subscribe,
                     wait_for)

TCP_ONLY = unittest.skipIf(harness.TRANSPORT == "tls",
                           "the journal does not depend on the transport: runs in the tcp pass")



def psend(c, dest, body, rid):
    send(c, dest, body, [("persistent", "true")], rid)


class DurableBase(DataDirTest):
    config = ""
    data_prefix = "eftd-durable-"

    def start(self, config=None, args=(), data=None):
        return self.start_on_data(self.config + (config or ""), args, data)

    def client(self, b, version="1.2"):
        return self.connect(b, version)

    def stop(self, b):
        for c in self.clients:
            c.close()
        self.clients = []
        self.assertEqual(b.stop(), 0, b.read_log()[-3000:])

    def drain(self, b, dest, ack=None, idle=0.1):
        """Every message waiting on dest, read by a new subscriber: what is
        queued is written at SUBSCRIBE, ahead of the RECEIPT of a later
        frame (then anything late, until `idle` seconds pass quietly)."""
        c = self.client(b)
        subscribe(c, dest, sid="drain", ack=ack)
        c.send_frame("SEND", [("destination", "/topic/drained"), ("receipt", "drained")])
        frames = []
        while True:
            f = c.read_frame(10 * SLOW)
            if f.command == "RECEIPT" and f.get("receipt-id") == "drained":
                break
            frames.append(f)
        frames += c.drain(10 * SLOW, idle=idle * SLOW)[0]
        return [f for f in frames if f.command == "MESSAGE"]

    def bodies(self, frames):
        return [f.body.decode() for f in frames]

    def segments(self, data=None):
        return sorted(glob.glob(os.path.join(data or self.data, "journal-*.log")))


class RestartTest(DurableBase):
    def test_persistent_queue_messages_survive_a_clean_restart(self):
        b = self.start()
        c = self.client(b)
        for i in range(20):
            psend(c, "/queue/keep", "m%d" % i, "r%d" % i)
        self.stop(b)
        self.assertIn("20 messages queued on 1 destination; 20 persistent in the journal",
                      b.read_log())
        # how long the journal's fsyncs took, for whoever reads the log
        self.assertRegex(b.read_log(), r"journal: [1-9][0-9]* fsyncs, mean [0-9.]+ ms, max ")
        b = self.start()
        self.assertIn("20 messages back on 1 queue (0 redelivered)", b.read_log())
        got = self.drain(b, "/queue/keep")
        self.assertEqual(self.bodies(got), ["m%d" % i for i in range(20)])
        self.assertTrue(all(f.get("redelivered") is None for f in got))
        self.assertTrue(all(f.get("persistent") == "true" for f in got))


    @TCP_ONLY
    def test_persistent_true_in_any_case_survives_a_restart(self):
        """stomp.py sends persistent=True as "True" (str() of a bool), and
        RabbitMQ takes it: so does eftd; "False" stays in memory."""
        b = self.start()
        c = self.client(b)
        for i, value in enumerate(("True", "TRUE", "true", "False")):
            send(c, "/queue/case", value, [("persistent", value)], "r%d" % i)
        self.stop(b)
        self.assertIn("(of 4 queued on 1 destination; the other 3, persistent, stay in the "
                      "journal)", b.read_log())
        b = self.start()
        self.assertEqual(self.bodies(self.drain(b, "/queue/case")), ["True", "TRUE", "true"])

@TCP_ONLY
class CrashTest(DurableBase):
    def check_kill9(self, fsync):
        b = self.start("fsync = %s\n" % fsync)
        c = self.client(b)
        for i in range(200):
            psend(c, "/queue/k", "k%d" % i, "r%d" % i)
        self.crash(b)
        b = self.start()
        self.assertEqual(self.bodies(self.drain(b, "/queue/k")), ["k%d" % i for i in range(200)])

    def test_kill9_loses_nothing_that_had_a_receipt_fsync_always(self):
        self.check_kill9("always")

    def test_kill9_loses_nothing_written_fsync_everysec(self):
        self.check_kill9("everysec")

    def test_kill9_loses_nothing_written_fsync_no(self):
        self.check_kill9("no")

    def test_acknowledged_messages_stay_gone_and_delivered_ones_come_back_redelivered(self):
        b = self.start()
        p = self.client(b)
        for i in range(10):
            psend(p, "/queue/a", "a%d" % i, "r%d" % i)
        c = self.client(b)
        subscribe(c, "/queue/a", ack="client-individual", headers=[("prefetch-count", "4")])
        got = c.read_frames(4)
        self.assertEqual(self.bodies(got), ["a0", "a1", "a2", "a3"])
        # a1 and a3 acknowledged; a0 and a2 handed out, not acknowledged
        for f in (got[1], got[3]):
            c.send_frame("ACK", [("id", f["ack"])])
        c.send_frame("DISCONNECT", [("receipt", "bye")])
        frames, _ = c.drain(5 * SLOW)
        self.assertIn("RECEIPT", [f.command for f in frames])
        self.crash(b)
        b = self.start()
        got = self.drain(b, "/queue/a")
        self.assertEqual(self.bodies(got), ["a0", "a2"] + ["a%d" % i for i in range(4, 10)])
        # acknowledging two let the prefetch window take a4 and a5
        red = {f.body.decode() for f in got if f.get("redelivered") == "true"}
        self.assertEqual(red, {"a0", "a2", "a4", "a5"}, got)

    def test_cumulative_ack_in_client_mode(self):
        b = self.start()
        p = self.client(b)
        for i in range(6):
            psend(p, "/queue/cum", "c%d" % i, "r%d" % i)
        c = self.client(b)
        subscribe(c, "/queue/cum", ack="client", headers=[("prefetch-count", "4")])
        got = c.read_frames(4)
        c.send_frame("ACK", [("id", got[2]["ack"]), ("receipt", "ack")])
        while c.read_frame().command != "RECEIPT":
            pass
        self.crash(b)
        b = self.start()
        got = self.drain(b, "/queue/cum")
        self.assertEqual(self.bodies(got), ["c3", "c4", "c5"])
        self.assertEqual(got[0].get("redelivered"), "true")

    def test_auto_ack_delivery_is_consumed(self):
        b = self.start("fsync = always\n")
        p = self.client(b)
        c = self.client(b)
        subscribe(c, "/queue/auto")
        for i in range(5):
            psend(p, "/queue/auto", "x%d" % i, "r%d" % i)
        self.assertEqual(self.bodies(c.read_frames(5)), ["x%d" % i for i in range(5)])
        psend(p, "/queue/other", "sync", "last")  # a turn later: the CONSUMED records are written
        self.crash(b)
        b = self.start()
        self.assertEqual(self.bodies(self.drain(b, "/queue/auto")), [])
        self.assertEqual(self.bodies(self.drain(b, "/queue/other")), ["sync"])

    def test_only_persistent_queue_messages_are_kept(self):
        b = self.start()
        c = self.client(b)
        t = self.client(b)
        subscribe(t, "/topic/t")
        send(c, "/queue/q", "plain", receipt="r1")
        psend(c, "/queue/q", "kept", "r2")
        send(c, "/queue/q", "false", [("persistent", "false")], "r3")
        psend(c, "/topic/t", "topic", "r4")
        t.expect("MESSAGE")
        # a temp-queue lives as its owner does
        send(c, "/temp-queue/mine", "temp", [("persistent", "true")], "r5")
        self.crash(b)
        b = self.start()
        self.assertEqual(self.bodies(self.drain(b, "/queue/q")), ["kept"])
        self.assertIn("1 message back on 1 queue", b.read_log())

    def test_persistent_default_keeps_every_queue_message(self):
        self.config = "persistent-default = yes\n"
        b = self.start()
        c = self.client(b)
        send(c, "/queue/all", "one", receipt="r1")
        send(c, "/queue/all", "two", receipt="r2")
        self.crash(b)
        b = self.start()
        self.assertEqual(self.bodies(self.drain(b, "/queue/all")), ["one", "two"])

    def test_transactions_whole_or_not_at_all(self):
        b = self.start("fsync = always\n")
        c = self.client(b)
        c.send_frame("BEGIN", [("transaction", "t1")])
        for i in range(3):
            send(c, "/queue/tx", "t1-%d" % i, [("persistent", "true"), ("transaction", "t1")])
        c.send_frame("COMMIT", [("transaction", "t1"), ("receipt", "c1")])
        expect_receipt(c, "c1")
        c.send_frame("BEGIN", [("transaction", "t2")])
        send(c, "/queue/tx", "aborted", [("persistent", "true"), ("transaction", "t2")])
        c.send_frame("ABORT", [("transaction", "t2"), ("receipt", "a2")])
        expect_receipt(c, "a2")
        c.send_frame("BEGIN", [("transaction", "t3")])
        send(c, "/queue/tx", "open", [("persistent", "true"), ("transaction", "t3")])
        # acknowledgements in a transaction: t4 commits an ACK, t5 stays open
        psend(c, "/queue/txack", "acked", "p1")
        psend(c, "/queue/txack", "pending", "p2")
        s = self.client(b)
        subscribe(s, "/queue/txack", ack="client-individual")
        m1, m2 = s.read_frames(2)
        s.send_frame("BEGIN", [("transaction", "t4")])
        s.send_frame("ACK", [("id", m1["ack"]), ("transaction", "t4")])
        s.send_frame("COMMIT", [("transaction", "t4"), ("receipt", "c4")])
        expect_receipt(s, "c4")
        s.send_frame("BEGIN", [("transaction", "t5")])
        s.send_frame("ACK", [("id", m2["ack"]), ("transaction", "t5"), ("receipt", "a5")])
        expect_receipt(s, "a5")
        self.crash(b)
        b = self.start()
        self.assertEqual(self.bodies(self.drain(b, "/queue/tx")), ["t1-0", "t1-1", "t1-2"])
        got = self.drain(b, "/queue/txack")
        self.assertEqual(self.bodies(got), ["pending"])
        self.assertEqual(got[0].get("redelivered"), "true")

    def test_message_ids_are_never_used_twice(self):
        ids = set()
        for _ in range(3):
            b = self.start()
            c = self.client(b)
            t = self.client(b)
            subscribe(t, "/topic/ids")
            for i in range(5):
                send(c, "/topic/ids", "x", receipt="r%d" % i)
            psend(c, "/queue/ids", "kept", "p")
            for f in t.read_frames(5):
                self.assertNotIn(f["message-id"], ids)
                ids.add(f["message-id"])
            self.crash(b)
        b = self.start()
        got = self.drain(b, "/queue/ids")
        self.assertEqual(len(got), 3)
        # the kept messages keep their ids; none of them was a topic message's
        self.assertFalse({f["message-id"] for f in got} & ids)

    def test_orders_survive_several_restarts_and_queues(self):
        b = self.start()
        c = self.client(b)
        for q in range(5):
            for i in range(10):
                psend(c, "/queue/o%d" % q, "%d-%d" % (q, i), "r%d-%d" % (q, i))
        self.stop(b)
        b = self.start()
        self.stop(b)
        b = self.start()
        self.assertIn("50 messages back on 5 queues", b.read_log())
        for q in range(5):
            self.assertEqual(self.bodies(self.drain(b, "/queue/o%d" % q)),
                             ["%d-%d" % (q, i) for i in range(10)])


AMQ_SUB = [("activemq.subscriptionName", "s1")]
RMQ_SUB = [("durable", "true"), ("auto-delete", "false")]


@TCP_ONLY
class DurableSubscriptionTest(DurableBase):
    """A durable subscription keeps what its topic gets while its subscriber
    is away, also across a restart (on disk when persistent)."""

    def sub(self, b, dialect, sid="d1", receipt=True, ack=None):
        c = RawClient(b.port)
        self.clients.append(c)
        c.connect(headers={"client-id": "app"} if dialect == "amq" else None)
        h = [("destination", "/topic/news"), ("id", sid)]
        h += AMQ_SUB if dialect == "amq" else RMQ_SUB
        if ack:
            h.append(("ack", ack))
        if receipt:
            h.append(("receipt", "sub"))
        c.send_frame("SUBSCRIBE", h)
        if receipt:
            expect_receipt(c, "sub")
        return c

    def publish(self, b, bodies, persistent=True):
        p = self.client(b)
        for i, body in enumerate(bodies):
            send(p, "/topic/news", body, [("persistent", "true")] if persistent else [], "p%d" % i)
        p.close()

    def read(self, c, n):
        got = c.read_frames(n)
        c.expect_nothing(0.2)
        return self.bodies(got)

    def check_dialect(self, dialect):
        b = self.start()
        c = self.sub(b, dialect)
        self.publish(b, ["live"])
        self.assertEqual(self.read(c, 1), ["live"])
        c.close()
        # away: kept
        self.publish(b, ["away1", "away2"])
        self.publish(b, ["memory-only"], persistent=False)
        c = self.sub(b, dialect)
        self.assertEqual(self.read(c, 3), ["away1", "away2", "memory-only"])
        c.close()
        # away across a crash: the persistent ones are kept
        self.publish(b, ["before-crash"])
        self.publish(b, ["lost-in-memory"], persistent=False)
        self.crash(b)
        b = self.start()
        self.publish(b, ["after-restart"])  # the subscription outlived the restart
        c = self.sub(b, dialect)
        self.assertEqual(self.read(c, 2), ["before-crash", "after-restart"])
        # UNSUBSCRIBE with the durable headers ends it
        h = [("id", "d1"), ("receipt", "unsub")] + (AMQ_SUB if dialect == "amq" else RMQ_SUB)
        c.send_frame("UNSUBSCRIBE", h)
        expect_receipt(c, "unsub")
        c.close()
        self.publish(b, ["nobody-keeps-this"])
        self.crash(b)
        b = self.start()
        c = self.sub(b, dialect)
        c.expect_nothing(0.3)

    def test_activemq_client_id_and_subscription_name(self):
        self.check_dialect("amq")

    def test_rabbitmq_durable_auto_delete_false_and_id(self):
        self.check_dialect("rmq")

    def test_second_live_subscriber_gets_an_error(self):
        b = self.start()
        for dialect in ("amq", "rmq"):
            first = self.sub(b, dialect)
            second = self.sub(b, dialect, receipt=False)
            err = second.expect_error_and_close()
            self.assertEqual(err["message"], "durable subscription in use")
            first.close()

    def test_plain_unsubscribe_keeps_it(self):
        b = self.start()
        c = self.sub(b, "amq")
        c.send_frame("UNSUBSCRIBE", [("id", "d1"), ("receipt", "u")])
        expect_receipt(c, "u")
        self.publish(b, ["kept"])
        c.close()
        c = self.sub(b, "amq")
        self.assertEqual(self.read(c, 1), ["kept"])

    def test_rabbitmq_unsubscribe_with_durable_alone_ends_it(self):
        """RabbitMQ's rule (its own durable-subscription test): a plain
        UNSUBSCRIBE leaves the subscription; one with durable:true, or the
        legacy persistent:true, ends it, without auto-delete:false.  Its
        Python test sends auto-delete as "False": true and false count in any
        case."""
        for header in ("durable", "persistent"):
            b = self.start()
            sub = [("destination", "/topic/news"), ("id", "rd"), (header, "true"),
                   ("auto-delete", "False"), ("receipt", "s")]
            c = self.client(b)
            c.send_frame("SUBSCRIBE", sub)
            expect_receipt(c, "s")
            c.send_frame("UNSUBSCRIBE", [("id", "rd"), ("receipt", "u1")])   # only leaves
            expect_receipt(c, "u1")
            self.publish(b, ["kept"])
            c.send_frame("SUBSCRIBE", sub)
            expect_receipt(c, "s")
            self.assertEqual(self.read(c, 1), ["kept"], header)
            c.send_frame("UNSUBSCRIBE", [("id", "rd"), (header, "true"), ("receipt", "u2")])
            expect_receipt(c, "u2")
            self.publish(b, ["nobody keeps this"])
            c.send_frame("SUBSCRIBE", sub)
            expect_receipt(c, "s")
            c.expect_nothing(0.3)
            self.stop(b)

    def test_unacknowledged_come_back_redelivered_after_restart(self):
        b = self.start()
        c = self.sub(b, "rmq", ack="client-individual")
        self.publish(b, ["one", "two"])
        first, second = c.read_frames(2)
        c.send_frame("ACK", [("id", first["ack"]), ("receipt", "a")])
        expect_receipt(c, "a")
        self.crash(b)
        b = self.start()
        c = self.sub(b, "rmq")
        got = c.read_frames(1)
        self.assertEqual(self.bodies(got), ["two"])
        self.assertEqual(got[0]["redelivered"], "true")
        self.assertEqual(got[0]["destination"], "/topic/news")

    def test_ordinary_subscribers_unaffected(self):
        b = self.start()
        d = self.sub(b, "amq")
        t = self.client(b)
        subscribe(t, "/topic/news", sid="plain")
        self.publish(b, ["both"])
        self.assertEqual(self.read(t, 1), ["both"])
        self.assertEqual(self.read(d, 1), ["both"])

    def test_stomp_py_rabbitmq_dialect_across_restart(self):
        import stomp
        b = self.start()
        received = []

        class Listener(stomp.ConnectionListener):
            def on_message(self, frame):
                received.append(frame.body)

        def connect():
            conn = harness.stomp_py(b.port)
            conn.set_listener("", Listener())
            conn.connect(wait=True)
            conn.subscribe("/topic/news", id="py-durable", ack="auto",
                           headers={"durable": "true", "auto-delete": "false"})
            return conn
        conn = connect()
        conn.disconnect(receipt="bye")
        self.publish(b, ["py-1", "py-2"])
        self.crash(b)
        b = self.start()
        conn = connect()
        try:
            wait_for(lambda: len(received) >= 2, 5 * SLOW, "stomp.py to get what was kept")
            self.assertEqual(received, ["py-1", "py-2"])
        finally:
            conn.disconnect()

    @unittest.skipUnless(clientscript.HAVE_RUBY_STOMP, "ruby with the stomp gem not available")
    def test_ruby_gem_activemq_dialect_across_restart(self):
        script = """
            require 'stomp'
            require 'timeout'
            port, phase = ARGV[0].to_i, ARGV[1]
            c = Stomp::Connection.new(hosts: [{ login: 'guest', passcode: 'guest',
                                                host: '127.0.0.1', port: port }],
                                      reliable: false,
                                      connect_headers: { 'accept-version' => '1.2', 'host' => '/',
                                                         'client-id' => 'ruby-app' })
            c.subscribe('/topic/news', { 'id' => 'r1', 'activemq.subscriptionName' => 'rs' })
            if phase == 'read'
              2.times { Timeout.timeout(10) { puts c.receive.body } }
            end
            c.disconnect
        """
        def ruby(port, phase):
            r = subprocess.run([clientscript.RUBY, "-e", script, str(port), phase],
                               capture_output=True, text=True, timeout=30 * SLOW)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout.split()
        b = self.start()
        ruby(b.port, "subscribe")
        self.publish(b, ["rb-1", "rb-2"])
        self.crash(b)
        b = self.start()
        self.assertEqual(ruby(b.port, "read"), ["rb-1", "rb-2"])


@TCP_ONLY
class CrashLoopTest(unittest.TestCase):
    """crash_test.py's kill -9 rounds, a few of them (make crash-test: 50)."""

    def test_kill9_at_random_moments_keeps_every_promise(self):
        import crash_test
        rounds = int(os.environ.get("CRASH_ROUNDS", "5"))
        lines = []
        # run() fails unless each round's eftd died of its kill -9 and each
        # count reached its minimum (crash_test.minimums)
        totals = crash_test.run(rounds, os.environ.get("CRASH_SEED", "12"), log=lines.append)
        self.assertEqual(totals["kills"], rounds)


@TCP_ONLY
class StartupTest(DurableBase):
    def run_eftd(self, *args, timeout=10):
        return subprocess.run([harness.EFTD, "-p", "0"] + list(args), capture_output=True,
                              text=True, timeout=timeout * SLOW, stdin=subprocess.DEVNULL)

    def test_without_data_dir_one_warning(self):
        b = Broker().start()
        self.brokers.append(b)
        # logged once the listeners are open: the log may not have it yet
        wait_for(lambda: "no data-dir" in b.read_log(), 5 * SLOW, "the warning")
        log = b.read_log()
        self.assertIn("warn: no data-dir: messages are kept in memory only, and persistent "
                      "messages will not survive a restart", log)

    def test_two_eftd_on_one_data_dir(self):
        self.start()
        r = self.run_eftd("--data-dir", self.data)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.strip().count("\n"), 0, r.stderr)
        self.assertIn("data-dir %s is in use by another eftd" % self.data, r.stderr)

    def test_data_dir_that_cannot_be_made(self):
        blocker = os.path.join(self.dir, "file")
        open(blocker, "w").close()
        r = self.run_eftd("--data-dir", os.path.join(blocker, "data"))
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("cannot create", r.stderr)

    def test_data_dir_in_config_relative_to_it(self):
        conf = os.path.join(self.dir, "eftd.conf")
        with open(conf, "w") as f:
            f.write("data-dir = rel-data\nport = 0\n")
        b = Broker(args=["-c", conf])
        self.brokers.append(b)
        b.start()
        self.assertTrue(os.path.isdir(os.path.join(self.dir, "rel-data")))

    def test_bad_fsync_value(self):
        conf = os.path.join(self.dir, "eftd.conf")
        with open(conf, "w") as f:
            f.write("fsync = sometimes\n")
        r = self.run_eftd("-c", conf)
        self.assertEqual(r.returncode, 1)
        self.assertIn("fsync: 'sometimes' is not always, everysec or no", r.stderr)


@TCP_ONLY
class DamageTest(DurableBase):
    def fill(self, n=5, config=None):
        b = self.start(config)
        c = self.client(b)
        for i in range(n):
            psend(c, "/queue/d", "d%d-%s" % (i, "x" * 40), "r%d" % i)
        self.crash(b)
        segs = self.segments()
        self.assertEqual(len(segs), 1)
        return segs[0]

    def records(self, path):
        """(offset, length) of each record in a segment."""
        with open(path, "rb") as f:
            data = f.read()
        out, pos = [], 24  # the segment header (version 2)
        while pos + 12 <= len(data):
            n = int.from_bytes(data[pos:pos + 4], "little")
            out.append((pos, 12 + n))
            pos += 12 + n
        return out

    def test_torn_tail_cut_at_every_offset_of_the_last_record(self):
        # fsync = no: nothing is synced after the start, so the checkpoint
        # (test_journal_damage.py) cannot cover the last record
        seg = self.fill(config="fsync = no\n")
        start, length = self.records(seg)[-1]
        with open(seg, "rb") as f:
            data = f.read()
        self.assertEqual(start + length, len(data))
        for cut in range(start + 1, start + length):
            work = os.path.join(self.dir, "cut")
            shutil.rmtree(work, True)
            shutil.copytree(self.data, work)
            with open(os.path.join(work, os.path.basename(seg)), "r+b") as f:
                f.truncate(cut)
            b = self.start(data=work)
            log = b.read_log()
            self.assertIn("journal: cut %d bytes of a record torn by a crash" % (cut - start), log)
            self.assertIn("4 messages back on 1 queue", log)
            got = self.drain(b, "/queue/d")
            self.assertEqual([g.body[:2] for g in got], [b"d0", b"d1", b"d2", b"d3"])
            self.crash(b)

    def test_segment_torn_before_its_header_is_cut_and_the_rest_carries_on(self):
        self.fill(config="fsync = no\n")
        # a crash while the next segment was being made: a few bytes of header
        with open(os.path.join(self.data, "journal-00000002.log"), "wb") as f:
            f.write(b"EFTJR")
        b = self.start()
        self.assertIn("journal: cut 5 bytes of a record torn by a crash", b.read_log())
        self.assertEqual(len(self.drain(b, "/queue/d")), 5)
        # the torn one is begun again; everything consumed: the old one goes
        wait_for(lambda: [os.path.basename(p) for p in self.segments()] ==
                 ["journal-00000002.log"], 5 * SLOW, "old segments to be deleted")
        self.assertNotIn("warn: ", b.read_log().split("torn by a crash")[1])

    def test_flipped_bit_refuses_to_start_then_recover_skips_it(self):
        seg = self.fill()
        start, length = self.records(seg)[2]  # IDS, d0, d1: the second message
        with open(seg, "r+b") as f:
            f.seek(start + length // 2)
            byte = f.read(1)
            f.seek(start + length // 2)
            f.write(bytes([byte[0] ^ 0x10]))
        r = subprocess.run([harness.EFTD, "-p", "0", "--data-dir", self.data],
                           capture_output=True, text=True, timeout=10 * SLOW)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("%s: offset %d: damaged record" % (seg, start), r.stderr)
        b = self.start(args=["--recover"])
        log = b.read_log()
        self.assertIn("journal: --recover: %s: offset %d: damaged record: " % (seg, start), log)
        got = self.drain(b, "/queue/d")
        self.assertEqual([g.body[:2] for g in got], [b"d0", b"d2", b"d3", b"d4"])


@TCP_ONLY
class DiskTest(DurableBase):
    def test_journal_stays_proportional_to_what_is_live(self):
        self.config = "journal-segment-size = 64k\n"
        b = self.start()
        p = self.client(b)
        c = self.client(b)
        subscribe(c, "/queue/flow", ack="client-individual")
        # one message stays unacknowledged all along: it must not pin the journal
        psend(p, "/queue/stuck", "old", "old")
        s = self.client(b)
        subscribe(s, "/queue/stuck", ack="client-individual")
        stuck = s.expect("MESSAGE")
        body = "y" * 1000
        for i in range(3000):
            send(p, "/queue/flow", body, [("persistent", "true")],
                 "r%d" % i if i % 100 == 99 else None)
            if i % 100 == 99:
                got = c.read_frames(100)
                for k, f in enumerate(got):
                    c.send_frame("ACK", [("id", f["ack"])] + ([("receipt", "a%d" % i)]
                                                               if k == 99 else []))
                expect_receipt(c, "a%d" % i)
        psend(p, "/queue/flow", "end", "end")
        c.expect("MESSAGE")
        # 3 MB went through; what is live is two messages
        wait_for(lambda: len(self.segments()) <= 4, 5 * SLOW, "old segments to be deleted")
        total = sum(os.path.getsize(f) for f in self.segments())
        self.assertLess(total, 400 * 1024)
        self.crash(b)
        b = self.start()
        got = self.drain(b, "/queue/stuck")
        self.assertEqual(self.bodies(got), ["old"])
        self.assertEqual(got[0].get("redelivered"), "true")
        self.assertEqual(self.bodies(self.drain(b, "/queue/flow")), ["end"])
        self.assertIsNotNone(stuck)

    def test_max_disk_pauses_producers_until_consumers_drain(self):
        self.config = "journal-segment-size = 64k\nmax-disk = 256k\n"
        b = self.start()
        p = self.client(b)
        body = "z" * 1000
        sent = 0
        paused = False
        for i in range(1000):
            p.send_frame("SEND", [("destination", "/queue/full"), ("persistent", "true"),
                                  ("receipt", "r%d" % i)], body)
            try:
                expect_receipt(p, "r%d" % i, timeout=1.0 * SLOW)
            except socket.timeout:
                paused = True
                break
            sent += 1
        self.assertTrue(paused, "the producer was never paused")
        self.assertGreater(sent, 100)
        self.assertIn("disk limit reached", b.read_log())
        c = self.client(b)
        subscribe(c, "/queue/full")
        expect_receipt(p, "r%d" % sent, timeout=10 * SLOW)  # resumed
        got = c.drain(10 * SLOW, idle=1.0 * SLOW)[0]
        self.assertEqual(len([f for f in got if f.command == "MESSAGE"]), sent + 1)

    def test_max_disk_reached_again_and_again_is_logged_once(self):
        # issue 23: under a load that keeps reaching max-disk, the first is
        # logged; the next ones only as a count, at most once a minute
        self.config = "journal-segment-size = 64k\nmax-disk = 256k\n"
        b = self.start()
        p = self.client(b)
        c = self.client(b)
        subscribe(c, "/queue/full", ack="client-individual")
        body = "z" * 1000
        i = 0
        for cycle in range(3):
            # send until the producer waits, then the consumer takes it all
            for _ in range(1000):
                p.send_frame("SEND", [("destination", "/queue/full"), ("persistent", "true"),
                                      ("receipt", "r%d" % i)], body)
                try:
                    expect_receipt(p, "r%d" % i, timeout=1.0 * SLOW)
                except socket.timeout:
                    break
                i += 1
            else:
                self.fail("the producer was never paused")
            for f in c.drain(10 * SLOW, idle=1.0 * SLOW)[0]:
                if f.command == "MESSAGE":
                    c.send_frame("ACK", [("id", f["ack"])])
            expect_receipt(p, "r%d" % i, timeout=10 * SLOW)  # resumed
            i += 1
        log = b.read_log()
        # the first in full; the two after it only in counts, each a minute
        # or more after the line before it by eftd's clock (none, unless the
        # cycles take a minute, as under valgrind)
        lines = re.findall(r"^(\S+ \S+) eftd warn: disk limit reached(:| (\d+) more times?)",
                           log, re.M)
        self.assertEqual([full for _, full, _ in lines][:1], [":"], log)
        self.assertEqual(sum(1 for _, full, _ in lines if full == ":"), 1, log)
        self.assertLessEqual(sum(int(n) for _, full, n in lines if n), 2, log)
        stamps = [datetime.datetime.strptime(t, "%Y-%m-%d %H:%M:%S.%f") for t, _, _ in lines]
        self.assertTrue(all((later - earlier).total_seconds() >= 59.5
                            for earlier, later in zip(stamps, stamps[1:])), log)
        self.assertLessEqual(log.count("producers resume"), 1, log)

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("mount"), "needs root to mount")
    def test_full_filesystem_holds_receipts_until_it_can_write(self):
        mnt = os.path.join(self.dir, "small")
        os.mkdir(mnt)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt],
                           capture_output=True, text=True)
        if r.returncode != 0:
            self.skipTest("cannot mount a tmpfs: " + r.stderr.strip())
        self.addCleanup(subprocess.run, ["umount", "-l", mnt])
        filler = os.path.join(mnt, "filler")
        with open(filler, "wb") as f:
            f.write(b"\0" * (1536 * 1024))
        self.config = "journal-segment-size = 64k\nmax-disk = 1g\nfsync = always\n"
        b = self.start(data=os.path.join(mnt, "data"))
        p = self.client(b)
        body = "f" * 1000
        receipts = []
        for i in range(2000):
            p.send_frame("SEND", [("destination", "/queue/f"), ("persistent", "true"),
                                  ("receipt", "r%d" % i)], body)
            try:
                expect_receipt(p, "r%d" % i, timeout=1.0 * SLOW)
            except socket.timeout:
                break
            receipts.append(i)
        else:
            self.fail("the disk never filled")
        self.assertIn("journal cannot be written", b.read_log())
        self.assertIn("No space left on device", b.read_log())
        # meanwhile a persistent SEND is refused with an ERROR, and what
        # needs no journal goes on
        other = self.client(b)
        other.send_frame("SEND", [("destination", "/queue/f"), ("persistent", "true"),
                                  ("receipt", "refused")], "x")
        err = other.expect_error_and_close()
        self.assertEqual(err["message"], "cannot store persistent message")
        self.assertIn("No space left on device", err.body.decode())
        tx = self.client(b)
        tx.send_frame("BEGIN", [("transaction", "t")])
        tx.send_frame("SEND", [("destination", "/queue/f"), ("persistent", "true"),
                               ("transaction", "t")], "in a transaction")
        tx.send_frame("COMMIT", [("transaction", "t"), ("receipt", "c")])
        self.assertEqual(tx.expect_error_and_close()["message"], "cannot store persistent message")
        t = self.client(b)
        subscribe(t, "/topic/still")
        t.send_frame("SEND", [("destination", "/topic/still"), ("receipt", "mem")], "in memory")
        self.assertEqual(t.expect("MESSAGE").body, b"in memory")
        expect_receipt(t, "mem")
        # room again: the held RECEIPT goes out, and producers carry on
        os.unlink(filler)
        try:
            expect_receipt(p, "r%d" % len(receipts), timeout=10 * SLOW)
        except socket.timeout:
            self.fail(b.read_log()[-3000:])
        psend(p, "/queue/f", "after", "after")
        self.assertIn("journal: writing again", b.read_log())
        self.crash(b)
        b = self.start(data=os.path.join(mnt, "data"))
        got = self.bodies(self.drain(b, "/queue/f"))
        self.assertEqual(len(got), len(receipts) + 2)
        self.assertEqual(got[-1], "after")
        self.stop(b)


if __name__ == "__main__":
    unittest.main()
