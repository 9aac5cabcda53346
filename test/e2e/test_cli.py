"""The eftd command line: flags, --help and --version, start-up failures
reported in one clear line with exit code 1, the config file, clean exit on
SIGTERM and SIGINT, and listening on IPv6 loopback."""

import os
import re
import select
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import harness
from harness import BrokerTest, Broker, RawClient, EFTD, ROOT, SLOW, frame
from harness import eftd_has_read, expect_receipt, open_socket, wait_for
from test_admin import scrape


def run_eftd(*args, timeout=5):
    """Run eftd to completion (it is expected to exit by itself)."""
    try:
        return subprocess.run([EFTD] + list(args), capture_output=True, text=True,
                              timeout=timeout * SLOW, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("eftd %s did not exit within %ss" % (" ".join(args), timeout)) from e


def lines(text):
    return [l for l in text.splitlines() if l.strip()]


def open_connections(admin_port):
    """Client connections eftd has open, from /metrics on its admin listener."""
    return sum(v for k, v in scrape(admin_port).items() if k.startswith("eft_connections{"))


def have_ipv6_loopback():
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@unittest.skipIf(harness.TRANSPORT == "tls", "about the command line and the tcp shorthand flags")
class CliTest(BrokerTest):

    def write_config(self, text):
        fd, path = tempfile.mkstemp(prefix="eftd-test-", suffix=".conf")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        self.addCleanup(os.unlink, path)
        return path

    def assert_one_line_failure(self, r, *needles):
        self.assertEqual(r.returncode, 1, "exit code; stderr: %r" % r.stderr)
        err = lines(r.stderr)
        self.assertEqual(len(err), 1, "expected one line on stderr, got %r" % r.stderr)
        for n in needles:
            self.assertIn(n, err[0])
        return err[0]

    # ---- help and version ----

    def test_help(self):
        for flag in ("--help", "-h"):
            r = run_eftd(flag)
            self.assertEqual(r.returncode, 0, r.stderr)
            for opt in ("-b", "--bind", "-p", "--port", "-c", "--config",
                        "-l", "--log-level", "-V", "--version"):
                self.assertRegex(r.stdout, r"(^|[\s,])%s\b" % re.escape(opt),
                                 "--help does not document %s" % opt)
            self.assertEqual(r.stderr, "")

    def test_version(self):
        for flag in ("-V", "--version"):
            r = run_eftd(flag)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(len(lines(r.stdout)), 1, r.stdout)
            self.assertRegex(r.stdout, r"\d+\.\d+(\.\d+)?")

    # ---- bad command lines ----

    def test_unknown_long_flag(self):
        r = run_eftd("--bogus")
        self.assert_one_line_failure(r, "--bogus")

    def test_unknown_short_flag(self):
        r = run_eftd("-x")
        self.assert_one_line_failure(r, "x")

    def test_flag_missing_its_argument(self):
        r = run_eftd("-p")
        self.assert_one_line_failure(r)

    def test_unexpected_argument(self):
        r = run_eftd("extra")
        self.assert_one_line_failure(r, "extra")

    def test_bad_port(self):
        for port in ("99999", "http", "-1"):
            with self.subTest(port=port):
                self.assert_one_line_failure(run_eftd("-p", port), port)

    def test_bad_log_level(self):
        self.assert_one_line_failure(run_eftd("-l", "loud"), "loud")

    def test_port_in_use(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            port = s.getsockname()[1]
            r = run_eftd("-b", "127.0.0.1", "-p", str(port))
        line = self.assert_one_line_failure(r, str(port))
        self.assertIn("in use", line.lower())

    # ---- config file ----

    def test_missing_config_file(self):
        path = "/nonexistent/eftd-%d.conf" % os.getpid()
        line = self.assert_one_line_failure(run_eftd("-c", path), path)
        self.assertIn("No such file", line)

    def test_config_file_is_a_directory(self):
        d = tempfile.mkdtemp(prefix="eftd-test-")
        self.addCleanup(os.rmdir, d)
        self.assert_one_line_failure(run_eftd("-c", d, "-p", "0"), d)

    def test_config_bad_key_names_file_and_line(self):
        path = self.write_config("# settings\nmax-headers = 100\n\nno-such-key = 1\n")
        line = self.assert_one_line_failure(run_eftd("-c", path, "-p", "0"), "%s:4" % path)
        self.assertIn("no-such-key", line)

    def test_config_bad_value_names_file_and_line(self):
        path = self.write_config("max-frame-size = lots\n")
        self.assert_one_line_failure(run_eftd("-c", path, "-p", "0"), "%s:1" % path, "lots")

    def test_config_line_without_equals(self):
        path = self.write_config("max-headers = 10\nport 61613\n")
        self.assert_one_line_failure(run_eftd("-c", path, "-p", "0"), "%s:2" % path)

    def test_config_key_given_twice_names_both_lines(self):
        path = self.write_config("port = 1\nmax-headers = 10\n\n# again\nmax-headers = 20\n")
        line = self.assert_one_line_failure(run_eftd("-c", path), "%s:5" % path)
        self.assertIn("'max-headers' is given twice, on lines 2 and 5", line)

    def test_port_flag_replaces_the_files_stomp_listeners(self):
        """README: flags override the config.  -p/-b replace the file's STOMP
        listeners (as -L replaces its listeners); its admin listener stays."""
        stomp_port, admin_port = harness.free_port(), harness.free_port()
        # (the ws line shares the tcp line's port: eftd would refuse it if it were kept)
        b = Broker(config="listen = tcp://127.0.0.1:%d\nlisten = ws://127.0.0.1:%d/ws\n"
                   "listen = http://127.0.0.1:%d\n" % (stomp_port, stomp_port, admin_port))
        with b:
            c = RawClient(b.port)  # -b 127.0.0.1 -p PORT, from the harness
            c.connect()
            c.close()
            with self.assertRaises(ConnectionRefusedError):
                socket.create_connection(("127.0.0.1", stomp_port), 2).close()
            with socket.create_connection(("127.0.0.1", admin_port), 2 * SLOW) as s:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          b"Connection: close\r\n\r\n")
                s.settimeout(5 * SLOW)
                self.assertTrue(s.recv(100).startswith(b"HTTP/1.1 200"))
            self.assertIn("listening on tcp://127.0.0.1:%d" % b.port, b.read_log())
            self.assertNotIn("listening on ws://", b.read_log())

    def test_port_and_listen_flags_together_name_the_flags(self):
        line = self.assert_one_line_failure(run_eftd("-p", "0", "-L", "tcp://127.0.0.1:0"),
                                            "--port", "--listen")
        self.assertNotIn(".conf", line)

    def test_listen_line_twice_names_both_lines(self):
        port = harness.free_port()
        path = self.write_config("listen = tcp://127.0.0.1:%d\n# again\n"
                                 "listen = tcp://127.0.0.1:%d\n" % (port, port))
        line = self.assert_one_line_failure(run_eftd("-c", path))
        self.assertEqual(line, "eftd: %s: listen = tcp://127.0.0.1:%d is given twice, on lines "
                         "1 and 3: keep one" % (path, port))
        path = self.write_config("listen = tcp://127.0.0.1:%d\n"
                                 "listen = http://127.0.0.1:%d\n" % (port, port))
        line = self.assert_one_line_failure(run_eftd("-c", path))
        self.assertIn("listen = tcp://127.0.0.1:%d (line 1) and listen = http://127.0.0.1:%d "
                      "(line 2) are on the same address and port" % (port, port), line)
        self.assertNotIn("in use", line)

    def test_contradicting_limits_name_both(self):
        cases = (
            ("max-frame-size = 1m\nmax-body-size = 2m\n",
             ("max-body-size (2m, line 2)", "max-frame-size (1m, line 1)")),
            ("max-body-size = 32m\n", ("max-body-size (32m, line 1)",
                                        "max-frame-size (17m, the default)")),
            ("max-output = 1m\noutput-high-water = 1m\n",
             ("output-high-water (1m, line 2)", "max-output (1m, line 1)")),
        )
        for text, needles in cases:
            with self.subTest(text=text):
                path = self.write_config(text)
                self.assert_one_line_failure(run_eftd("-c", path, "-p", "0"), path, *needles)

    def test_config_with_every_key_is_accepted(self):
        text = ("# a full config\n\n"
                "bind = 127.0.0.1\n"
                "port = 1\n"                      # the -p the harness passes wins
                "log-level = warn   # trailing comment\n"
                "max-frame-size = 2m\n"
                "max-headers = 500\n"
                "max-header-line = 16k\n"
                "heartbeat-min-ms = 250\n"
                "output-high-water = 1m\n")
        b = Broker(config=text).start()
        try:
            c = RawClient(b.port)
            f = c.connect(headers={"heart-beat": "0,10"})
            self.assertEqual(f["heart-beat"].split(",")[0], "250")
            c.close()
        finally:
            b.finish()  # a clean stop: exit 0, no sanitizer or valgrind report

    def test_shipped_config_is_accepted(self):
        path = os.path.join(ROOT, "etc", "eftd.conf")
        if not os.path.exists(path):
            self.skipTest("no etc/eftd.conf")
        b = Broker(args=["-c", path]).start()
        try:
            c = RawClient(b.port)
            c.connect()
            c.send_frame("SEND", [("destination", "/queue/x"), ("receipt", "r")], "x")
            expect_receipt(c, "r")
            c.close()
        finally:
            b.finish()  # a clean stop: exit 0, no sanitizer or valgrind report

    def test_policies_and_their_keys_are_accepted(self):
        text = ("queue-overflow = drop-head\n"
                "message-ttl = 60000\n"
                "max-redeliveries = 5\n"
                "dead-letter-queue = /queue/dead\n"
                "policy = /queue/orders.> max-queue-messages=100 "
                "dead-letter-queue=/queue/orders.dlq\n"
                "policy = /topic/* message-ttl=0 queue-overflow=block   # a comment\n")
        b = Broker(config=text, args=["--policy", "/queue/x.* max-redeliveries=1",
                                      "--policy", "/temp-queue/> max-queue-bytes=1m"]).start()
        try:
            c = RawClient(b.port)
            c.connect()
            c.send_frame("SEND", [("destination", "/queue/orders.new"), ("receipt", "r")], "x")
            expect_receipt(c, "r")
            c.close()
        finally:
            b.finish()  # a clean stop: exit 0, no sanitizer or valgrind report

    def test_bad_policy_line_names_file_and_line(self):
        cases = (
            ("policy = /queue/a nope=1\n", "policy /queue/a: 'nope' is not a policy key"),
            ("policy = /queue/a message-ttl=1 message-ttl=2\n",
             "policy /queue/a: 'message-ttl' is given twice"),
            ("policy = /queue/a max-redeliveries=lots\n",
             "policy /queue/a: max-redeliveries: 'lots' is not a number from 0 to 1000000"),
            ("policy = /queue/a\n", "policy /queue/a: no key=value settings"),
            ("policy = /queue/a* message-ttl=1\n", "policy: pattern '/queue/a*' has '*' or '>'"),
            ("dead-letter-queue = /topic/d\n", "dead-letter-queue: '/topic/d' is not /queue/NAME"),
            ("queue-overflow = reject\n", "queue-overflow: 'reject' is not block or drop-head"),
        )
        for text, needle in cases:
            with self.subTest(text=text):
                path = self.write_config("max-headers = 100\n" + text)
                self.assert_one_line_failure(run_eftd("-c", path, "-p", "0"),
                                             "%s:2: " % path, needle)

    def test_bad_policy_flag(self):
        r = run_eftd("-p", "0", "--policy", "/queues/a message-ttl=1")
        self.assert_one_line_failure(r, "--policy", "pattern '/queues/a' does not start with")
        self.assert_one_line_failure(run_eftd("-p", "0", "--policy", "/queue/a message-ttl"),
                                     "'message-ttl' is not key=value")
        self.assert_one_line_failure(run_eftd("-p", "0", "--policy"), "--policy")

    def test_help_documents_policy(self):
        r = run_eftd("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--policy 'PATTERN KEY=VALUE ...'", r.stdout)

    # ---- logging ----

    def test_log_level_error_is_quiet(self):
        # an admin listener to see the close handled (nothing is logged for it)
        b = Broker(args=["-l", "error"],
                   listen=[(harness.TRANSPORT, "127.0.0.1"), ("http", "127.0.0.1")]).start()
        try:
            c = RawClient(b.port)
            c.connect()
            c.close()
            wait_for(lambda: open_connections(b.ports[1]) == 0, 5, "eftd to handle the close")
            b.stop()
            log = b.read_log()
        finally:
            b.finish()
        self.assertEqual(log.strip(), "", "-l error should log nothing here")

    def test_port_0_picks_a_port_and_logs_it(self):
        p = subprocess.Popen([EFTD, "-b", "127.0.0.1", "-p", "0"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            deadline = time.time() + 5 * SLOW
            out = b""
            port = None
            while port is None and time.time() < deadline:
                ready, _, _ = select.select([p.stderr], [], [], 0.1)
                if ready:
                    chunk = os.read(p.stderr.fileno(), 4096)
                    if not chunk:
                        break
                    out += chunk
                    m = re.search(rb"listening on tcp://127\.0\.0\.1:(\d+)", out)
                    if m:
                        port = int(m.group(1))
            self.assertIsNotNone(port, "no port in the log: %r" % out)
            self.assertNotEqual(port, 0)
            c = RawClient(port)
            c.connect()
            c.close()
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=5 * SLOW)
            harness.check_exit(rc, (out + p.stderr.read()).decode("utf-8", "replace"))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stderr.close()

    def test_log_names_peer_for_open_error_and_close(self):
        c = RawClient(self.broker.port)
        self.clients.append(c)
        peer = "127.0.0.1:%d" % c.sock.getsockname()[1]
        c.connect()
        c.send(b"SEND\ndestination:/nowhere/x\n\nx\0")
        c.expect_error_and_close()
        wait_for(lambda: peer + ": connection closed" in self.broker.read_log(), 5, "the close")
        mine = [l for l in self.broker.read_log().splitlines() if peer in l]
        self.assertTrue([l for l in mine if "open" in l], mine)
        self.assertTrue([l for l in mine if "error" in l and "destination" in l], mine)
        self.assertTrue([l for l in mine if "closed" in l], mine)

    # ---- signals ----

    def busy_broker(self):
        """Clients holding queued, unacked and in-transaction messages, and a half frame."""
        port = self.broker.port
        p = RawClient(port)
        self.clients.append(p)
        p.connect()
        for i in range(50):
            p.send_frame("SEND", [("destination", "/queue/held")], "q%d" % i)
        p.send_frame("SEND", [("destination", "/queue/unacked"), ("content-length", "4096")],
                     b"u" * 4096)
        p.send(b"BEGIN\ntransaction:t\n\n\0")
        p.send_frame("SEND", [("destination", "/queue/held"), ("transaction", "t")], "in tx")
        p.send_frame("SEND", [("destination", "/queue/held"), ("receipt", "p")], "last")
        expect_receipt(p, "p")
        c = RawClient(port)
        self.clients.append(c)
        c.connect()
        c.send(b"SUBSCRIBE\ndestination:/queue/unacked\nid:0\nack:client\n\n\0")
        c.expect("MESSAGE")
        t = RawClient(port)
        self.clients.append(t)
        t.connect()
        t.send(b"SUBSCRIBE\ndestination:/topic/t\nid:0\nreceipt:s\n\n\0")
        expect_receipt(t, "s")
        h = RawClient(port)
        self.clients.append(h)
        h.connect()
        h.send(b"SEND\ndestination:/queue/held\ncontent-length:1000\n\nhalf")
        silent = RawClient(port)  # and one that never sent anything
        gone = "127.0.0.1:%d: connection closed" % silent.sock.getsockname()[1]
        silent.close()
        wait_for(lambda: eftd_has_read(h.sock), 5, "eftd to read the half frame")
        wait_for(lambda: gone in self.broker.read_log(), 5, "eftd to see the silent one go")

    def stop_with(self, sig):
        self.broker.proc.send_signal(sig)
        self.broker.ended(timeout=5)  # exit 0, no sanitizer or valgrind report

    def test_sigterm_exits_0(self):
        self.stop_with(signal.SIGTERM)

    def test_sigint_exits_0(self):
        self.stop_with(signal.SIGINT)

    def test_sigterm_with_clients_and_messages_exits_0(self):
        self.busy_broker()
        self.stop_with(signal.SIGTERM)

    def test_sigint_with_clients_and_messages_exits_0(self):
        self.busy_broker()
        self.stop_with(signal.SIGINT)

    def test_clients_see_the_connection_close_on_shutdown(self):
        c = RawClient(self.broker.port)
        self.clients.append(c)
        c.connect()
        self.stop_with(signal.SIGTERM)
        c.expect_closed(timeout=2 * SLOW)

    # ---- IPv6 ----

    def test_bind_ipv6_loopback(self):
        if not have_ipv6_loopback():
            self.skipTest("no IPv6 loopback")
        b = Broker(bind="::1").start()
        try:
            r = RawClient(b.port, host="::1")
            r.connect()
            r.send(b"SUBSCRIBE\ndestination:/queue/v6\nid:0\nreceipt:s\n\n\0")
            expect_receipt(r, "s")
            p = RawClient(b.port, host="::1")
            p.connect()
            p.send(frame("SEND", [("destination", "/queue/v6")], "over v6"))
            self.assertEqual(r.expect("MESSAGE").body, b"over v6")
            r.close()
            p.close()
            # and only there: not on IPv4 loopback
            with self.assertRaises(OSError):
                open_socket(b.port, timeout=1).close()
        finally:
            b.finish()  # a clean stop: exit 0, no sanitizer or valgrind report

    def test_bind_ipv6_in_brackets(self):
        if not have_ipv6_loopback():
            self.skipTest("no IPv6 loopback")
        b = Broker(bind="::1", args=["-b", "[::1]"]).start()   # the later -b wins
        try:
            c = RawClient(b.port, host="::1")
            c.connect()
            c.close()
        finally:
            b.finish()  # a clean stop: exit 0, no sanitizer or valgrind report

    def test_bind_localhost_by_name(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        p = subprocess.Popen([EFTD, "-b", "localhost", "-p", str(port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        try:
            hosts = ["127.0.0.1"] + (["::1"] if have_ipv6_loopback() else [])
            deadline = time.time() + 5 * SLOW
            c = None
            while c is None:
                for h in hosts:
                    try:
                        c = RawClient(port, host=h)
                        break
                    except OSError:
                        pass
                if c is None:
                    if time.time() > deadline or p.poll() is not None:
                        self.fail("eftd -b localhost is not listening on loopback; rc %r" % p.poll())
                    time.sleep(0.02)
            c.connect()
            c.close()
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=5 * SLOW)
            harness.check_exit(rc, p.stderr.read().decode("utf-8", "replace"))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stderr.close()

    def test_bind_ipv6_loopback_long_flag(self):
        if not have_ipv6_loopback():
            self.skipTest("no IPv6 loopback")
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
            port = s.getsockname()[1]
        p = subprocess.Popen([EFTD, "--bind", "::1", "--port", str(port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL)
        try:
            deadline = time.time() + 5 * SLOW
            while True:
                try:
                    c = RawClient(port, host="::1")
                    break
                except OSError:
                    if time.time() > deadline or p.poll() is not None:
                        raise
                    time.sleep(0.02)
            c.connect()
            c.close()
            p.send_signal(signal.SIGINT)
            rc = p.wait(timeout=5 * SLOW)
            harness.check_exit(rc, p.stderr.read().decode("utf-8", "replace"))
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            p.stderr.close()


if __name__ == "__main__":
    unittest.main()
