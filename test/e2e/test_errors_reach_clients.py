"""Errors must reach the client (issue 9): when a frame breaks a limit, eftd
answers with an ERROR naming the limit and the size, then closes the way
careful servers do: it shuts its write side and reads and drops what the
client still sends, for a bounded time and amount, before closing.  Closing
with the client's bytes unread would send a reset, and the client's kernel
would throw the ERROR away (stomp.py saw ConnectionResetError, the Ruby gem
Errno::ECONNRESET or EPIPE).

Every limit a real client can break is tried with the Ruby stomp gem and
stomp.py; raw sockets check the bounds of the lingering close."""

import socket
import ssl
import subprocess
import threading
import time
import unittest

import harness
from clientscript import HAVE_RUBY_STOMP, HAVE_STOMP_PY, RUBY, TIMEOUT
from harness import BrokerTest, RawClient, SLOW

MB20 = 20 * 1000 * 1000

# Small limits, so that each can be broken cheaply.
SMALL = ("max-frame-size = 256k\nmax-body-size = 0\nmax-headers = 8\n"
         "max-header-line = 1k\nmax-subscriptions = 2\nmax-connections = 4\n")

# What each limit looks like from a client: an action that breaks it, and
# what the ERROR's message must say.
CASES = {
    "body": ("send a 20 MB body", "body too large: 20000000 bytes (max-body-size is 16777216)"),
    "frame": ("send a 300 KB body", "max-frame-size is 262144"),
    "headers": ("send 10 headers", "too many headers: over 8 (max-headers is 8)"),
    "line": ("send a 2 KB header", "header line too long: more than 1024 bytes "
             "(max-header-line is 1024)"),
    "subs": ("subscribe 3 times", "too many subscriptions: over 2 (max-subscriptions is 2)"),
    "conns": ("connect past the limit", "too many connections"),
}

RUBY_SCRIPT = r"""
require 'stomp'
port, what, ssl = ARGV[0].to_i, ARGV[1], ARGV[2]
ssl = ssl ? Stomp::SSLParams.new(ts_files: ssl) : false
hash = {hosts: [{host: '127.0.0.1', port: port, ssl: ssl}], reliable: false, connect_timeout: 5,
        connect_headers: {'accept-version' => '1.2', 'host' => '/'}}
c = Stomp::Connection.new(hash)
if what == 'conns'
  f = c.connection_frame
else
  case what
  when 'body' then c.publish('/queue/big', 'x' * 20_000_000)
  when 'frame' then c.publish('/queue/big', 'x' * 300_000)
  when 'headers' then c.publish('/queue/h', 'x', (1..10).map { |i| ["h#{i}", 'v'] }.to_h)
  when 'line' then c.publish('/queue/l', 'x', {'long' => 'v' * 2048})
  when 'subs' then 3.times { |i| c.subscribe("/queue/s#{i}", {'id' => i.to_s}) }
  end
  f = c.receive
end
puts "#{f.command}|#{f.headers['message']}"
"""


def run_ruby(port, what):
    ca = [harness.certs().ca] if harness.TRANSPORT == "tls" else []
    p = subprocess.run([RUBY, "-e", RUBY_SCRIPT, str(port), what] + ca, capture_output=True,
                       text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout.strip(), p.stderr.strip()


def run_stomp_py(port, what):
    """stomp.py in this process: (exception raised or None, ERROR frames seen)."""
    import stomp
    errors = []
    seen = threading.Event()

    class Listener(stomp.ConnectionListener):
        def on_error(self, frame):
            errors.append(frame.headers.get("message"))
            seen.set()

    c = harness.stomp_py(port, reconnect_attempts_max=1)
    c.set_listener("l", Listener())
    raised = None
    try:
        c.connect(wait=True, headers={"host": "/"})
        if what == "body":
            c.send("/queue/big", "x" * MB20)
        elif what == "frame":
            c.send("/queue/big", "x" * 300000)
        elif what == "headers":
            c.send("/queue/h", "x", headers={"h%d" % i: "v" for i in range(10)})
        elif what == "line":
            c.send("/queue/l", "x", headers={"long": "v" * 2048})
        elif what == "subs":
            for i in range(3):
                c.subscribe("/queue/s%d" % i, id=str(i))
    except Exception as e:  # what the issue saw: ConnectionResetError
        raised = e
    seen.wait(5 * SLOW)
    if c.is_connected():
        c.disconnect()
    return raised, errors


class LimitsTest(BrokerTest):
    def fill_connections(self):
        """Up to max-connections (4) with raw clients that stay."""
        for _ in range(4):
            self.client()

    def ruby(self, what):
        if what == "conns":
            self.fill_connections()
        rc, out, err = run_ruby(self.broker.port, what)
        self.assertEqual(rc, 0, "ruby failed (%s): %s\n%s\n--- eftd log ---\n%s"
                         % (CASES[what][0], out, err, self.broker.read_log()[-3000:]))
        self.assertTrue(out.startswith("ERROR|"), out)
        self.assertIn(CASES[what][1], out)

    def stomp_py(self, what):
        if what == "conns":
            self.fill_connections()
        raised, errors = run_stomp_py(self.broker.port, what)
        if what == "conns":
            # connect(wait=True) gives up: the ERROR came instead of CONNECTED.
            self.assertIsNotNone(raised)
        else:
            self.assertIsNone(raised, "%s raised %r; eftd log:\n%s"
                              % (CASES[what][0], raised, self.broker.read_log()[-3000:]))
        self.assertEqual(len(errors), 1, errors)
        self.assertIn(CASES[what][1], errors[0])


@unittest.skipUnless(HAVE_RUBY_STOMP, "ruby with the stomp gem (ruby-stomp) not available")
class RubyDefaultLimitsTest(LimitsTest):
    def test_20mb_body_against_the_default_limit(self):
        self.ruby("body")


@unittest.skipUnless(HAVE_STOMP_PY, "stomp.py not available")
class StompPyDefaultLimitsTest(LimitsTest):
    def test_20mb_body_against_the_default_limit(self):
        self.stomp_py("body")


@unittest.skipUnless(HAVE_RUBY_STOMP, "ruby with the stomp gem (ruby-stomp) not available")
class RubySmallLimitsTest(LimitsTest):
    config = SMALL


@unittest.skipUnless(HAVE_STOMP_PY, "stomp.py not available")
class StompPySmallLimitsTest(LimitsTest):
    config = SMALL


for _what in ("frame", "headers", "line", "subs", "conns"):
    setattr(RubySmallLimitsTest, "test_" + _what,
            lambda self, w=_what: self.ruby(w))
    setattr(StompPySmallLimitsTest, "test_" + _what,
            lambda self, w=_what: self.stomp_py(w))


class LingeringCloseTest(BrokerTest):
    """The close itself, over raw sockets."""
    config = "max-body-size = 64k\nmax-frame-size = 128k\nframe-timeout-ms = 3000\n"

    def test_error_then_end_of_stream_not_reset(self):
        """A body far over the limit, sent in one go: the client finishes
        sending, reads the ERROR and then a clean end of stream."""
        c = self.client()
        body = b"x" * (4 << 20)
        data = (b"SEND\ndestination:/queue/x\ncontent-length:%d\nreceipt:r\n\n" % len(body)
                + body + b"\0")
        c.sock.settimeout(10 * SLOW)
        c.sock.sendall(data)  # would fail with a reset if eftd closed early
        f = c.read_frame()
        self.assertEqual(f.command, "ERROR")
        # (1.2 escapes the colon)
        self.assertEqual(f["message"], "body too large\\c %d bytes (max-body-size is 65536)"
                         % len(body))
        self.assertEqual(f.body.decode(), "The frame exceeds this server's size limit, "
                         "max-body-size = 65536 bytes, and was not processed: send smaller "
                         "frames, or raise max-body-size in the server's configuration.")
        self.assertEqual(f["receipt-id"], "r")
        self.assertEqual(c.sock.recv(100), b"")  # FIN, not ECONNRESET

    def test_a_malformed_frame_is_said_to_be(self):
        c = self.client()
        c.send(b"SEND\ndestination:/queue/x\nno colon here\n\n\0")
        f = c.read_frame()
        self.assertEqual(f.command, "ERROR")
        self.assertEqual(f.body.decode(), "The frame could not be parsed: malformed header "
                         "line (no ':') in frame.")

    def test_headers_ended_by_nul_with_a_content_length_are_refused(self):
        """A SEND ended by its NUL right after its headers has no body: a
        content-length of 40000 in it is refused, and a consumer of the
        queue gets the messages around it whole (before, it got a MESSAGE
        promising 40000 bytes with none behind it, and its stream broke)."""
        consumer = self.client()
        harness.subscribe(consumer, "/queue/nulended")
        c = self.client()
        c.send_frame("SEND", [("destination", "/queue/nulended")], "before")
        c.send(b"SEND\ndestination:/queue/nulended\nreceipt:r1\ncontent-length:40000\n\0")
        f = c.read_frame()
        self.assertEqual(f.command, "ERROR")
        self.assertEqual(f["receipt-id"], "r1")
        self.assertIn("content-length is not 0", f.body.decode())
        other = self.client()
        other.send_frame("SEND", [("destination", "/queue/nulended")], "after")
        for want in (b"before", b"after"):
            m = consumer.expect("MESSAGE")
            self.assertEqual(m.body, want)
            self.assertEqual(m["content-length"], str(len(want)))

    def test_client_that_never_closes_is_closed_after_about_2s(self):
        c = self.client()
        port = c.sock.getsockname()[1]
        c.send(b"SEND\ndestination:/queue/x\ncontent-length:100000\n\n")
        self.assertEqual(c.read_frame().command, "ERROR")
        self.assertEqual(c.sock.recv(100), b"")  # eftd shut its write side at once
        t0 = time.time()
        closed = "127.0.0.1:%d: connection closed" % port
        while closed not in self.broker.read_log() and time.time() - t0 < 6 * SLOW:
            time.sleep(0.05)
        elapsed = time.time() - t0
        self.assertIn(closed, self.broker.read_log())
        self.assertGreater(elapsed, 1.5, "eftd should wait for the client a while")
        self.assertLess(elapsed, 4 * SLOW, "eftd must not wait for the client for long")

    def test_client_that_keeps_sending_is_cut_off(self):
        """A hostile client cannot keep a refused connection open by sending:
        eftd stops reading after a frame's worth beyond what it announced."""
        c = self.client()
        port = c.sock.getsockname()[1]
        c.send(b"SEND\ndestination:/queue/x\ncontent-length:70000\n\n")
        self.assertEqual(c.read_frame().command, "ERROR")
        sent, t0 = 0, time.time()
        c.sock.settimeout(1)
        chunk = b"y" * 65536
        try:
            while time.time() - t0 < 10 * SLOW:
                sent += c.sock.send(chunk)
        except socket.timeout:
            self.fail("eftd stopped reading but kept the connection open")
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            pass  # over TLS the cut shows as an EOF without close_notify
        else:
            self.fail("eftd read %d bytes after the ERROR without closing" % sent)
        # 128k frame + 70000 announced, plus what the socket buffers hold
        self.assertLess(sent, 64 << 20)
        self.assertIn("127.0.0.1:%d: still sending after its connection was ended" % port,
                      self.broker.read_log())

    def test_trickle_is_cut_at_the_frame_timeout(self):
        """Bytes now and then keep a lingering close going only as long as a
        frame may take (frame-timeout-ms, 3 s here)."""
        c = self.client()
        port = c.sock.getsockname()[1]
        c.send(b"SEND\ndestination:/queue/x\ncontent-length:100000\n\n")
        self.assertEqual(c.read_frame().command, "ERROR")
        closed = "127.0.0.1:%d: connection closed" % port
        t0 = time.time()
        try:
            while closed not in self.broker.read_log() and time.time() - t0 < 8 * SLOW:
                c.sock.send(b"y")
                time.sleep(0.5)
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            pass
        harness.wait_for(lambda: closed in self.broker.read_log(), 2, "the close")
        elapsed = time.time() - t0
        self.assertGreater(elapsed, 2.5, "a client still sending is waited for")
        self.assertLess(elapsed, 5 * SLOW, "but not past frame-timeout-ms")

    def test_disconnect_receipt_then_close(self):
        c = self.client()
        c.send_frame("DISCONNECT", [("receipt", "bye")])
        self.assertEqual(c.read_frame()["receipt-id"], "bye")
        self.assertEqual(c.sock.recv(100), b"")

    def test_other_clients_unaffected_while_one_lingers(self):
        c = self.client()
        c.send(b"SEND\ndestination:/queue/x\ncontent-length:100000\n\n")
        self.assertEqual(c.read_frame().command, "ERROR")
        other = self.client()
        harness.subscribe(other, "/queue/ok")
        other.send_frame("SEND", [("destination", "/queue/ok")], "fine")
        self.assertEqual(other.expect("MESSAGE").body, b"fine")


def read_to_end(sock, timeout):
    """Everything the server sends until it closes (bounded by timeout)."""
    data, deadline = b"", time.time() + timeout
    while time.time() < deadline:
        sock.settimeout(max(0.01, deadline - time.time()))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        except (ConnectionResetError, ssl.SSLError):
            break
        if not chunk:
            break
        data += chunk
    return data


# Well past what the tests wait for an answer: a refusal that waited for it
# (as HTTP requests did, then getting a STOMP ERROR) fails them.
HTTP_CONNECT_TIMEOUT = "connect-timeout-ms = %d\n" % (20000 * SLOW)


class HttpOnStompPortTest(BrokerTest):
    """An HTTP client on a STOMP listener (issue 23): it gets, at once, an
    HTTP 400 it can show, saying where eftd speaks HTTP, as a TLS client
    on a plain listener gets its ERROR at once."""
    config = HTTP_CONNECT_TIMEOUT
    listen = [(harness.TRANSPORT, "127.0.0.1"), ("ws", "127.0.0.1"), ("http", "127.0.0.1")]

    def ask(self, *pieces):
        """Send the pieces (each read by eftd before the next); the whole
        answer, and whether it came before connect-timeout-ms could have passed."""
        with harness.open_socket(self.broker.port) as s:
            t0 = time.time()
            for i, piece in enumerate(pieces):
                if i:
                    harness.wait_for(lambda: harness.eftd_has_read(s), 5, "eftd to read a piece")
                s.sendall(piece)
            return read_to_end(s, 5 * SLOW), time.time() - t0

    def check_400(self, answer, elapsed):
        self.assertLess(elapsed, 5 * SLOW, "the HTTP client waited for the connect timeout")
        head, _, body = answer.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer[:300])
        self.assertIn(b"\r\nContent-Length: %d\r\n" % len(body), head + b"\r\n")
        self.assertIn(b"Connection: close", head)
        return body.decode()

    def test_get_gets_400_naming_the_websocket_and_admin_listeners(self):
        answer, elapsed = self.ask(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        body = self.check_400(answer, elapsed)
        self.assertIn("This port speaks STOMP, not HTTP", body)
        self.assertIn("STOMP over WebSocket: %s" % self.broker.url(1), body)
        self.assertIn("admin API: http://127.0.0.1:%d/" % self.broker.ports[2], body)
        harness.wait_for(lambda: "not STOMP: an HTTP request (GET); answered 400"
                         in self.broker.read_log(), 5, "the log line")

    def test_a_real_http_client_shows_the_answer(self):
        import http.client
        if harness.TRANSPORT == "tls":
            conn = http.client.HTTPSConnection("127.0.0.1", self.broker.port, timeout=5 * SLOW,
                                               context=harness.certs().context())
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.broker.port, timeout=5 * SLOW)
        self.addCleanup(conn.close)
        conn.request("POST", "/queue/x", body=b"hello")
        r = conn.getresponse()
        self.assertEqual(r.status, 400)
        self.assertIn(b"speaks STOMP", r.read())

    def test_each_method_and_a_request_line_in_pieces(self):
        for method in ("GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS", "PATCH", "TRACE"):
            with self.subTest(method=method):
                answer, elapsed = self.ask(b"%s /x HTTP/1.1\r\n\r\n" % method.encode())
                self.check_400(answer, elapsed)
        # one byte at a time, up to the space that says HTTP
        answer, elapsed = self.ask(b"O", b"PT", b"IONS", b" * HTTP/1.1\r\n\r\n")
        self.check_400(answer, elapsed)

    def test_http_connect_refused_stomp_connect_served(self):
        answer, elapsed = self.ask(b"CONNECT 127.0.0.1:61613 HTTP/1.1\r\n\r\n")
        self.check_400(answer, elapsed)
        # STOMP's CONNECT: the command, then an EOL (LF or CRLF), whole or in pieces
        for pieces in ([b"CONNECT\naccept-version:1.2\nhost:/\n\n\0"],
                       [b"CONNECT\r\naccept-version:1.2\r\nhost:/\r\n\r\n\0"],
                       [b"CONNE", b"CT", b"\naccept-version:1.2\nhost:/\n\n\0"],
                       [b"STOMP\naccept-version:1.2\nhost:/\n\n\0"]):
            with self.subTest(pieces=pieces):
                c = self.client(connect=None)
                for i, piece in enumerate(pieces):
                    if i:
                        harness.wait_for(lambda: harness.eftd_has_read(c.sock), 5,
                                         "eftd to read a piece")
                    c.send(piece)
                self.assertEqual(c.read_frame().command, "CONNECTED")


class HttpOnStompPortAloneTest(BrokerTest):
    """Without a WebSocket or admin listener, the answer says how to add one."""
    config = HTTP_CONNECT_TIMEOUT

    def test_answer_says_how_to_add_the_listeners(self):
        with harness.open_socket(self.broker.port) as s:
            t0 = time.time()
            s.sendall(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n\r\n")
            answer = read_to_end(s, 5 * SLOW)
        self.assertLess(time.time() - t0, 5 * SLOW)
        self.assertTrue(answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer[:300])
        self.assertIn(b"add one: listen = ws://HOST:PORT/ws", answer)
        self.assertIn(b"add one: listen = http://127.0.0.1:PORT", answer)


if __name__ == "__main__":
    unittest.main()
