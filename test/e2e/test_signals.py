"""Signals (issue 9).

- SIGHUP reloads the users file without dropping connections: users added
  may log in, removed users' sessions get an ERROR and are closed, changed
  permissions apply at once, and a broken file keeps the old users.  It is
  logged either way.  Without a users file, SIGHUP is logged and ignored (it
  used to kill eftd, exit 129, losing every queued message).
- SIGTERM tells every STOMP 1.1/1.2 client with an ERROR (`message:server
  shutting down`) before closing, logs at warn how many queued messages on
  how many destinations are discarded, and logs `stopped:` last."""

import os
import shutil
import signal
import tempfile
import threading
import time
import unittest

import harness
from harness import Broker, RawClient, SLOW, expect_receipt, subscribe, wait_for

USERS_EXAMPLE = os.path.join(harness.ROOT, "etc", "users.example")


def example_lines():
    """alice (wonderland, may do anything) and bob (builder, reads /topic/ only)."""
    with open(USERS_EXAMPLE) as f:
        users = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    return {l.split(":", 1)[0]: l for l in users}


def connect(port, login, passcode, version="1.2"):
    c = RawClient(port)
    h = [("accept-version", version), ("host", "/"), ("login", login), ("passcode", passcode)]
    c.send_frame("CONNECT", h)
    return c, c.read_frame()


def log_lines(broker):
    return [l for l in broker.read_log().splitlines() if l.strip()]


class SighupTest(harness.BrokerTest):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="eftd-sighup-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.users = os.path.join(self.dir, "users")
        self.lines = example_lines()
        self.write_users(self.lines["alice"], self.lines["bob"])
        self.config = "users-file = %s\nallow-anonymous = no\nauth-delay-ms = 0\n" % self.users
        super().setUp()

    def write_users(self, *lines):
        tmp = self.users + ".new"
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.chmod(tmp, 0o600)
        os.rename(tmp, self.users)

    def login(self, login, passcode):
        c, f = connect(self.broker.port, login, passcode)
        self.clients.append(c)
        return c, f

    def hup(self):
        """SIGHUP, then wait for eftd to log what it made of it."""
        before = self.broker.read_log().count("SIGHUP")
        self.broker.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: self.broker.read_log().count("SIGHUP") > before, 5, "the SIGHUP log line")
        self.assertTrue(self.broker.alive(), "SIGHUP killed eftd:\n" + self.broker.read_log())
        # Over TLS the certificate is reloaded too: its line is not the users file's.
        return [l for l in log_lines(self.broker) if "SIGHUP" in l and "TLS" not in l][-1]

    def test_added_user_may_log_in_and_connections_stay(self):
        self.write_users(self.lines["alice"])
        line = self.hup()
        self.assertIn("reloaded %s: 1 user (removed bob)" % self.users, line)
        alice, f = self.login("alice", "wonderland")
        self.assertEqual(f.command, "CONNECTED")
        subscribe(alice, "/queue/hup")
        _, f = self.login("bob", "builder")
        self.assertEqual(f.command, "ERROR")

        carol = self.lines["alice"].replace("alice:", "carol:", 1)
        self.write_users(self.lines["alice"], carol)
        line = self.hup()
        self.assertIn("reloaded %s: 2 users (added carol)" % self.users, line)
        self.assertRegex(line, r" info: ")
        c, f = self.login("carol", "wonderland")
        self.assertEqual(f.command, "CONNECTED")
        # alice's connection and subscription went on through both reloads
        c.send_frame("SEND", [("destination", "/queue/hup"), ("receipt", "s")], "after")
        expect_receipt(c, "s")
        self.assertEqual(alice.expect("MESSAGE").body, b"after")

    def test_removed_user_gets_an_error_others_stay(self):
        alice, _ = self.login("alice", "wonderland")
        bob, f = self.login("bob", "builder")
        self.assertEqual(f.command, "CONNECTED")
        subscribe(bob, "/topic/news")
        self.write_users(self.lines["alice"])
        line = self.hup()
        self.assertIn("removed bob", line)
        self.assertIn("closed 1 connection of removed users", line)
        f = bob.expect_error_and_close()
        self.assertEqual(f["message"], "user removed")
        line = [l for l in log_lines(self.broker) if "user removed" in l][0]
        self.assertIn(" warn: ", line)
        self.assertIn(": closing: user removed from the users file [user bob]", line)
        self.assertNotIn("protocol error", line)  # it is not one
        alice.send_frame("SEND", [("destination", "/queue/x"), ("receipt", "r")], "x")
        expect_receipt(alice, "r")

    def test_changed_permissions_apply_at_once(self):
        bob, _ = self.login("bob", "builder")
        # bob: read=/topic/:write=  ->  may now write to /queue/
        self.write_users(self.lines["alice"], self.lines["bob"].replace(":write=", ":write=/queue/"))
        self.assertIn("changed bob", self.hup())
        bob.send_frame("SEND", [("destination", "/queue/ok"), ("receipt", "r")], "x")
        expect_receipt(bob, "r")

    def test_broken_file_keeps_the_old_users(self):
        alice, _ = self.login("alice", "wonderland")
        with open(self.users, "w") as f:
            f.write("carol:not-a-hash\n")
        line = self.hup()
        self.assertRegex(line, r" error: SIGHUP: users file not reloaded, keeping the 2 users "
                         r"loaded before: .*users:1: ")
        _, f = self.login("bob", "builder")
        self.assertEqual(f.command, "CONNECTED")
        _, f = self.login("carol", "x")
        self.assertEqual(f.command, "ERROR")
        alice.send_frame("SEND", [("destination", "/queue/x"), ("receipt", "r")], "x")
        expect_receipt(alice, "r")
        # a missing file too
        os.unlink(self.users)
        self.assertIn("not reloaded", self.hup())
        _, f = self.login("alice", "wonderland")
        self.assertEqual(f.command, "CONNECTED")


class SighupWithoutUsersFileTest(harness.BrokerTest):
    def test_sighup_is_logged_and_changes_nothing(self):
        c = self.client()
        subscribe(c, "/queue/q")
        p = self.client()
        p.send_frame("SEND", [("destination", "/queue/q"), ("receipt", "1")], "before")
        expect_receipt(p, "1")
        self.assertEqual(c.expect("MESSAGE").body, b"before")
        self.broker.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP" in self.broker.read_log(), 5, "the SIGHUP log line")
        self.assertTrue(self.broker.alive())
        if self.broker.transport == "tls":  # the one thing to reload: the certificate
            self.assertIn("SIGHUP: reloaded the TLS certificate and key", self.broker.read_log())
        else:
            self.assertIn("SIGHUP: no users-file, TLS listener or log-file is set",
                          self.broker.read_log())
        p.send_frame("SEND", [("destination", "/queue/q"), ("receipt", "2")], "after")
        expect_receipt(p, "2")
        self.assertEqual(c.expect("MESSAGE").body, b"after")


class SigtermTest(unittest.TestCase):
    def setUp(self):
        self.broker = Broker(args=["-l", "debug"]).start()
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        self.broker.finish()

    def client(self, version):
        c = RawClient(self.broker.port)
        self.clients.append(c)
        c.connect(version)
        return c

    def stop(self):
        self.broker.stop()  # SIGTERM: exit 0, no sanitizer or valgrind report

    def test_11_and_12_clients_get_an_error_10_clients_the_close(self):
        c10, c11, c12 = self.client(None), self.client("1.1"), self.client("1.2")
        self.broker.proc.send_signal(signal.SIGTERM)
        for c in (c11, c12):
            f = c.expect_error_and_close()
            self.assertEqual(f["message"], "server shutting down")
        c10.expect_closed()
        self.assertEqual((list(c10.pending), c10.buf), ([], b""), "a 1.0 client gets no ERROR")
        self.broker.ended()  # exit 0, no sanitizer or valgrind report
        # the clients closed when told: no linger or grace period waited out
        # (said by the debug log, not by a clock, which a slow build would blur)
        log = self.broker.read_log()
        self.assertNotIn("did not close in time", log)
        self.assertNotIn("shutdown grace period", log)

    def test_discarded_messages_logged_at_warn_and_stopped_is_last(self):
        p = self.client("1.2")
        for dest, n in (("/queue/a", 5), ("/queue/b", 2)):
            for i in range(n):
                p.send_frame("SEND", [("destination", dest)], "m%d" % i)
        p.send_frame("SEND", [("destination", "/topic/t"), ("receipt", "r")], "gone")
        expect_receipt(p, "r")
        # one message delivered but not acknowledged: it goes back, then counts
        c = self.client("1.2")
        subscribe(c, "/queue/c", ack="client")
        p.send_frame("SEND", [("destination", "/queue/c"), ("receipt", "r2")], "unacked")
        expect_receipt(p, "r2")
        c.expect("MESSAGE")
        self.stop()
        lines = log_lines(self.broker)
        warn = [l for l in lines if "discarding" in l]
        self.assertEqual(len(warn), 1, lines[-10:])
        self.assertIn(" warn: discarding 8 queued messages on 3 destinations", warn[0])
        self.assertIn(" info: stopped: ", lines[-1])

    def test_nothing_queued_no_warning(self):
        self.client("1.2")
        self.stop()
        lines = log_lines(self.broker)
        self.assertFalse([l for l in lines if "discarding" in l])
        self.assertIn("stopped: ", lines[-1])

    def test_client_that_does_not_close_is_not_waited_for_long(self):
        c = self.client("1.2")
        t0 = time.time()
        self.broker.proc.send_signal(signal.SIGTERM)
        self.assertEqual(c.read_frame().command, "ERROR")  # and keep the socket open
        self.broker.ended()  # exit 0, no sanitizer or valgrind report
        self.assertLess(time.time() - t0, 5 * SLOW)
        self.assertIn("stopped: ", log_lines(self.broker)[-1])

    def test_busy_client_gets_the_end_at_once_and_eftd_exits(self):
        """A client still sending (heart-beats every 50 ms here) when eftd stops
        gets its ERROR and then the end of stream at once, and eftd exits when it
        closes: a stop waits for no quiet spell (it used to shut the write side
        only after 100 ms without input, so this client kept eftd until the end
        of its 3 s grace period).  Said by the log, not by a clock."""
        c = self.client("1.2")
        done = threading.Event()
        beating = threading.Event()     # a few beats sent: the client is busy

        def beat():
            deadline = time.time() + 10 * SLOW
            sent = 0
            while not done.is_set() and time.time() < deadline:
                try:
                    c.send(b"\n")
                except OSError:
                    return
                sent += 1
                if sent == 4:
                    beating.set()
                done.wait(0.05)

        beater = threading.Thread(target=beat, daemon=True)
        beater.start()
        self.addCleanup(beater.join, 10 * SLOW)
        self.addCleanup(done.set)
        self.assertTrue(beating.wait(5 * SLOW), "the client sent no heart-beats")
        wait_for(lambda: harness.eftd_has_read(c.sock), 5, "eftd to read them")
        self.broker.proc.send_signal(signal.SIGTERM)
        try:
            self.assertEqual(c.expect_error_and_close(timeout=10 * SLOW)["message"],
                             "server shutting down")
        finally:
            done.set()
        self.broker.ended()  # exit 0, no sanitizer or valgrind report
        log = self.broker.read_log()
        self.assertNotIn("shutdown grace period", log)
        self.assertNotIn("did not", log)
        self.assertIn(" info: stopped: ", log_lines(self.broker)[-1])

    def test_second_signal_stops_at_once(self):
        c = self.client("1.2")
        self.broker.proc.send_signal(signal.SIGTERM)
        self.assertEqual(c.read_frame().command, "ERROR")  # the first is being handled
        self.broker.proc.send_signal(signal.SIGINT)
        self.broker.ended()  # exit 0, no sanitizer or valgrind report
        log = self.broker.read_log()
        self.assertIn("again: stopping now", log)
        # at once: c, still open, was not waited for (said by the log, not a clock)
        self.assertNotIn("did not close in time", log)
        self.assertNotIn("shutdown grace period", log)


class SigtermDataDirTest(harness.DataDirTest):
    """With a data-dir, what the journal does not keep is lost at a stop as
    it is without one: said at warn level too (issue 23)."""

    def stop(self, b):
        for c in self.clients:
            c.close()
        b.stop()
        return log_lines(b)

    def send(self, c, dest, n, persistent):
        for i in range(n):
            h = [("destination", dest), ("receipt", "%s-%d" % (dest, i))]
            if persistent:
                h.append(("persistent", "true"))
            c.send_frame("SEND", h, "m%d" % i)
            expect_receipt(c, "%s-%d" % (dest, i))

    def test_non_persistent_messages_discarded_at_warn(self):
        b = self.start_on_data("")
        c = self.connect(b)
        self.send(c, "/queue/a", 3, True)
        self.send(c, "/queue/a", 1, False)
        self.send(c, "/queue/b", 1, False)
        lines = self.stop(b)
        warn = [l for l in lines if "discarding" in l]
        self.assertEqual(len(warn), 1, lines[-10:])
        self.assertIn(" warn: discarding 2 queued messages that are not persistent (of 5 queued "
                      "on 2 destinations; the other 3, persistent, stay in the journal)", warn[0])
        self.assertIn(" info: stopped: ", lines[-1])

    def test_all_persistent_is_info(self):
        b = self.start_on_data("")
        c = self.connect(b)
        self.send(c, "/queue/a", 2, True)
        lines = self.stop(b)
        self.assertFalse([l for l in lines if "discarding" in l or " warn: " in l], lines[-10:])
        self.assertTrue([l for l in lines if " info: 2 messages queued on 1 destination; 2 "
                         "persistent in the journal" in l], lines[-10:])


if __name__ == "__main__":
    unittest.main()
