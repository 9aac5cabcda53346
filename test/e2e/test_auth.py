"""Authentication and permissions: a users file of libsodium (argon2id)
hashes, allow-anonymous, the delayed ERROR for a failed login, per-user read
and write prefixes.  Uses etc/users.example (alice/wonderland: everything;
bob/builder: read /topic/ only, write nothing)."""

import os
import shutil
import subprocess
import tempfile
import time
import unittest

import harness

USERS = os.path.join(harness.ROOT, "etc", "users.example")
DELAY_MS = 300


def connect(client, login=None, passcode=None):
    h = {"accept-version": "1.2", "host": "/"}
    if login is not None:
        h["login"] = login
    if passcode is not None:
        h["passcode"] = passcode
    client.send_frame("CONNECT", h)
    return client.read_frame()


class Closed(harness.BrokerTest):
    config = "users-file = %s\nallow-anonymous = no\nauth-delay-ms = %d\n" % (USERS, DELAY_MS)

    def raw(self):
        c = harness.RawClient(self.broker.port)
        self.clients.append(c)
        return c

    def test_right_password_connects(self):
        f = connect(self.raw(), "alice", "wonderland")
        self.assertEqual(f.command, "CONNECTED")

    def test_wrong_password_error_after_delay_then_close(self):
        c = self.raw()
        t0 = time.time()
        f = connect(c, "alice", "wonderland!")
        elapsed = time.time() - t0
        self.assertEqual(f.command, "ERROR")
        self.assertEqual(f["message"], "authentication failed")
        self.assertGreaterEqual(elapsed, DELAY_MS / 1000 * 0.9)
        c.expect_closed()
        self.assertIn("authentication failed for login 'alice'", self.broker.read_log())

    def test_frames_after_a_failed_connect_are_not_handled(self):
        c = self.raw()
        c.send(harness.frame("CONNECT", {"accept-version": "1.2", "login": "alice",
                                         "passcode": "no"}) +
               harness.frame("SEND", {"destination": "/queue/sneak"}, "x"))
        self.assertEqual(c.read_frame().command, "ERROR")
        c.expect_closed()
        a = self.raw()
        self.assertEqual(connect(a, "alice", "wonderland").command, "CONNECTED")
        a.send_frame("SUBSCRIBE", {"id": "s", "destination": "/queue/sneak"})
        a.expect_nothing(0.3)

    def test_refusals_logged_at_warn_naming_user_and_destination(self):
        c = self.raw()
        connect(c, "bob", "builder")
        c.send_frame("SEND", {"destination": "/queue/secret"}, "x")
        c.expect_error_and_close()
        lines = [l for l in self.broker.read_log().splitlines() if "permission denied" in l]
        self.assertEqual(len(lines), 1, lines)
        self.assertIn(" warn: ", lines[0])
        self.assertIn("SEND /queue/secret", lines[0])
        self.assertIn("user bob", lines[0])
        connect(self.raw(), "alice", "nope")
        self.assertRegex(self.broker.read_log(),
                         r" warn: %s 127\.0\.0\.1:\d+: authentication failed for login 'alice'"
                         % harness.TRANSPORT)

    def test_unknown_user_and_no_login_refused(self):
        for login, pw in (("mallory", "x"), (None, None), ("guest", "guest")):
            c = self.raw()
            f = connect(c, login, pw)
            self.assertEqual(f.command, "ERROR", (login, f))
            c.expect_closed()

    def test_bob_reads_topics_only_and_writes_nothing(self):
        c = self.raw()
        self.assertEqual(connect(c, "bob", "builder").command, "CONNECTED")
        c.send_frame("SUBSCRIBE", {"id": "t", "destination": "/topic/news", "receipt": "r"})
        c.expect("RECEIPT")
        c.send_frame("SUBSCRIBE", {"id": "q", "destination": "/queue/secret", "receipt": "r2"})
        f = c.expect_error_and_close()
        self.assertEqual(f["message"], "permission denied")
        self.assertEqual(f["receipt-id"], "r2")
        c = self.raw()
        connect(c, "bob", "builder")
        c.send_frame("SEND", {"destination": "/topic/news"}, "x")
        self.assertEqual(c.expect_error_and_close()["message"], "permission denied")

    def test_bob_can_still_answer_rpc_through_reply_queues(self):
        alice = self.raw()
        connect(alice, "alice", "wonderland")
        bob = self.raw()
        connect(bob, "bob", "builder")
        bob.send_frame("SUBSCRIBE", {"id": "t", "destination": "/topic/req", "receipt": "r"})
        bob.expect("RECEIPT")
        alice.send_frame("SEND", {"destination": "/topic/req", "reply-to": "/temp-queue/a"}, "ping")
        req = bob.expect("MESSAGE")
        bob.send_frame("SEND", {"destination": req["reply-to"]}, "pong")
        self.assertEqual(alice.expect("MESSAGE").body, b"pong")

    def test_stomp_py_with_credentials(self):
        ok = harness.stomp_py(self.broker.port)
        ok.connect("alice", "wonderland", wait=True, headers={"host": "/"})
        self.assertTrue(ok.is_connected())
        ok.disconnect()
        bad = harness.stomp_py(self.broker.port, reconnect_attempts_max=1)
        with self.assertRaises(Exception):
            bad.connect("alice", "nope", wait=True, headers={"host": "/"})
        bad.disconnect()

    def test_ruby_gem_with_credentials(self):
        script = (
            "require 'stomp'\n"
            "def conn(pass) Stomp::Connection.new({hosts: [{login: 'alice', passcode: pass,\n"
            "  host: '127.0.0.1', port: %d, ssl: %s}], reliable: false, connect_timeout: 5}) end\n"
            "c = conn('wonderland')\n"
            "c.publish('/queue/rb-auth', 'hi'); c.subscribe('/queue/rb-auth')\n"
            "m = c.receive; raise 'body' unless m.body == 'hi'; c.disconnect\n"
            "begin\n"
            "  b = conn('x')\n"
            "  raise 'wrong password accepted' if b.connection_frame.command == 'CONNECTED'\n"
            "rescue Stomp::Error::StompServerError, RuntimeError => e\n"
            "  raise if e.message == 'wrong password accepted'\n"
            "end\n"
            "puts 'ok'\n") % (self.broker.port, harness.ruby_ssl())
        r = subprocess.run(["ruby", "-e", script], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ok", r.stdout)


class NoLogin(harness.BrokerTest):
    """No login at all gets its ERROR at once: nothing was guessed, so no
    delay.  The delay is long here (and scaled), so that "at once" is told
    from it by a bound that is generous and still well under it."""
    delay_ms = 10000 * harness.SLOW
    config = "users-file = %s\nallow-anonymous = no\nauth-delay-ms = %d\n" % (USERS, delay_ms)

    def test_no_login_is_told_a_login_is_required(self):
        for version in ("1.0", "1.2"):
            c = harness.RawClient(self.broker.port)
            self.clients.append(c)
            t0 = time.time()
            h = [("accept-version", version)] if version != "1.0" else []
            c.send_frame("CONNECT", h + [("host", "/")])
            f = c.expect_error_and_close(timeout=self.delay_ms / 1000 * 1.5)
            self.assertEqual(f["message"], "login required")
            self.assertIn("login and passcode", f.body.decode())
            self.assertLess(time.time() - t0, self.delay_ms / 1000 / 4,
                            "no delay: nothing was guessed")
        lines = [l for l in self.broker.read_log().splitlines() if "login required" in l]
        self.assertEqual(len(lines), 2)
        self.assertIn(" warn: ", lines[0])


class Open(harness.BrokerTest):
    """allow-anonymous = yes with a users file: known users must get their
    password right; everyone else comes in anonymous (development mode)."""
    config = "users-file = %s\nallow-anonymous = yes\nauth-delay-ms = %d\n" % (USERS, DELAY_MS)

    def test_anonymous_and_unknown_logins_connect(self):
        for login, pw in ((None, None), ("guest", "guest")):
            c = harness.RawClient(self.broker.port)
            self.clients.append(c)
            self.assertEqual(connect(c, login, pw).command, "CONNECTED")

    def test_the_log_says_anonymous_as_the_dashboard_does(self):
        """The connect log line names the login a client was let in as, or
        says anonymous (the admin API's null login, the dashboard's
        "(anonymous)"), with a login given that was not checked."""
        ports = {}
        for login, pw in ((None, None), ("guest", "guest"), ("alice", "wonderland")):
            c = harness.RawClient(self.broker.port)
            self.clients.append(c)
            self.assertEqual(connect(c, login, pw).command, "CONNECTED")
            ports[login] = c.sock.getsockname()[1]
        log = self.broker.read_log()
        line = "127.0.0.1:%d: connected, STOMP 1.2, session eft-%d, %s\n"
        self.assertIn(line % (ports[None], 1, "anonymous"), log)
        self.assertIn(line % (ports["guest"], 2, "anonymous (login 'guest' not in the "
                                                 "users-file)"), log)
        self.assertIn(line % (ports["alice"], 3, "login alice"), log)

    def test_known_user_wrong_password_still_refused(self):
        c = harness.RawClient(self.broker.port)
        self.clients.append(c)
        self.assertEqual(connect(c, "bob", "wrong").command, "ERROR")
        c.expect_closed()


class NoUsersFile(harness.BrokerTest):
    def test_a_login_is_not_checked_and_the_log_says_anonymous(self):
        c = harness.RawClient(self.broker.port)
        self.clients.append(c)
        self.assertEqual(connect(c, "guest", "guest").command, "CONNECTED")
        self.assertIn("127.0.0.1:%d: connected, STOMP 1.2, session eft-1, anonymous (login "
                      "'guest' not checked: no users-file)\n" % c.sock.getsockname()[1],
                      self.broker.read_log())


def example_users():
    with open(USERS) as f:
        return f.read()


def run_eftd(args, cwd=None):
    return subprocess.run([harness.EFTD] + args, capture_output=True, text=True, timeout=10,
                          cwd=cwd, stdin=subprocess.DEVNULL)


@unittest.skipIf(harness.TRANSPORT == "tls", "about config files, not the transport")
class StartupChecks(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="eftd-auth-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def write(self, name, text, mode=0o600):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        return path

    def test_anonymous_off_without_users_file_refuses_to_start(self):
        """A setting that asks for authentication must never mean none."""
        conf = self.write("eftd.conf", "allow-anonymous = no\n")
        r = run_eftd(["-p", "0", "-c", conf])
        self.assertEqual(r.returncode, 1, r.stderr)
        err = r.stderr.strip().splitlines()
        self.assertEqual(len(err), 1, r.stderr)
        self.assertIn("allow-anonymous = no", err[0])
        self.assertIn("users-file", err[0])

    def start(self, conf, cwd=None):
        """eftd -c conf from cwd; returns (broker process, port, log path)."""
        b = harness.Broker(args=["-c", conf])
        b.config_text = None
        if cwd is not None:
            old = os.getcwd()
            os.chdir(cwd)
            try:
                b.start()
            finally:
                os.chdir(old)
        else:
            b.start()
        self.addCleanup(b.finish)
        return b

    def test_users_file_readable_by_others_is_warned_about(self):
        users = self.write("users", example_users(), mode=0o644)
        conf = self.write("eftd.conf", "users-file = %s\n" % users)
        b = self.start(conf)
        self.assertRegex(b.read_log(), r" warn: .*users: the users file is open to group or "
                         r"others \(mode 0644\): chmod 600 it")
        self.assertIn("2 users from", b.read_log())
        os.chmod(users, 0o600)
        b2 = self.start(conf)
        self.assertNotIn("open to group or others", b2.read_log())

    def test_one_user_is_one_user(self):
        alice = [l for l in example_users().splitlines(True) if l.startswith("alice:")][0]
        users = self.write("users", alice)
        b = self.start(self.write("eftd.conf", "users-file = %s\n" % users))
        self.assertIn(" 1 user from %s;" % users, b.read_log())

    def test_relative_users_file_is_beside_the_config_from_any_folder(self):
        """The README's example: users-file = users in etc/eftd.conf means etc/users."""
        self.write("etc/users", example_users())
        conf = self.write("etc/eftd.conf", "users-file = users\nallow-anonymous = no\n"
                          "auth-delay-ms = 0\n")
        elsewhere = tempfile.mkdtemp(prefix="eftd-cwd-")
        self.addCleanup(shutil.rmtree, elsewhere, True)
        for cwd, path in ((self.dir, "etc/eftd.conf"), (elsewhere, conf), ("/", conf)):
            b = self.start(path, cwd=cwd)
            self.assertIn("2 users from %s/etc/users" % os.path.realpath(self.dir), b.read_log())
            c = harness.RawClient(b.port)
            self.assertEqual(connect(c, "alice", "wonderland").command, "CONNECTED")
            c.close()


class BadUsersFile(unittest.TestCase):
    def test_malformed_users_file_is_a_startup_error(self):
        import tempfile
        with tempfile.NamedTemporaryFile("w", suffix=".users", delete=False) as f:
            f.write("alice:notahash\n")
        try:
            cfg = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
            cfg.write("users-file = %s\n" % f.name)
            cfg.close()
            r = subprocess.run([harness.EFTD, "-p", "0", "-c", cfg.name], capture_output=True,
                               text=True, timeout=10)
            self.assertEqual(r.returncode, 1)
            self.assertIn("%s:1:" % f.name, r.stderr)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        finally:
            os.unlink(f.name)
            os.unlink(cfg.name)


if __name__ == "__main__":
    unittest.main()
