"""Listeners and TLS (issue 10): several listeners at once, real clients over
TLS, mutual TLS, the wrong protocol on either kind of port, handshake abuse,
slow TLS consumers, close_notify at shutdown, and start-up errors.

(The whole suite also runs over TLS: test/run sets EFT_TRANSPORT=tls.  These
tests manage their own listeners, so they run once, in the tcp pass.)"""

import os
import random
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import time
import unittest

import harness
from clientscript import HAVE_RUBY_STOMP, HAVE_STOMP_PY, RUBY, TIMEOUT
from harness import RawClient, SLOW, certs, expect_receipt, subscribe, wait_for

def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def tls_client(port, context=None, host="127.0.0.1", connect="1.2"):
    c = RawClient(port, host=host, tls=True, context=context)
    if connect:
        try:
            c.connect(connect)
        except BaseException:
            c.close()
            raise
    return c


def plain_client(port, connect="1.2"):
    c = RawClient(port, tls=False)
    if connect:
        c.connect(connect)
    return c


def log_lines(broker, text):
    return [l for l in broker.read_log().splitlines() if text in l]


@unittest.skipIf(harness.TRANSPORT == "tls", "manages its own listeners: runs in the tcp pass")
class TlsTest(harness.BrokerTest):
    listen = (("tcp", "127.0.0.1"), ("tls", "127.0.0.1"))
    args = ("-l", "debug")

    def keep(self, c):
        self.clients.append(c)
        return c

    @property
    def tcp_port(self):
        return self.broker.ports[0]

    @property
    def tls_port(self):
        return self.broker.ports[1]


class ListenersTest(TlsTest):
    # Well past what a test waits for a refusal "at once" (3 s x SLOW): one
    # that waited for connect-timeout-ms fails it.
    config = "connect-timeout-ms = %d\n" % (20000 * SLOW)

    def test_message_crosses_listeners(self):
        tls = self.keep(tls_client(self.tls_port))
        tcp = self.keep(plain_client(self.tcp_port))
        subscribe(tls, "/queue/across")
        tcp.send_frame("SEND", [("destination", "/queue/across"), ("receipt", "r")], "tcp to tls")
        expect_receipt(tcp, "r")
        self.assertEqual(tls.expect("MESSAGE").body, b"tcp to tls")
        subscribe(tcp, "/topic/back")
        tls.send_frame("SEND", [("destination", "/topic/back")], "tls to tcp")
        self.assertEqual(tcp.expect("MESSAGE").body, b"tls to tcp")

    def test_start_up_log_and_connection_lines_name_the_listener(self):
        log = self.broker.read_log()
        for i in range(2):
            self.assertIn("listening on %s" % self.broker.url(i), log)
        tls = self.keep(tls_client(self.tls_port))
        port = tls.sock.getsockname()[1]
        tls.send_frame("DISCONNECT", [("receipt", "bye")])
        expect_receipt(tls, "bye")
        tls.expect_closed()
        wait_for(lambda: log_lines(self.broker, "tls 127.0.0.1:%d: connection closed" % port), 5,
                 "the close")
        self.assertTrue(log_lines(self.broker, "tls 127.0.0.1:%d: connection open on %s"
                                  % (port, self.broker.url(1))))
        self.assertTrue(log_lines(self.broker, "tls 127.0.0.1:%d: connected, STOMP 1.2" % port))

    def test_plain_client_on_the_tls_port(self):
        c = self.keep(RawClient(self.tls_port, tls=False))
        port = c.sock.getsockname()[1]
        c.send(harness.frame("CONNECT", [("accept-version", "1.2")]))
        c.expect_closed(timeout=5)  # nothing but the end: there is no TLS to speak in
        wait_for(lambda: log_lines(self.broker, "TLS handshake failed"), 5, "the log line")
        lines = log_lines(self.broker, "TLS handshake failed")
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("tls 127.0.0.1:%d: " % port, lines[0])
        self.keep(tls_client(self.tls_port))  # and TLS clients are served as before

    def test_tls_client_on_the_plain_port(self):
        t0 = time.time()
        with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
            tls_client(self.tcp_port, connect=None).close()
        self.assertLess(time.time() - t0, 3 * SLOW, "the TLS client must not be left waiting")
        wait_for(lambda: log_lines(self.broker, "not STOMP: a TLS handshake"), 5, "the log line")
        self.keep(plain_client(self.tcp_port))

    def test_handshake_garbage(self):
        rng = random.Random(7)
        for i in range(20):
            s = harness.open_socket(self.tls_port, tls=False)
            junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 600)))
            if i % 2:
                junk = b"\x16\x03\x01" + junk  # a record header, then nonsense
            try:
                s.sendall(junk)
                s.settimeout(5 * SLOW)
                while s.recv(4096):
                    pass
            except (ConnectionResetError, socket.timeout):
                pass
            s.close()
        c = self.keep(tls_client(self.tls_port))
        c.send_frame("SEND", [("destination", "/queue/after"), ("receipt", "r")], "fine")
        expect_receipt(c, "r")

    def test_1000_connections_dropped_mid_handshake(self):
        """Half send part of a ClientHello, half nothing; all are dropped,
        half with FIN and half with RST; then eftd serves TLS as before."""
        n = 1000
        socks = []
        hello = ssl_client_hello()
        for i in range(n):
            s = harness.open_socket(self.tls_port, tls=False)
            if i % 2:
                s.sendall(hello[:1 + i % (len(hello) - 1)])
            socks.append(s)
        ports = [s.getsockname()[1] for s in socks]
        for i, s in enumerate(socks):
            if i % 4 < 2:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        closed = lambda: sum(1 for p in ports if log_lines(self.broker, "tls 127.0.0.1:%d: "
                                                                        "connection closed" % p))
        wait_for(lambda: closed() == n, 20, "eftd to close all %d" % n)
        c = self.keep(tls_client(self.tls_port))
        c.send_frame("SEND", [("destination", "/queue/after"), ("receipt", "r")], "fine")
        expect_receipt(c, "r")


def ssl_client_hello():
    """The first bytes a real TLS client sends (a ClientHello), captured from
    Python's ssl over a socket pair."""
    a, b = socket.socketpair()
    try:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        t = ctx.wrap_socket(a, do_handshake_on_connect=False)
        t.setblocking(False)
        try:
            t.do_handshake()
        except ssl.SSLWantReadError:
            pass
        b.settimeout(5)
        hello = b.recv(4096)
        t.close()
        return hello
    finally:
        a.close()
        b.close()


class HandshakeTimeoutTest(TlsTest):
    config = "connect-timeout-ms = 500\n"

    def test_silent_client_closed_at_connect_timeout(self):
        s = harness.open_socket(self.tls_port, tls=False)
        port = s.getsockname()[1]
        t0 = time.time()
        s.settimeout(5 * SLOW)
        self.assertEqual(s.recv(100), b"")
        self.assertLess(time.time() - t0, 3 * SLOW)
        s.close()
        wait_for(lambda: log_lines(self.broker, "tls 127.0.0.1:%d: tls handshake not finished "
                                               "within 500 ms" % port), 5, "the log line")


class MutualTlsTest(TlsTest):
    listen = (("tls", "127.0.0.1"),)

    @property
    def config(self):
        return "tls-ca-file = %s\ntls-verify-client = yes\n" % certs().ca

    def test_client_with_a_certificate_from_the_ca(self):
        ctx = certs().context(certs().client, certs().client_key)
        c = self.keep(tls_client(self.broker.port, context=ctx))
        c.send_frame("SEND", [("destination", "/queue/m"), ("receipt", "r")], "x")
        expect_receipt(c, "r")

    def test_clients_without_or_with_another_certificate_refused(self):
        for who, ctx in (("none", certs().context()),
                         ("stranger", certs().context(certs().stranger, certs().stranger_key))):
            with self.subTest(who=who):
                with self.assertRaises((ssl.SSLError, ConnectionError, harness.Closed)):
                    # TLS 1.3 reports the refusal on the first read
                    tls_client(self.broker.port, context=ctx)
        wait_for(lambda: len(log_lines(self.broker, "TLS handshake failed")) >= 2, 5,
                 "two refusals logged")
        lines = log_lines(self.broker, "TLS handshake failed")
        self.assertIn("certificate", " ".join(lines))


class MinVersionTest(TlsTest):
    listen = (("tls", "127.0.0.1"),)
    config = "tls-min-version = 1.3\n"

    def test_tls_12_client_refused_13_accepted(self):
        ctx = certs().context()
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        with self.assertRaises((ssl.SSLError, ConnectionError)):
            tls_client(self.broker.port, context=ctx)
        c = self.keep(tls_client(self.broker.port))
        self.assertEqual(c.sock.version(), "TLSv1.3")


class SlowTlsConsumerTest(TlsTest):
    listen = (("tls", "127.0.0.1"),)
    config = "max-output = 1m\noutput-high-water = 64k\n"

    def test_topic_subscriber_that_does_not_read_is_cut_off(self):
        stuck = self.keep(RawClient(self.broker.port, tls=True,
                                    sockopts=[(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)]))
        stuck.connect()
        port = stuck.sock.getsockname()[1]
        subscribe(stuck, "/topic/flood")
        p = self.keep(tls_client(self.broker.port))
        body = b"z" * 16384
        deadline = time.time() + 20 * SLOW
        i = 0
        while not log_lines(self.broker, "%d: slow consumer" % port) and time.time() < deadline:
            p.send_frame("SEND", [("destination", "/topic/flood")], body)
            i += 1
            if i % 64 == 0:
                p.send_frame("SEND", [("destination", "/queue/sync"), ("receipt", str(i))], "")
                expect_receipt(p, str(i))
        line = log_lines(self.broker, "%d: slow consumer" % port)
        self.assertTrue(line, "the stuck TLS subscriber was never cut off")
        self.assertIn("max-output 1048576", line[0])


class ShutdownTest(TlsTest):
    listen = (("tls", "127.0.0.1"),)

    def test_sigterm_error_then_close_notify(self):
        ctx = certs().context()
        s = harness.open_socket(self.broker.port, tls=False)
        # suppress_ragged_eofs=False: an end without close_notify would raise.
        t = ctx.wrap_socket(s, server_hostname="127.0.0.1", suppress_ragged_eofs=False)
        t.sendall(harness.frame("CONNECT", [("accept-version", "1.2")]))
        t.settimeout(5 * SLOW)
        buf = b""
        while b"\0" not in buf:
            buf += t.recv(4096)
        self.assertTrue(buf.startswith(b"CONNECTED"))
        self.broker.proc.send_signal(signal.SIGTERM)
        data = b""
        while True:
            chunk = t.recv(4096)  # b"" only on close_notify
            if not chunk:
                break
            data += chunk
        self.assertIn(b"message:server shutting down", data)
        t.close()
        self.broker.ended()  # exit 0, no sanitizer or valgrind report


@unittest.skipIf(harness.TRANSPORT == "tls", "manages its own listeners: runs in the tcp pass")
class RealClientsTest(TlsTest):
    listen = (("tls", "127.0.0.1"),)

    @unittest.skipUnless(HAVE_STOMP_PY, "stomp.py not available")
    def test_stomp_py_set_ssl(self):
        import stomp
        got = []

        class Listener(stomp.ConnectionListener):
            def on_message(self, frame):
                got.append(frame.body)

        c = stomp.Connection12([("127.0.0.1", self.broker.port)], reconnect_attempts_max=1)
        c.set_ssl(for_hosts=[("127.0.0.1", self.broker.port)], ca_certs=certs().ca)
        c.set_listener("l", Listener())
        c.connect(wait=True, headers={"host": "/"})
        c.subscribe("/queue/py-tls", id="1")
        c.send("/queue/py-tls", "over tls", headers={"receipt": "r"})
        wait_for(lambda: got, 5, "the message")
        self.assertEqual(got, ["over tls"])
        c.disconnect()

    @unittest.skipUnless(HAVE_RUBY_STOMP, "ruby with the stomp gem not available")
    def test_ruby_gem_ssl_params(self):
        script = (
            "require 'stomp'\n"
            "ssl = Stomp::SSLParams.new(ts_files: '%s')\n"
            "c = Stomp::Connection.new({hosts: [{host: '127.0.0.1', port: %d, ssl: ssl}],\n"
            "  reliable: false, connect_timeout: 5,\n"
            "  connect_headers: {'accept-version' => '1.2', 'host' => '/'}})\n"
            "c.subscribe('/queue/rb-tls', id: '1')\n"
            "c.publish('/queue/rb-tls', 'over tls')\n"
            "m = c.receive\n"
            "raise \"got #{m.command} #{m.body}\" unless m.body == 'over tls'\n"
            "c.disconnect\n"
            "puts 'ok'\n") % (certs().ca, self.broker.port)
        r = subprocess.run([RUBY, "-e", script], capture_output=True, text=True, timeout=TIMEOUT,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ok", r.stdout)


@unittest.skipIf(harness.TRANSPORT == "tls", "about start-up: runs in the tcp pass")
class TlsStartupTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="eftd-tls-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def run_eftd(self, config, *args):
        path = os.path.join(self.dir, "eftd.conf")
        with open(path, "w") as f:
            f.write(config)
        r = subprocess.run([harness.EFTD, "-c", path] + list(args), capture_output=True,
                           text=True, timeout=10 * SLOW, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 1, "eftd started: %r" % (r.stdout + r.stderr))
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, r.stderr)
        return lines[0]

    def test_tls_listener_without_certificate(self):
        line = self.run_eftd("listen = tls://127.0.0.1:0\n")
        self.assertIn("tls-cert-file", line)
        self.assertIn("tls-key-file", line)

    def test_unreadable_certificate_or_key(self):
        """The OS's reason and the setting that names the file, with its line
        (it was OpenSSL's "system lib")."""
        missing = os.path.join(self.dir, "missing.pem")
        conf = os.path.join(self.dir, "eftd.conf")
        c = certs()
        line = self.run_eftd("listen = tls://127.0.0.1:0\ntls-cert-file = %s\ntls-key-file = %s\n"
                             % (missing, c.server_key))
        self.assertEqual(line, "eftd: %s:2: tls-cert-file %s: No such file or directory"
                         % (conf, missing))
        line = self.run_eftd("listen = tls://127.0.0.1:0\ntls-cert-file = %s\ntls-key-file = %s\n"
                             % (c.server, missing))
        self.assertEqual(line, "eftd: %s:3: tls-key-file %s: No such file or directory"
                         % (conf, missing))
        line = self.run_eftd("listen = tls://127.0.0.1:0\ntls-cert-file = %s\ntls-key-file = %s\n"
                             "tls-ca-file = %s\n" % (c.server, c.server_key, self.dir))
        self.assertEqual(line, "eftd: %s:4: tls-ca-file %s: Is a directory" % (conf, self.dir))

    def test_swapped_or_wrong_kind_of_file(self):
        """Each says what the file holds (it was OpenSSL's "PEM lib")."""
        c = certs()
        conf = os.path.join(self.dir, "eftd.conf")
        line = self.run_eftd("listen = tls://127.0.0.1:0\ntls-cert-file = %s\ntls-key-file = %s\n"
                             % (c.server_key, c.server))
        self.assertEqual(line, "eftd: %s: tls-cert-file %s holds a private key and tls-key-file "
                         "%s a certificate: the two are swapped" % (conf, c.server_key, c.server))
        line = self.run_eftd("listen = tls://127.0.0.1:0\ntls-cert-file = %s\ntls-key-file = %s\n"
                             % (c.server, c.server))
        self.assertIn("tls-key-file %s holds a certificate, not a private key" % c.server, line)
        junk = os.path.join(self.dir, "junk.pem")
        with open(junk, "w") as f:
            f.write("not PEM\n")
        line = self.run_eftd("listen = tls://127.0.0.1:0\ntls-cert-file = %s\ntls-key-file = %s\n"
                             % (junk, c.server_key))
        self.assertIn("tls-cert-file %s holds no PEM certificate" % junk, line)
        encrypted = os.path.join(self.dir, "encrypted.key")
        harness.Certs._run("pkey", "-in", c.server_key, "-aes256", "-passout", "pass:secret", "-out",
                   encrypted)
        line = self.run_eftd("listen = tls://127.0.0.1:0\ntls-cert-file = %s\ntls-key-file = %s\n"
                             % (c.server, encrypted))
        self.assertIn("tls-key-file %s is encrypted" % encrypted, line)

    def test_key_that_does_not_match(self):
        c = certs()
        line = self.run_eftd("listen = tls://127.0.0.1:0\ntls-cert-file = %s\ntls-key-file = %s\n"
                             % (c.server, c.client_key))
        self.assertEqual(line, "eftd: tls-key-file: %s does not match tls-cert-file %s"
                         % (c.client_key, c.server))
        # a key of another type (RSA for an EC certificate): the same words
        rsa = os.path.join(self.dir, "rsa.key")
        harness.Certs._run("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", rsa)
        line = self.run_eftd("listen = tls://127.0.0.1:0\ntls-cert-file = %s\ntls-key-file = %s\n"
                             % (c.server, rsa))
        self.assertEqual(line, "eftd: tls-key-file: %s does not match tls-cert-file %s"
                         % (rsa, c.server))

    def test_verify_client_needs_a_ca(self):
        c = certs()
        line = self.run_eftd("listen = tls://127.0.0.1:0\ntls-cert-file = %s\ntls-key-file = %s\n"
                             "tls-verify-client = yes\n" % (c.server, c.server_key))
        self.assertIn("tls-ca-file", line)

    def test_bad_listen_urls(self):
        for url, needle in (("https://127.0.0.1:1", "tcp://, tls://, ws://, wss:// or http://"),
                            ("http://127.0.0.1:1/admin", "only ws:// and wss://"),
                            ("tcp://127.0.0.1", "HOST:PORT"),
                            ("tcp://127.0.0.1:5000/ws", "only ws:// and wss://"),
                            ("ws://127.0.0.1:5000/a b", "path"),
                            ("ws://127.0.0.1/ws", "HOST:PORT[/PATH]"),
                            ("tcp://::1:5000", "brackets"),
                            ("tcp://127.0.0.1:70000", "PORT")):
            with self.subTest(url=url):
                self.assertIn(needle, self.run_eftd("listen = %s\n" % url))

    def test_listen_with_bind_is_a_mistake(self):
        line = self.run_eftd("listen = tcp://127.0.0.1:0\nbind = 127.0.0.1\n")
        self.assertIn("bind", line)
        self.assertIn("listen", line)

    def test_address_in_use_names_the_listener(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            port = s.getsockname()[1]
            line = self.run_eftd("", "-L", "tcp://127.0.0.1:0", "-L", "tcp://127.0.0.1:%d" % port)
        self.assertIn("tcp://127.0.0.1:%d" % port, line)
        self.assertIn("in use", line)


@unittest.skipIf(harness.TRANSPORT == "tls", "manages its own listeners: runs in the tcp pass")
@unittest.skipUnless(ipv6_loopback(), "no IPv6 loopback")
class Ipv6ListenerTest(TlsTest):
    listen = (("tcp", "::1"), ("tls", "::1"), ("tcp", "127.0.0.1"))

    def test_ipv6_listeners(self):
        a = self.keep(tls_client(self.broker.ports[1], host="::1"))
        b = self.keep(RawClient(self.broker.ports[0], host="::1", tls=False))
        b.connect()
        subscribe(a, "/queue/v6")
        b.send_frame("SEND", [("destination", "/queue/v6")], "v6")
        self.assertEqual(a.expect("MESSAGE").body, b"v6")
        self.assertIn("listening on tls://[::1]:%d" % self.broker.ports[1], self.broker.read_log())


if __name__ == "__main__":
    unittest.main()
