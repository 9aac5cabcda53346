"""STOMP over WebSocket: eftd with ws:// and wss:// listeners beside a tcp://
one, driven by websocket-client (Debian python3-websocket) and by raw bytes
for what no polite client sends (unmasked frames, bad close codes, broken
handshakes).

Runs in the tcp pass only: it manages its own listeners."""

import os
import socket
import ssl
import struct
import time
import unittest

import harness
from harness import BrokerTest, RawClient, SLOW, frame, parse_frames, wait_for

try:
    import websocket  # python3-websocket
    HAVE_WS = True
except ImportError:
    HAVE_WS = False

KEY = "dGhlIHNhbXBsZSBub25jZQ=="


class WsClient:
    """A STOMP client over WebSocket: one STOMP frame per message out,
    frames parsed from whatever messages come in."""

    def __init__(self, url, protocols=("v12.stomp", "v11.stomp", "v10.stomp"), timeout=5,
                 header=None, binary=False):
        sslopt = {"ca_certs": harness.certs().ca} if url.startswith("wss:") else None
        # websocket-client sends an Origin of its own unless told not to.
        kw = {"header": header} if header else {"suppress_origin": True}
        self.ws = websocket.create_connection(url, subprotocols=list(protocols) or None,
                                              timeout=timeout * SLOW, sslopt=sslopt, **kw)
        self.binary = binary
        self.buf = b""
        self.opcodes = []   # of the data messages received
        self.messages = 0

    @property
    def subprotocol(self):
        return self.ws.getsubprotocol()

    def send_frame(self, command, headers=(), body=b""):
        self.send(frame(command, headers, body))

    def send(self, data):
        if self.binary:
            self.ws.send_binary(data)
        else:
            self.ws.send(data, opcode=websocket.ABNF.OPCODE_TEXT)

    def recv_message(self):
        """The next data message (opcode, bytes); control frames are answered
        by websocket-client itself, a close raises Closed with its code."""
        while True:
            op, data = self.ws.recv_data(control_frame=True)
            if op == websocket.ABNF.OPCODE_CLOSE:
                code = struct.unpack(">H", data[:2])[0] if len(data) >= 2 else None
                raise harness.Closed(code)
            if op in (websocket.ABNF.OPCODE_TEXT, websocket.ABNF.OPCODE_BINARY):
                self.opcodes.append(op)
                self.messages += 1
                return op, data

    def read_frame(self):
        while True:
            if not getattr(self, "pending", None):
                self.pending = []
            if self.pending:
                return self.pending.pop(0)
            frames, self.buf, _ = parse_frames(self.buf)
            if frames:
                self.pending = frames[1:]
                return frames[0]
            _, data = self.recv_message()
            self.buf += data if isinstance(data, bytes) else data.encode()

    def expect(self, command):
        f = self.read_frame()
        if f.command != command:
            raise AssertionError("expected %s, got %r" % (command, f))
        return f

    def connect(self, version="1.2", headers=()):
        self.send_frame("CONNECT", [("accept-version", version), ("host", "/")] + list(headers))
        return self.expect("CONNECTED")

    def close(self):
        try:
            self.ws.close(timeout=1)
        except Exception:
            pass


def raw_upgrade(port, path="/ws", extra="", version="13", key=KEY, rcvbuf=None):
    """A socket that sent an upgrade request; returns (socket, status, head)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(5 * SLOW)
    s.connect(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: %s\r\n%s\r\n" % (path, key, version, extra)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            break
        head += chunk
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else None
    return s, status, head


def client_frame(opcode, payload, fin=True, mask=True, rsv=0):
    """A client frame's bytes, masked unless told not to."""
    n = len(payload)
    b0 = (0x80 if fin else 0) | rsv | opcode
    m = 0x80 if mask else 0
    if n < 126:
        head = struct.pack("BB", b0, m | n)
    elif n < 65536:
        head = struct.pack(">BBH", b0, m | 126, n)
    else:
        head = struct.pack(">BBQ", b0, m | 127, n)
    if not mask:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(c ^ key[i & 3] for i, c in enumerate(payload))


def read_server_frames(s, deadline_s=5):
    """Server frames (opcode, payload) until the peer closes the TCP stream."""
    s.settimeout(deadline_s * SLOW)
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        data += chunk
    out, i = [], 0
    while i + 2 <= len(data):
        op, n = data[i] & 0x0f, data[i + 1] & 0x7f
        i += 2
        if n == 126:
            n = struct.unpack(">H", data[i:i + 2])[0]
            i += 2
        elif n == 127:
            n = struct.unpack(">Q", data[i:i + 8])[0]
            i += 8
        out.append((op, data[i:i + n]))
        i += n
    return out


def close_code(frames):
    codes = [struct.unpack(">H", p[:2])[0] for op, p in frames if op == 0x8 and len(p) >= 2]
    return codes[0] if codes else None


@unittest.skipIf(harness.TRANSPORT == "tls", "manages its own listeners: runs in the tcp pass")
@unittest.skipUnless(HAVE_WS, "python3-websocket not installed (tools/install-deps test)")
class WsTest(BrokerTest):
    listen = (("ws", "127.0.0.1"), ("tcp", "127.0.0.1"))
    args = ("-l", "debug")

    def ws(self, **kw):
        c = WsClient(self.broker.url(0), **kw)
        self.clients.append(c)
        return c

    def tcp(self, connect="1.2"):
        c = RawClient(self.broker.ports[1], tls=False)
        self.clients.append(c)
        if connect:
            c.connect(connect)
        return c

    @property
    def ws_port(self):
        return self.broker.ports[0]


class HandshakeTest(WsTest):
    config = "ws-allowed-origins = http://good.example, https://app.example\n"

    def test_each_subprotocol_is_echoed(self):
        for offered, picked, version in ((["v12.stomp", "v11.stomp", "v10.stomp"], "v12.stomp", "1.2"),
                                         (["v11.stomp"], "v11.stomp", "1.1"),
                                         (["v10.stomp"], "v10.stomp", "1.0"),
                                         (["stomp"], "stomp", "1.2"),
                                         ([], None, "1.2")):
            with self.subTest(offered=offered):
                c = self.ws(protocols=offered)
                self.assertEqual(c.subprotocol, picked)
                f = c.connect(version=version)
                self.assertEqual(f.get("version", "1.0"), version)
                c.close()

    def test_wrong_path_is_404(self):
        s, status, head = raw_upgrade(self.ws_port, path="/stomp")
        self.assertEqual(status, 404, head)
        self.assertIn(b"/ws", head + s.recv(1000))
        self.assertEqual(s.recv(100), b"")  # then closed
        s.close()

    def test_not_an_upgrade_is_400(self):
        s = socket.create_connection(("127.0.0.1", self.ws_port), timeout=5)
        s.sendall(b"GET /ws HTTP/1.1\r\nHost: x\r\n\r\n")
        data = s.recv(1000)
        self.assertTrue(data.startswith(b"HTTP/1.1 400 "), data)
        s.close()

    def test_plain_stomp_on_a_ws_port_is_400(self):
        s = socket.create_connection(("127.0.0.1", self.ws_port), timeout=5)
        s.sendall(frame("CONNECT", [("accept-version", "1.2"), ("host", "/")]) + b"\r\n\r\n")
        data = s.recv(1000)
        self.assertTrue(data.startswith(b"HTTP/1.1 400 "), data)
        s.close()

    def test_bad_version_and_key(self):
        s, status, head = raw_upgrade(self.ws_port, version="8")
        self.assertEqual(status, 426, head)
        self.assertIn(b"Sec-WebSocket-Version: 13", head)
        s.close()
        s, status, head = raw_upgrade(self.ws_port, key="short")
        self.assertEqual(status, 400, head)
        s.close()

    def test_origins(self):
        s, status, head = raw_upgrade(self.ws_port, extra="Origin: https://evil.example\r\n")
        self.assertEqual(status, 403, head)
        s.close()
        wait_for(lambda: "origin https://evil.example not allowed" in self.broker.read_log(), 5,
                 "the refusal logged")
        c = self.ws(header=["Origin: https://app.example"])
        c.connect()

    def test_tls_client_on_a_ws_port(self):
        ctx = ssl.create_default_context(cafile=harness.certs().ca)
        with socket.create_connection(("127.0.0.1", self.ws_port), timeout=5) as raw:
            with self.assertRaises((ssl.SSLError, OSError)):
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                    s.recv(10)
        wait_for(lambda: "not HTTP: a TLS handshake" in self.broker.read_log(), 5,
                 "the TLS client named in the log")


class StompOverWsTest(WsTest):

    def test_send_subscribe_ack_receipt_with_tcp(self):
        w = self.ws()
        w.connect()
        t = self.tcp()
        w.send_frame("SUBSCRIBE", [("id", "s1"), ("destination", "/queue/w"), ("ack", "client-individual"),
                                   ("receipt", "r-sub")])
        self.assertEqual(w.expect("RECEIPT")["receipt-id"], "r-sub")
        for i in range(3):
            t.send_frame("SEND", [("destination", "/queue/w"), ("n", str(i))], b"from tcp %d" % i)
        got = [w.expect("MESSAGE") for _ in range(3)]
        self.assertEqual([f.body for f in got], [b"from tcp %d" % i for i in range(3)])
        w.send_frame("ACK", [("id", got[1]["ack"]), ("receipt", "r-ack")])
        self.assertEqual(w.expect("RECEIPT")["receipt-id"], "r-ack")
        # And back: WebSocket to TCP.
        harness.subscribe(t, "/queue/t")
        w.send_frame("SEND", [("destination", "/queue/t"), ("receipt", "r-send")], "héllo".encode())
        self.assertEqual(w.expect("RECEIPT")["receipt-id"], "r-send")
        self.assertEqual(t.expect("MESSAGE").body, "héllo".encode())
        # Unacked 0 and 2 come back to the next subscriber.
        w.close()
        t2 = self.tcp()
        harness.subscribe(t2, "/queue/w")
        self.assertEqual(sorted(t2.expect("MESSAGE").body for _ in range(2)),
                         [b"from tcp 0", b"from tcp 2"])

    def test_transaction(self):
        w = self.ws()
        w.connect()
        t = self.tcp()
        harness.subscribe(t, "/queue/tx")
        w.send_frame("BEGIN", [("transaction", "tx1")])
        w.send_frame("SEND", [("destination", "/queue/tx"), ("transaction", "tx1")], b"a")
        w.send_frame("SEND", [("destination", "/queue/tx"), ("transaction", "tx1")], b"b")
        t.expect_nothing(0.2)
        w.send_frame("COMMIT", [("transaction", "tx1"), ("receipt", "c")])
        self.assertEqual(w.expect("RECEIPT")["receipt-id"], "c")
        self.assertEqual([t.expect("MESSAGE").body for _ in range(2)], [b"a", b"b"])

    def test_temp_queue_rpc_between_ws_and_tcp(self):
        server = self.tcp()
        harness.subscribe(server, "/queue/rpc")
        w = self.ws()
        w.connect()
        w.send_frame("SEND", [("destination", "/queue/rpc"), ("reply-to", "/temp-queue/answers")],
                     b"question")
        req = server.expect("MESSAGE")
        self.assertEqual(req.body, b"question")
        server.send_frame("SEND", [("destination", req["reply-to"])], b"answer")
        reply = w.expect("MESSAGE")
        self.assertEqual(reply.body, b"answer")


    def test_frames_split_and_joined_across_messages(self):
        w = self.ws()
        w.connect()
        t = self.tcp()
        harness.subscribe(t, "/queue/s")
        # Two frames in one message, then one frame over three messages.
        w.send(frame("SEND", [("destination", "/queue/s")], b"one") +
               frame("SEND", [("destination", "/queue/s")], b"two"))
        f = frame("SEND", [("destination", "/queue/s")], b"three")
        w.send(f[:5])
        w.send(f[5:20])
        w.send(f[20:])
        self.assertEqual([t.expect("MESSAGE").body for _ in range(3)], [b"one", b"two", b"three"])

    def test_fragmented_message_with_a_ping_between(self):
        w = self.ws()
        w.connect()
        t = self.tcp()
        harness.subscribe(t, "/queue/f")
        f = frame("SEND", [("destination", "/queue/f")], b"fragmented")
        w.ws.send_frame(websocket.ABNF.create_frame(f[:10], websocket.ABNF.OPCODE_TEXT, fin=0))
        w.ws.send_frame(websocket.ABNF.create_frame(b"hi", websocket.ABNF.OPCODE_PING))
        w.ws.send_frame(websocket.ABNF.create_frame(f[10:], websocket.ABNF.OPCODE_CONT, fin=1))
        self.assertEqual(t.expect("MESSAGE").body, b"fragmented")
        op, data = w.ws.recv_data(control_frame=True)
        self.assertEqual((op, data), (websocket.ABNF.OPCODE_PONG, b"hi"))

    def test_missing_nul_with_content_length(self):
        w = self.ws()
        w.connect()
        t = self.tcp()
        harness.subscribe(t, "/queue/nul")
        body = b"no NUL after me"
        f = frame("SEND", [("destination", "/queue/nul"), ("content-length", str(len(body)))], body)
        w.send(f[:-1])                   # React Native's way
        w.send(f[:-1])
        self.assertEqual([t.expect("MESSAGE").body for _ in range(2)], [body, body])
        # Without content-length a frame cut short stays unfinished: the
        # next message completes it.
        w.send(b"SEND\ndestination:/queue/nul\n\nhalf")
        w.send(b" and half\0")
        self.assertEqual(t.expect("MESSAGE").body, b"half and half")

    def test_one_message_per_frame_text_unless_not_utf8(self):
        w = self.ws()
        w.connect()
        w.send_frame("SUBSCRIBE", [("id", "0"), ("destination", "/queue/o")])
        t = self.tcp()
        t.send_frame("SEND", [("destination", "/queue/o")], "text ✓".encode())
        t.send_frame("SEND", [("destination", "/queue/o")], b"\xff\xfe binary")
        t.send_frame("SEND", [("destination", "/queue/o"), ("receipt", "r")], b"x")
        t.expect("RECEIPT")
        msgs = [w.recv_message() for _ in range(3)]
        self.assertEqual([op for op, _ in msgs], [websocket.ABNF.OPCODE_TEXT,
                                                 websocket.ABNF.OPCODE_BINARY,
                                                 websocket.ABNF.OPCODE_TEXT])
        for op, data in msgs:   # each is exactly one whole frame
            data = data if isinstance(data, bytes) else data.encode()
            frames, rest, eols = parse_frames(data)
            self.assertEqual((len(frames), rest, eols), (1, b"", 0))
            self.assertTrue(data.endswith(b"\0"))

    def test_heart_beats_are_one_eol_messages(self):
        w = self.ws()
        w.connect(headers=[("heart-beat", "0,200")])
        deadline = time.time() + 3 * SLOW
        beats = 0
        while beats < 3 and time.time() < deadline:
            op, data = w.recv_message()
            self.assertEqual(op, websocket.ABNF.OPCODE_TEXT)
            self.assertEqual(data, b"\n")
            beats += 1
        self.assertEqual(beats, 3)

    def test_client_close_gets_the_close_handshake(self):
        w = self.ws()
        w.connect()
        w.ws.send_close(status=1000, reason=b"bye")
        op, data = w.ws.recv_data(control_frame=True)
        self.assertEqual(op, websocket.ABNF.OPCODE_CLOSE)
        self.assertEqual(struct.unpack(">H", data[:2])[0], 1000)
        wait_for(lambda: "WebSocket closed by the client (code 1000)" in self.broker.read_log(), 5,
                 "the close logged")
        self.assertEqual(w.ws.sock.recv(10), b"")   # then the TCP close

    def test_stomp_error_then_close_1000_then_tcp_close(self):
        s, status, _ = raw_upgrade(self.ws_port)
        self.assertEqual(status, 101)
        s.sendall(client_frame(0x1, b"BOGUS\n\n\0"))
        frames = read_server_frames(s)
        s.close()
        self.assertEqual(frames[0][0], 0x1)
        self.assertTrue(frames[0][1].startswith(b"ERROR\n"), frames)
        self.assertEqual(close_code(frames), 1000)
        self.assertEqual(frames[-1][0], 0x8)

    def test_http_words_inside_websocket_are_stomp_bytes(self):
        """Only a raw TCP or TLS stream can be an HTTP request; inside an
        upgraded WebSocket, "GET " is a bad STOMP frame like any other."""
        for first in (b"GET / HTTP/1.1\r\n\r\n\0", b"\x16\x03\x01\x00\x05\n\n\0"):
            s, status, _ = raw_upgrade(self.ws_port)
            self.assertEqual(status, 101)
            s.sendall(client_frame(0x2, first))
            frames = read_server_frames(s)
            s.close()
            self.assertTrue(frames[0][1].startswith(b"ERROR\n"), frames)
            self.assertNotIn(b"TLS handshake", frames[0][1])
            self.assertNotIn(b"400 Bad Request", frames[0][1])
            self.assertEqual(close_code(frames), 1000)

    def test_binary_client_messages(self):
        w = self.ws(binary=True)
        w.connect()
        t = self.tcp()
        harness.subscribe(t, "/queue/b")
        w.send_frame("SEND", [("destination", "/queue/b"), ("content-length", "3")], b"\x00\xff\x01")
        self.assertEqual(t.expect("MESSAGE").body, b"\x00\xff\x01")


class ProtocolErrorTest(WsTest):
    config = "max-frame-size = 4096\nmax-body-size = 2048\n"

    def expect_close(self, data, code, log_text):
        s, status, _ = raw_upgrade(self.ws_port)
        self.assertEqual(status, 101)
        s.sendall(data)
        frames = read_server_frames(s)
        s.close()
        self.assertEqual(close_code(frames), code, frames)
        wait_for(lambda: log_text in self.broker.read_log(), 5,
                 "'%s' in the log:\n%s" % (log_text, self.broker.read_log()[-1500:]))
        self.assert_broker_fine()

    def assert_broker_fine(self):
        t = self.tcp()
        t.send_frame("SEND", [("destination", "/queue/ok"), ("receipt", "fine")], b"x")
        t.expect("RECEIPT")
        t.close()

    def test_unmasked_frame_is_1002(self):
        self.expect_close(client_frame(0x1, b"CONNECT\n\n\0", mask=False), 1002, "not masked")

    def test_reserved_bits_are_1002(self):
        self.expect_close(client_frame(0x1, b"x", rsv=0x40), 1002, "reserved bits")

    def test_message_over_max_frame_size_is_1009(self):
        self.expect_close(client_frame(0x2, b"x" * 5000), 1009, "limit 4096")

    def test_fragments_over_max_frame_size_are_1009(self):
        self.expect_close(client_frame(0x2, b"x" * 3000, fin=False) +
                          client_frame(0x0, b"x" * 3000), 1009, "max-frame-size")

    def test_invalid_utf8_text_is_1007(self):
        self.expect_close(client_frame(0x1, b"SEND\n\xff\n\n\0"), 1007, "not valid UTF-8")

    def test_bad_close_code_is_1002(self):
        self.expect_close(client_frame(0x8, struct.pack(">H", 999)), 1002, "bad close frame")

    def test_stomp_limit_gets_error_then_close(self):
        s, status, _ = raw_upgrade(self.ws_port)
        s.sendall(client_frame(0x1, frame("CONNECT", [("accept-version", "1.2"), ("host", "/")])))
        body = b"y" * 3000
        s.sendall(client_frame(0x2, frame("SEND", [("destination", "/queue/q"),
                                                   ("content-length", str(len(body)))], body)))
        frames = read_server_frames(s)
        s.close()
        stomp = b"".join(p for op, p in frames if op in (1, 2))
        errors = [f for f in parse_frames(stomp)[0] if f.command == "ERROR"]
        self.assertEqual(len(errors), 1, frames)
        self.assertIn("body too large", errors[0]["message"])
        self.assertIn(close_code(frames), (1000, 1008))

    def test_handshake_garbage_and_drops(self):
        for data in (b"\x00" * 100, b"GET / HTTP/1.1\r\n" + b"A" * 9000, b"GET /ws HTTP/1.1\r\n"):
            s = socket.create_connection(("127.0.0.1", self.ws_port), timeout=5)
            try:
                s.sendall(data)
            except OSError:
                pass
            s.close()
        s = socket.create_connection(("127.0.0.1", self.ws_port), timeout=5)
        s.sendall(b"GET / HTTP/1.1\r\n" + b"A" * 9000)
        data = s.recv(1000)
        self.assertTrue(data.startswith(b"HTTP/1.1 431 ") or data.startswith(b"HTTP/1.1 400"), data)
        s.close()
        self.assert_broker_fine()


class TimeoutTest(WsTest):
    config = "connect-timeout-ms = 300\nframe-timeout-ms = 300\n"

    def test_no_upgrade_request_in_time(self):
        s = socket.create_connection(("127.0.0.1", self.ws_port), timeout=5)
        s.sendall(b"GET /ws HTTP/1.1\r\n")
        s.settimeout(5 * SLOW)
        self.assertEqual(s.recv(100), b"")
        s.close()
        self.assertIn("ws handshake not finished", self.broker.read_log())

    def test_no_connect_after_the_upgrade(self):
        s, status, _ = raw_upgrade(self.ws_port)
        self.assertEqual(status, 101)
        frames = read_server_frames(s)
        s.close()
        self.assertIn(b"connect timeout", frames[0][1])
        self.assertEqual(close_code(frames), 1000)

    def test_frame_started_not_finished(self):
        w = self.ws()
        w.connect()
        w.send(b"SEND\ndestination:/queue/x\n")
        f = w.read_frame()
        self.assertEqual(f.command, "ERROR")
        self.assertIn("frame timeout", f["message"])


class BinaryFramesTest(WsTest):
    config = "ws-frame = binary\n"

    def test_every_message_is_binary(self):
        w = self.ws()
        w.connect()
        w.send_frame("SUBSCRIBE", [("id", "0"), ("destination", "/queue/bin"), ("receipt", "r")])
        w.expect("RECEIPT")
        t = self.tcp()
        t.send_frame("SEND", [("destination", "/queue/bin")], b"plain text")
        self.assertEqual(w.expect("MESSAGE").body, b"plain text")
        self.assertEqual(set(w.opcodes), {websocket.ABNF.OPCODE_BINARY})
        self.assertEqual(w.messages, 3)   # CONNECTED, RECEIPT, MESSAGE


class ConnectionLimitTest(WsTest):
    config = "max-connections = 2\n"

    def test_past_max_connections_gets_503(self):
        # The start-up probes (one per listener at least) count until eftd
        # has seen them close; eftd may not have accepted them yet.
        def probes_closed():
            log = self.broker.read_log()
            opened = log.count(": connection open")
            return opened >= len(self.listen) and opened == log.count(": connection closed")
        wait_for(probes_closed, 5, "probes closed")
        a = self.ws()
        a.connect()
        b = self.ws()
        b.connect()
        s, status, head = raw_upgrade(self.ws_port)
        self.assertEqual(status, 503, head)
        s.close()
        wait_for(lambda: "connection limit (2) reached" in self.broker.read_log(), 5, "the limit logged")
        # The two still work.
        b.send_frame("SUBSCRIBE", [("id", "0"), ("destination", "/queue/l")])
        a.send_frame("SEND", [("destination", "/queue/l")], b"still here")
        self.assertEqual(b.expect("MESSAGE").body, b"still here")


class SlowConsumerTest(WsTest):
    config = "max-output = 256k\noutput-high-water = 64k\n"

    def test_topic_subscriber_that_does_not_read_is_cut_off(self):
        s, status, _ = raw_upgrade(self.ws_port, rcvbuf=4096)
        self.assertEqual(status, 101)
        port = s.getsockname()[1]
        s.sendall(client_frame(0x1, frame("CONNECT", [("accept-version", "1.2"), ("host", "/")])))
        s.sendall(client_frame(0x1, frame("SUBSCRIBE", [("id", "0"), ("destination", "/topic/t"),
                                                        ("receipt", "sub")])))
        # the SUBSCRIBE's RECEIPT (read before the small buffer is let fill up)
        got, deadline = b"", time.time() + 5 * SLOW
        while b"receipt-id:sub" not in got and time.time() < deadline:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        self.assertIn(b"receipt-id:sub", got)
        t = self.tcp()
        body = b"z" * 16384
        deadline = time.time() + 20 * SLOW
        i = 0
        cut = "%d: slow consumer" % port
        while cut not in self.broker.read_log() and time.time() < deadline:
            t.send_frame("SEND", [("destination", "/topic/t")], body)
            i += 1
            if i % 64 == 0:
                t.send_frame("SEND", [("destination", "/queue/sync"), ("receipt", str(i))], b"")
                harness.expect_receipt(t, str(i))
        s.close()
        lines = [l for l in self.broker.read_log().splitlines() if cut in l]
        self.assertTrue(lines, "the stuck WebSocket subscriber was never cut off")
        self.assertIn("max-output 262144", lines[0])


@unittest.skipIf(harness.TRANSPORT == "tls", "manages its own listeners: runs in the tcp pass")
@unittest.skipUnless(HAVE_WS, "python3-websocket not installed (tools/install-deps test)")
class WssTest(WsTest):
    listen = (("wss", "127.0.0.1"), ("tcp", "127.0.0.1"))

    def test_stomp_over_wss(self):
        w = self.ws()
        self.assertEqual(w.subprotocol, "v12.stomp")
        w.connect()
        t = self.tcp()
        harness.subscribe(t, "/queue/wss")
        w.send_frame("SEND", [("destination", "/queue/wss"), ("receipt", "r")], b"secret")
        self.assertEqual(w.expect("RECEIPT")["receipt-id"], "r")
        self.assertEqual(t.expect("MESSAGE").body, b"secret")
        self.assertIn("wss 127.0.0.1:", self.broker.read_log())

    def test_plain_ws_client_on_a_wss_port_fails(self):
        with self.assertRaises(Exception):
            websocket.create_connection("ws://127.0.0.1:%d/ws" % self.broker.ports[0], timeout=3)
