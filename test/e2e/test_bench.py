"""eft-bench: every mode against a real eftd at small N, its CSV and JSON
output, and that it fails loudly when a (fake) broker loses, duplicates,
reorders or corrupts a message or sends an ERROR.  --tls is tested through
socat, which terminates TLS in front of a plain eftd, with certificates made
for the test by the openssl command.  --ws is tested against a fake
WebSocket broker that cuts its STOMP bytes into messages in several ways,
and against eftd's own ws:// listener when this eftd has one."""

import base64
import csv
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import harness
from harness import BUILD, ROOT, SLOW, BrokerTest, frame, free_port, parse_frames

EFT_BENCH = os.environ.get("EFT_BENCH", os.path.join(ROOT, BUILD, "eft-bench"))

# The columns 'eft-bench --help' documents, in order, for --csv and --json.
COLUMNS = ("mode server host port size count conns inflight ack "
           "send_s recv_s total_s delivered msgs_per_s mb_per_s "
           "lat_min_us lat_mean_us lat_p50_us lat_p90_us lat_p99_us lat_p999_us "
           "lat_max_us lost duplicated reordered corrupted complete error transport "
           "persistent receipt_window").split()
TEXT = {"mode", "server", "host", "ack", "error", "transport"}
INTS = {"port", "size", "count", "conns", "inflight", "delivered",
        "lost", "duplicated", "reordered", "corrupted", "complete", "persistent",
        "receipt_window"}
BOOLS = ("complete", "persistent")
LATENCY = ["lat_min_us", "lat_mean_us", "lat_p50_us", "lat_p90_us", "lat_p99_us",
           "lat_p999_us", "lat_max_us"]
CHECKS = ("lost", "duplicated", "reordered", "corrupted")

N = 2000


def bench(*args, timeout=30):
    """Run eft-bench; returns (exit status, stdout, stderr).  Bounded by timeout."""
    p = subprocess.run([EFT_BENCH] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout * SLOW)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def parse_csv(test, out):
    """The rows of eft-bench --csv output as dicts of numbers (None when empty)."""
    lines = out.splitlines()
    test.assertGreaterEqual(len(lines), 2, "no CSV rows in %r" % out)
    rows = list(csv.reader(io.StringIO(out)))
    test.assertEqual(rows[0], COLUMNS, "CSV header")
    result = []
    for raw in rows[1:]:
        test.assertEqual(len(raw), len(COLUMNS), "CSV row %r" % raw)
        row = {}
        for col, v in zip(COLUMNS, raw):
            if col in TEXT:
                row[col] = v
            elif v == "":
                row[col] = None
            elif col in INTS:
                test.assertRegex(v, r"^[0-9]+$", "column %s" % col)
                row[col] = int(v)
            else:
                try:
                    row[col] = float(v)
                except ValueError:
                    test.fail("column %s: %r is not a number" % (col, v))
        result.append(row)
    return result


def parse_json(test, out):
    rows = []
    for line in out.splitlines():
        obj = json.loads(line)
        test.assertEqual(list(obj), COLUMNS, "JSON keys")
        for col in COLUMNS:
            v = obj[col]
            if col in BOOLS:
                test.assertIsInstance(v, bool)
            elif col in TEXT:
                test.assertTrue(v is None or isinstance(v, str), "%s: %r" % (col, v))
            else:
                test.assertTrue(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)),
                                "%s: %r" % (col, v))
        rows.append(obj)
    test.assertTrue(rows, "no JSON lines")
    return rows


class EftBenchModes(BrokerTest):
    """Each mode against a real eftd: exit 0, every message delivered and checked."""

    def run_mode(self, mode, *args, rows=1):
        common = [mode, "-p", self.broker.port, "-n", N, "-t", 10 * SLOW, "-d", 20 * SLOW] + list(args)
        if harness.TRANSPORT == "tls":
            common += ["--tls", "--ca", harness.certs().ca]
        rc, out, err = bench(*common, "--csv")
        self.assertEqual(rc, 0, "eft-bench %s --csv: exit %d\n%s\n%s" % (mode, rc, out, err))
        csv_rows = parse_csv(self, out)
        self.assertEqual(len(csv_rows), rows)
        rc, out, err = bench(*common, "--json")
        self.assertEqual(rc, 0, "eft-bench %s --json: exit %d\n%s\n%s" % (mode, rc, out, err))
        json_rows = parse_json(self, out)
        self.assertEqual(len(json_rows), rows)
        for r, j in zip(csv_rows, json_rows):
            self.check_row(r, mode)
            # the JSON row is the same kind of row: null exactly where CSV is empty
            for col in COLUMNS:
                if col == "complete":
                    self.assertIs(j[col], True)
                elif col == "error":
                    self.assertIsNone(j[col])
                else:
                    self.assertEqual(r[col] is None, j[col] is None, "%s: csv %r json %r"
                                     % (col, r[col], j[col]))
            for col in ("mode", "server", "size", "count", "conns", "inflight", "delivered", "ack",
                        "transport"):
                self.assertEqual(r[col], j[col], col)
        return csv_rows

    def check_row(self, r, mode):
        self.assertEqual(r["mode"], mode)
        self.assertTrue(r["server"].startswith("eft/"), r["server"])
        self.assertEqual(r["host"], "127.0.0.1")
        self.assertEqual(r["port"], self.broker.port)
        self.assertEqual(r["count"], N)
        self.assertEqual(r["ack"], "auto")
        self.assertEqual(r["complete"], 1)
        self.assertEqual(r["error"], "")
        self.assertEqual(r["transport"], harness.TRANSPORT)
        self.assertEqual(r["persistent"], 0)
        self.assertEqual(r["receipt_window"], None if mode == "rpc" else 0)
        for col in CHECKS:
            self.assertEqual(r[col], 0, col)
        for col in ("total_s", "msgs_per_s", "mb_per_s"):
            self.assertIsNotNone(r[col], col)
            self.assertGreater(r[col], 0, col)
        # msgs_per_s = delivered / total_s; mb_per_s = delivered * size / total_s / 10^6
        self.assertAlmostEqual(r["msgs_per_s"] / (r["delivered"] / r["total_s"]), 1, delta=0.01)
        self.assertAlmostEqual(r["mb_per_s"] / (r["delivered"] * r["size"] / r["total_s"] / 1e6),
                               1, delta=0.01)
        if mode == "sendrecv":
            for col in LATENCY:
                self.assertIsNone(r[col], col)
        else:
            lat = [r[col] for col in LATENCY]
            self.assertNotIn(None, lat)
            self.assertLessEqual(r["lat_min_us"], r["lat_p50_us"])
            self.assertLessEqual(r["lat_p50_us"], r["lat_p90_us"])
            self.assertLessEqual(r["lat_p90_us"], r["lat_p99_us"])
            self.assertLessEqual(r["lat_p99_us"], r["lat_p999_us"])
            self.assertLessEqual(r["lat_p999_us"], r["lat_max_us"])
            self.assertLessEqual(r["lat_min_us"], r["lat_mean_us"])
            self.assertLessEqual(r["lat_mean_us"], r["lat_max_us"])
        if mode != "rpc":
            self.assertIsNone(r["inflight"])

    def test_sendrecv(self):
        (r,) = self.run_mode("sendrecv")
        self.assertEqual((r["size"], r["conns"], r["delivered"]), (1024, 1, N))
        self.assertGreater(r["send_s"], 0)
        self.assertGreater(r["recv_s"], 0)
        self.assertAlmostEqual(r["total_s"], r["send_s"] + r["recv_s"], delta=2e-6)

    def test_sendrecv_sizes(self):
        rows = self.run_mode("sendrecv", "--sizes", "64,1024", rows=2)
        self.assertEqual([r["size"] for r in rows], [64, 1024])
        for r in rows:
            self.assertEqual(r["delivered"], N)

    def test_stream(self):
        (r,) = self.run_mode("stream", "-s", 256)
        self.assertEqual((r["size"], r["conns"], r["delivered"]), (256, 2, N))
        self.assertGreater(r["send_s"], 0)

    def test_rpc(self):
        (r,) = self.run_mode("rpc", "-c", 2, "--inflight", 4)
        self.assertEqual((r["conns"], r["inflight"], r["delivered"]), (3, 4, N))

    def test_fanout(self):
        (r,) = self.run_mode("fanout", "-k", 3)
        self.assertEqual((r["conns"], r["delivered"]), (4, 3 * N))

    def test_every_mode_leaves_eftd_clean(self):
        """eft-bench speaks clean STOMP and disconnects properly: eftd logs no
        protocol error, warning or torn frame, and closes every connection."""
        self.run_mode("sendrecv", "-s", 64)
        self.run_mode("stream", "-s", 64)
        self.run_mode("rpc", "-c", 1, "--inflight", 1)
        self.run_mode("fanout", "-k", 1)
        deadline = time.monotonic() + 3 * SLOW
        while True:     # the last connection's close may not be logged yet
            log = self.broker.read_log()
            opened, closed = log.count(": connection open"), log.count(": connection closed")
            if opened == closed or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertEqual(opened, closed, log[-3000:])
        for line in log.splitlines():
            if "warn: no data-dir" in line:
                continue  # eftd's start-up note that it keeps messages in memory only
            for bad in (" warn: ", " error: ", "protocol error", "middle of a frame", "failed"):
                self.assertNotIn(bad, line)


# ---------------------------------------------------------------- a fake broker

class FakeBroker:
    """Just enough STOMP for 'eft-bench sendrecv': CONNECTED, RECEIPTs, stores
    SENDs and, on SUBSCRIBE, delivers them back, after `tamper(messages)`
    has had its way with the list of (destination, body).  error: answer the
    first SEND with an ERROR frame carrying that message, then close."""

    def __init__(self, tamper=None, error=None, connections=None, ws=None, ws_accept=None,
                 ws_opcode=1):
        """ws: speak WebSocket (see WsSock for the styles); ws_accept: the
        Sec-WebSocket-Accept to answer with instead of the right one;
        ws_opcode: the one eft-bench's messages must have (1 text, 2 binary)."""
        self.ws_opcode = ws_opcode
        self.tamper = tamper or (lambda msgs: msgs)
        self.ws = ws
        self.ws_accept = ws_accept
        self.ws_socks = []
        self.error = error
        self.connections = connections     # stop listening after this many accepts
        self.holder = None                 # ... and keep the port from others then
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.lsock.settimeout(0.1)
        self.port = self.lsock.getsockname()[1]
        self.stop_event = threading.Event()
        self.threads = []
        self.failures = []          # exceptions in the fake itself
        self.frames_seen = []
        self.accepter = threading.Thread(target=self.accept_loop, daemon=True)

    def __enter__(self):
        self.accepter.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.accepter.join(timeout=5)
        for t in self.threads:
            t.join(timeout=5)
        self.lsock.close()
        if self.holder is not None:
            self.holder.close()

    def accept_loop(self):
        deadline = time.monotonic() + 30 * SLOW
        while not self.stop_event.is_set() and time.monotonic() < deadline:
            try:
                sock, _ = self.lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            t = threading.Thread(target=self.serve, args=(sock,), daemon=True)
            self.threads.append(t)
            t.start()
            if self.connections is not None and len(self.threads) >= self.connections:
                self.lsock.close()      # the broker is gone for whoever comes next
                # The port stays bound, not listening: a connect is refused,
                # and no other process's listener (port 0) can take it.
                self.holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    self.holder.bind(("127.0.0.1", self.port))
                except OSError:
                    pass
                return

    def serve(self, sock):
        try:
            if self.ws is not None:
                sock = WsSock(sock, self.ws, self.ws_opcode)
                self.ws_socks.append(sock)
                if not sock.handshake(self.ws_accept):
                    return
            self.serve_frames(sock)
        except Exception as e:          # noqa: BLE001 - reported by the test
            self.failures.append(repr(e))
        finally:
            sock.close()

    def serve_frames(self, sock):
        sock.settimeout(0.1)
        deadline = time.monotonic() + 20 * SLOW
        buf = b""
        conn = {"stored": [], "msg_id": 0}     # SENDs not yet delivered back; MESSAGEs sent
        while not self.stop_event.is_set() and time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except socket.timeout:
                continue
            if not data:
                return
            frames, buf, _ = parse_frames(buf + data)
            for f in frames:
                if not self.answer(sock, f, conn):
                    return

    def answer(self, sock, f, conn):
        """Answers one frame from eft-bench; False when the connection is done."""
        self.frames_seen.append(f.command)
        out = b""
        if f.command in ("CONNECT", "STOMP"):
            out += frame("CONNECTED", [("version", "1.2"), ("server", "fake/1.0"),
                                       ("heart-beat", "0,0")])
        elif f.command == "SEND":
            if self.error is not None:
                sock.sendall(frame("ERROR", [("message", self.error),
                                             ("content-type", "text/plain")],
                                   b"the fake broker refuses every SEND\n"))
                return False
            conn["stored"].append((f["destination"], f.body))
        elif f.command == "SUBSCRIBE":
            if f.get("receipt") is not None:
                out += frame("RECEIPT", [("receipt-id", f["receipt"])])
            for dest, b in self.tamper(list(conn["stored"])):
                conn["msg_id"] += 1
                out += frame("MESSAGE", [("subscription", f["id"]),
                                         ("message-id", str(conn["msg_id"])),
                                         ("destination", dest),
                                         ("content-length", str(len(b)))], b)
            conn["stored"] = []
            sock.sendall(out)
            return True
        if f.get("receipt") is not None and f.command not in ("CONNECT", "STOMP"):
            out += frame("RECEIPT", [("receipt-id", f["receipt"])])
        if out:
            sock.sendall(out)
        return f.command != "DISCONNECT"


WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def ws_frame(opcode, payload, fin=True):
    """A server's WebSocket frame: not masked."""
    n = len(payload)
    b0 = (0x80 if fin else 0) | opcode
    if n < 126:
        head = bytes([b0, n])
    elif n < 65536:
        head = bytes([b0, 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([b0, 127]) + n.to_bytes(8, "big")
    return head + payload


class WsSock:
    """The server side of a WebSocket, to FakeBroker a socket of STOMP bytes.

    recv() returns the payload of the client's data messages, after checking
    that each is masked, of the expected opcode, and holds exactly one
    STOMP frame (problems collects what was wrong); pongs collects the
    payloads of the client's pongs.  sendall() sends STOMP bytes as `style`
    says: "per-frame" (one binary message per STOMP frame, as RabbitMQ
    does), "together" (a ping, a heart-beat message, then everything in one
    text message), "split" (text messages of 777 bytes, cutting STOMP frames
    anywhere) or "fragmented" (one message in 500-byte frames with a ping
    between the first two)."""

    PING = b"are you there"

    def __init__(self, sock, style, opcode=1):
        self.sock = sock
        self.style = style
        self.opcode = opcode
        self.raw = b""
        self.pongs = []
        self.problems = []
        self.request = b""

    def settimeout(self, t):
        self.sock.settimeout(t)

    def close(self):
        self.sock.close()

    def handshake(self, accept=None):
        """Read the Upgrade request and answer 101; False when the client
        went away first."""
        self.sock.settimeout(5 * SLOW)
        while b"\r\n\r\n" not in self.raw:
            data = self.sock.recv(65536)
            if not data:
                return False
            self.raw += data
        head, _, self.raw = self.raw.partition(b"\r\n\r\n")
        self.request = head
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        key = headers.get("sec-websocket-key", "")
        if accept is None:
            accept = base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()
        self.sock.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                           "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n"
                           "Sec-WebSocket-Protocol: v12.stomp\r\n\r\n" % accept).encode())
        return True

    def frames(self):
        """Take the complete client frames off self.raw: (opcode, payload)."""
        out = []
        while len(self.raw) >= 2:
            b0, b1 = self.raw[0], self.raw[1]
            n, pos = b1 & 0x7F, 2
            if n == 126:
                n, pos = int.from_bytes(self.raw[2:4], "big"), 4
            elif n == 127:
                n, pos = int.from_bytes(self.raw[2:10], "big"), 10
            if not b1 & 0x80:
                self.problems.append("an unmasked frame")
                raise ConnectionError("unmasked client frame")
            if len(self.raw) < pos + 4 + n:
                break
            mask = self.raw[pos:pos + 4]
            data = bytes(c ^ mask[i % 4] for i, c in enumerate(self.raw[pos + 4:pos + 4 + n]))
            if not b0 & 0x80:
                self.problems.append("a fragmented message")
            out.append((b0 & 0x0F, data))
            self.raw = self.raw[pos + 4 + n:]
        return out

    def recv(self, n):
        while True:
            stomp, closed = b"", False
            for op, data in self.frames():
                if op == 0xA:
                    self.pongs.append(data)
                elif op == 0x8:
                    closed = True
                elif op in (1, 2):
                    if op != self.opcode:
                        self.problems.append("opcode %d" % op)
                    frames, rest, _ = parse_frames(data)
                    if len(frames) != 1 or rest:
                        self.problems.append("a message of %d frames and %d bytes more"
                                             % (len(frames), len(rest)))
                    stomp += data
                else:
                    self.problems.append("opcode %d" % op)
            if stomp or closed:
                return stomp
            data = self.sock.recv(n)
            if not data:
                return b""
            self.raw += data

    def sendall(self, data):
        if self.style == "per-frame":
            out = b"".join(ws_frame(2, f + b"\0") for f in data.split(b"\0")[:-1])
        elif self.style == "together":
            out = ws_frame(9, self.PING) + ws_frame(1, b"\n") + ws_frame(1, data)
        elif self.style == "split":
            out = b"".join(ws_frame(1, data[i:i + 777]) for i in range(0, len(data), 777))
        else:
            pieces = [data[i:i + 500] for i in range(0, len(data), 500)]
            out = b""
            for i, p in enumerate(pieces):
                out += ws_frame(1 if i == 0 else 0, p, fin=i == len(pieces) - 1)
                if i == 0:
                    out += ws_frame(9, self.PING)
        self.sock.sendall(out)


def drop(i):
    return lambda msgs: msgs[:i] + msgs[i + 1:]


def duplicate(i):
    return lambda msgs: msgs[:i + 1] + [msgs[i]] + msgs[i + 1:]


def swap(i):
    return lambda msgs: msgs[:i] + [msgs[i + 1], msgs[i]] + msgs[i + 2:]


def corrupt(i):
    def tamper(msgs):
        dest, body = msgs[i]
        body = body[:-1] + bytes([body[-1] ^ 0x20])    # the filler's last byte: still printable
        return msgs[:i] + [(dest, body)] + msgs[i + 1:]
    return tamper


class EftBenchCatchesBrokers(unittest.TestCase):
    """eft-bench exits 1 and says why when a broker misbehaves."""

    def run_against(self, fake, *extra):
        # Found out by eft-bench (at most -t 1 after the last progress), not
        # by its --duration running out: the bound is well under that.
        with fake:
            t0 = time.monotonic()
            rc, out, err = bench("sendrecv", "-p", fake.port, "-n", 50, "-s", 64, "-t", 1,
                                 "-d", 20 * SLOW, *extra, timeout=30)
            elapsed = time.monotonic() - t0
        self.assertEqual(fake.failures, [], "the fake broker itself failed")
        self.assertLess(elapsed, 8 * SLOW, "eft-bench took %.1f s" % elapsed)
        return rc, out, err

    def run_csv(self, fake):
        rc, out, err = self.run_against(fake, "--csv")
        self.assertEqual(rc, 1, "eft-bench exit status\nstdout: %s\nstderr: %s" % (out, err))
        (row,) = parse_csv(self, out)
        self.assertEqual(row["server"], "fake/1.0")
        return row, err

    def test_fake_broker_that_behaves_passes(self):
        """The fake is good enough: untampered, eft-bench is satisfied."""
        rc, out, err = self.run_against(FakeBroker(), "--csv")
        self.assertEqual(rc, 0, out + err)
        (row,) = parse_csv(self, out)
        self.assertEqual((row["delivered"], row["complete"]), (50, 1))
        for col in CHECKS:
            self.assertEqual(row[col], 0, col)

    def test_lost_message(self):
        row, err = self.run_csv(FakeBroker(tamper=drop(17)))
        self.assertEqual(row["lost"], 1)
        self.assertEqual(row["delivered"], 49)
        self.assertEqual((row["duplicated"], row["reordered"], row["corrupted"]), (0, 0, 0))
        rc, out, err = self.run_against(FakeBroker(tamper=drop(17)))    # the text table says so too
        self.assertEqual(rc, 1)
        self.assertIn("lost 1", out + err)

    def test_duplicated_message(self):
        row, err = self.run_csv(FakeBroker(tamper=duplicate(17)))
        self.assertEqual(row["duplicated"], 1)
        self.assertEqual(row["delivered"], 50)
        self.assertEqual(row["lost"], 0)
        self.assertIn("arrived twice", err)

    def test_reordered_message(self):
        row, err = self.run_csv(FakeBroker(tamper=swap(17)))
        self.assertEqual(row["reordered"], 1)
        self.assertEqual((row["delivered"], row["lost"], row["duplicated"]), (50, 0, 0))
        self.assertIn("arrived after a later one", err)

    def test_corrupted_body(self):
        row, err = self.run_csv(FakeBroker(tamper=corrupt(17)))
        self.assertEqual(row["corrupted"], 1)
        self.assertEqual(row["delivered"], 49)
        self.assertIn("corrupted message", err)

    def test_broker_error(self):
        fake = FakeBroker(error="quota exceeded for /queue/x")
        rc, out, err = self.run_against(fake, "--csv")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("quota exceeded for /queue/x", err)
        (row,) = parse_csv(self, out)
        self.assertEqual(row["complete"], 0)
        self.assertIn("quota exceeded for /queue/x", row["error"])

    def test_broker_error_json(self):
        rc, out, err = self.run_against(FakeBroker(error="go away"), "--json")
        self.assertEqual(rc, 1, out + err)
        self.assertIn("go away", err)
        (row,) = parse_json(self, out)
        self.assertIs(row["complete"], False)
        self.assertIn("go away", row["error"])


class EftBenchWsFake(unittest.TestCase):
    """--ws against a fake WebSocket broker: whatever way the broker cuts
    its STOMP bytes into messages and frames, every message arrives and is
    checked; each SEND goes out as one masked message; pings are answered;
    a wrong handshake answer fails in one line."""

    def run_ws(self, style, *extra, sizes="64,3000,70000"):
        with FakeBroker(ws=style) as fake:
            rc, out, err = bench("sendrecv", "-p", fake.port, "-n", 40, "--sizes", sizes,
                                 "-t", 3, "-d", 20, "--ws", "--csv", *extra, timeout=30)
        self.assertEqual(fake.failures, [], "the fake broker itself failed")
        self.assertEqual(rc, 0, "style %s: %s %s" % (style, out, err))
        rows = parse_csv(self, out)
        self.assertEqual([(r["delivered"], r["complete"], r["transport"]) for r in rows],
                         [(40, 1, "ws")] * len(rows))
        for ws in fake.ws_socks:
            self.assertEqual(ws.problems, [], style)
            self.assertTrue(ws.request.startswith(b"GET /ws HTTP/1.1\r\n"), ws.request)
            for h in (b"Upgrade: websocket", b"Connection: Upgrade", b"Sec-WebSocket-Version: 13",
                      b"Sec-WebSocket-Protocol: v12.stomp, v11.stomp, v10.stomp",
                      b"Host: 127.0.0.1:%d" % fake.port):
                self.assertIn(b"\r\n" + h + b"\r\n", ws.request + b"\r\n")
        return fake

    def test_one_message_per_frame(self):
        self.run_ws("per-frame")

    def test_many_frames_per_message_ping_and_heartbeat(self):
        fake = self.run_ws("together")
        self.assertTrue(all(WsSock.PING in ws.pongs for ws in fake.ws_socks),
                        [ws.pongs for ws in fake.ws_socks])

    def test_frames_split_across_messages(self):
        self.run_ws("split")

    def test_fragmented_message_with_ping_inside(self):
        fake = self.run_ws("fragmented")
        self.assertTrue(all(WsSock.PING in ws.pongs for ws in fake.ws_socks))

    def test_binary_and_path(self):
        with FakeBroker(ws="per-frame", ws_opcode=2) as fake:
            rc, out, err = bench("sendrecv", "-p", fake.port, "-n", 20, "-t", 3, "--ws",
                                 "--ws-binary", "--ws-path", "/stomp/x", "-q", timeout=30)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("port %d over WebSocket (fake/1.0)" % fake.port, out)
        (ws,) = fake.ws_socks
        self.assertTrue(ws.request.startswith(b"GET /stomp/x HTTP/1.1\r\n"), ws.request)
        self.assertEqual(ws.problems, [])

    def test_broker_error_over_ws(self):
        with FakeBroker(ws="per-frame", error="go away") as fake:
            rc, out, err = bench("sendrecv", "-p", fake.port, "-n", 20, "-t", 3, "--ws", "--csv",
                                 timeout=30)
        self.assertEqual(rc, 1, out + err)
        (row,) = parse_csv(self, out)
        self.assertIn("go away", row["error"])

    def test_wrong_accept_fails_in_one_line(self):
        with FakeBroker(ws="per-frame", ws_accept="bm90IHRoZSByaWdodCBhbnN3ZXI=") as fake:
            rc, out, err = bench("sendrecv", "-p", fake.port, "-n", 20, "-t", 3, "--ws", "--csv",
                                 timeout=30)
        what = "exit %d\nstdout: %r\nstderr: %r" % (rc, out, err)
        self.assertEqual((rc, out), (1, ""), what)
        self.assertEqual(len(err.splitlines()), 1, what)
        self.assertIn("WebSocket handshake with 127.0.0.1 port %d (GET /ws) failed" % fake.port,
                      err)
        self.assertIn("wrong Sec-WebSocket-Accept", err)

    def test_ws_options_need_ws(self):
        rc, out, err = bench("sendrecv", "--ws-path", "/ws")
        self.assertEqual(rc, 2, err)
        self.assertIn("apply with --ws only", err)
        rc, out, err = bench("sendrecv", "--ws", "--ws-path", "ws")
        self.assertEqual(rc, 2, err)
        rc, out, err = bench("--help")
        self.assertEqual(rc, 0)
        for opt in ("--ws ", "--ws-path PATH", "--ws-binary", "wss"):
            self.assertIn(opt, out)


class ReceiptFake(FakeBroker):
    """FakeBroker that holds the RECEIPTs for SENDs until eft-bench has been
    quiet for a moment (so a producer that ignored its window would show
    more outstanding), and counts: SENDs and their headers, receipts asked
    for and not yet given (the most at any time).  receipts(ids) may tamper
    with each batch of receipt-ids before they go out."""

    HOLD = 0.02     # seconds of silence before the held receipts go out

    def __init__(self, receipts=None, **kw):
        super().__init__(**kw)
        self.tamper_receipts = receipts or (lambda ids: ids)
        self.sends = []             # the SEND frames, in order
        self.outstanding = 0
        self.max_outstanding = 0

    def serve_frames(self, sock):
        sock.settimeout(self.HOLD)
        deadline = time.monotonic() + 20 * SLOW
        buf = b""
        conn = {"stored": [], "msg_id": 0, "held": []}
        while not self.stop_event.is_set() and time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except socket.timeout:
                self.release(sock, conn)
                continue
            if not data:
                return
            frames, buf, _ = parse_frames(buf + data)
            for f in frames:
                if f.command == "SEND" and f.get("receipt") is not None:
                    self.sends.append(f)
                    conn["stored"].append((f["destination"], f.body))
                    conn["held"].append(f["receipt"])
                    self.outstanding += 1
                    self.max_outstanding = max(self.max_outstanding, self.outstanding)
                    continue
                if f.command == "SEND":
                    self.sends.append(f)
                self.release(sock, conn)
                if not self.answer(sock, f, conn):
                    return

    def release(self, sock, conn):
        if not conn["held"]:
            return
        ids, conn["held"] = conn["held"], []
        self.outstanding -= len(ids)
        sock.sendall(b"".join(frame("RECEIPT", [("receipt-id", i)])
                              for i in self.tamper_receipts(ids)))


class EftBenchPersistent(unittest.TestCase):
    """--persistent puts persistent:true on every SEND; --receipt-window N
    asks a RECEIPT for every SEND and never has more than N outstanding; a
    missing, extra or out-of-order RECEIPT fails the run."""

    def run_fake(self, fake, *extra, count=60, expect_rc=0):
        with fake:
            t0 = time.monotonic()
            rc, out, err = bench("sendrecv", "-p", fake.port, "-n", count, "-s", 64, "-t", 1,
                                 "-d", 20 * SLOW, "--csv", *extra, timeout=30)
            elapsed = time.monotonic() - t0
        self.assertEqual(fake.failures, [], "the fake broker itself failed")
        self.assertEqual(rc, expect_rc, "exit %d\nstdout: %s\nstderr: %s" % (rc, out, err))
        # ended by itself (or -t 1), well before --duration
        self.assertLess(elapsed, 10 * SLOW, "eft-bench took %.1f s" % elapsed)
        (row,) = parse_csv(self, out)
        return row, err

    def test_persistent_on_every_send(self):
        fake = FakeBroker()
        row, _ = self.run_fake(fake, "--persistent")
        self.assertEqual((row["persistent"], row["receipt_window"], row["delivered"]), (1, 0, 60))
        self.assertEqual(fake.frames_seen.count("SEND"), 60)

        fake = ReceiptFake()
        row, _ = self.run_fake(fake, "--persistent", "--receipt-window", 7)
        self.assertEqual(len(fake.sends), 60)
        for f in fake.sends:
            self.assertEqual([v for k, v in f.headers if k == "persistent"], ["true"], f)

    def test_not_persistent_by_default(self):
        fake = ReceiptFake()
        row, _ = self.run_fake(fake, "--receipt-window", 3)
        self.assertEqual((row["persistent"], row["receipt_window"]), (0, 3))
        self.assertEqual([f for f in fake.sends if f.get("persistent") is not None], [])

    def test_window_bounds_receipts_outstanding(self):
        for window in (1, 5, 16):
            fake = ReceiptFake()
            row, _ = self.run_fake(fake, "--persistent", "--receipt-window", window)
            self.assertEqual((row["complete"], row["delivered"], row["receipt_window"]),
                             (1, 60, window))
            # every SEND asked for its own receipt, numbered in order
            self.assertEqual([f.get("receipt") for f in fake.sends],
                             ["eft-bench-%d" % i for i in range(60)])
            # never more than the window outstanding, and the window was used
            self.assertEqual(fake.max_outstanding, window)

    def test_without_window_only_the_last_send_asks(self):
        fake = ReceiptFake()
        self.run_fake(fake, "--persistent")
        self.assertEqual(fake.max_outstanding, 1)
        self.assertEqual(len(fake.sends), 60)
        self.assertEqual([f.get("receipt") for f in fake.sends].count(None), 59)

    def test_receipts_out_of_order(self):
        def swap(ids):
            return list(reversed(ids)) if "eft-bench-10" in ids else ids
        row, err = self.run_fake(ReceiptFake(receipts=swap), "--receipt-window", 4, expect_rc=1)
        self.assertEqual(row["complete"], 0)
        self.assertIn("receipts must come back in order", row["error"])
        self.assertIn("receipts must come back in order", err)

    def test_receipt_missing(self):
        """One skipped in the middle shows as the next one coming early; the
        last one missing as --timeout with the receipt named."""
        def drop(ids, which):
            return [i for i in ids if i != which]
        row, err = self.run_fake(ReceiptFake(receipts=lambda ids: drop(ids, "eft-bench-21")),
                                 "--receipt-window", 4, expect_rc=1)
        self.assertEqual(row["complete"], 0)
        self.assertIn("RECEIPT for 'eft-bench-22' where 'eft-bench-21' was due", row["error"])
        row, err = self.run_fake(ReceiptFake(receipts=lambda ids: drop(ids, "eft-bench-59")),
                                 "--receipt-window", 4, expect_rc=1)
        self.assertEqual(row["complete"], 0)
        self.assertIn("no RECEIPT for 'eft-bench-59' within 1.0 s (--timeout): 59 of 60 SENDs "
                      "have their RECEIPT, 1 outstanding", row["error"])

    def test_receipt_extra(self):
        for twice in ("eft-bench-30", "eft-bench-59"):
            def dup(ids, twice=twice):
                return [j for i in ids for j in ([i, i] if i == twice else [i])]
            row, err = self.run_fake(ReceiptFake(receipts=dup), "--receipt-window", 4,
                                     expect_rc=1)
            self.assertEqual(row["complete"], 0)
            self.assertIn("RECEIPT for '%s'" % twice, row["error"])

    def test_usage_and_help(self):
        rc, out, err = bench("rpc", "--receipt-window", 3)
        self.assertEqual(rc, 2, err)
        self.assertIn("--receipt-window applies to sendrecv, stream and fanout", err)
        rc, out, err = bench("sendrecv", "--receipt-window", "x")
        self.assertEqual(rc, 2, err)
        rc, out, err = bench("--help")
        self.assertEqual(rc, 0)
        for opt in ("--persistent", "--receipt-window N", "persistent receipt_window"):
            self.assertIn(opt, out)


def tls_args():
    """What eft-bench needs to reach the run's eftd: TLS in the tls pass."""
    return ["--tls", "--ca", harness.certs().ca] if harness.TRANSPORT == "tls" else []


class EftBenchPersistentEftd(BrokerTest):
    """--persistent and --receipt-window against a real eftd, in the modes
    that take them: every message checked, the settings in the row, and
    eftd logs nothing wrong."""

    def run_mode(self, mode, *args):
        rc, out, err = bench(mode, "-p", self.broker.port, "-n", N, "-t", 10 * SLOW,
                             "-d", 20 * SLOW, "--json", *(tls_args() + list(args)))
        self.assertEqual(rc, 0, "eft-bench %s %s: exit %d\n%s\n%s" % (mode, args, rc, out, err))
        (r,) = parse_json(self, out)
        self.assertEqual((r["complete"], r["error"], r["delivered"]),
                         (True, None, N * (2 if mode == "fanout" else 1)))
        for col in CHECKS:
            self.assertEqual(r[col], 0, col)
        return r

    def test_modes(self):
        for window in (1, 100):
            r = self.run_mode("sendrecv", "--persistent", "--receipt-window", window)
            self.assertEqual((r["persistent"], r["receipt_window"]), (True, window))
            self.assertGreater(r["send_s"], 0)
        r = self.run_mode("stream", "--persistent", "--receipt-window", 10)
        self.assertEqual((r["persistent"], r["receipt_window"]), (True, 10))
        r = self.run_mode("fanout", "-k", 2, "--receipt-window", 10, "--rate", 20000)
        self.assertEqual((r["persistent"], r["receipt_window"]), (False, 10))
        r = self.run_mode("rpc", "--persistent")
        self.assertEqual((r["persistent"], r["receipt_window"]), (True, None))
        log = self.broker.read_log()
        for line in log.splitlines():
            if "warn: no data-dir" in line:
                continue
            for bad in (" warn: ", " error: ", "protocol error", "middle of a frame"):
                self.assertNotIn(bad, line)

    def test_persistent_header_reaches_a_subscriber(self):
        """eftd passes persistent:true through: a raw subscriber on the topic
        eft-bench fanout uses sees it (the name comes from eft-bench's pid)."""
        p = subprocess.Popen([str(a) for a in (EFT_BENCH, "fanout", "-p", self.broker.port,
                              "-n", 200, "-k", 1, "--rate", 100, "--persistent", "-q",
                              "-t", 10 * SLOW, *tls_args())],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            # fanout's topic: /topic/eft-bench-<pid>-<unix time>-1024; the time is
            # taken at start, so try the seconds around now
            c = self.client()
            now = int(time.time())
            for i, t in enumerate(range(now - 2, now + 3)):
                c.send_frame("SUBSCRIBE", [("id", str(i)), ("destination",
                             "/topic/eft-bench-%d-%d-1024" % (p.pid, t))])
            f = c.expect("MESSAGE", timeout=5)
            self.assertEqual(f.get("persistent"), "true", f)
        finally:
            p.kill()
            p.communicate(timeout=10)


class BenchScript(unittest.TestCase):
    """tools/bench (make bench) end to end, at tiny N: its own eftd, the four CSVs."""

    def test_quick_run(self):
        out = tempfile.mkdtemp(prefix="eft-bench-results-")
        try:
            args = [os.path.join(ROOT, "tools", "bench"), "--quick", "-n", "200", "--out", out,
                    "--timeout", str(10 * SLOW)]
            charts = shutil.which("gnuplot") is not None
            if not charts:
                args.append("--no-charts")
            p = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=60 * SLOW)
            text = p.stdout.decode("utf-8", "replace")
            self.assertEqual(p.returncode, 0, text)
            self.assertIn("stopped eftd (exit status 0)", text)
            for name, n in (("sendrecv-sweep", 10), ("stream", 3), ("rpc", 7), ("fanout", 5)):
                with open(os.path.join(out, name + ".csv")) as f:
                    rows = parse_csv(self, f.read())
                self.assertEqual(len(rows), n, name)
                if name == "sendrecv-sweep":
                    self.assertEqual([r["size"] for r in rows], [64 << i for i in range(10)])
                for r in rows:
                    self.assertEqual((r["count"], r["complete"]), (200, 1), name)
                    for col in CHECKS:
                        self.assertEqual(r[col], 0, "%s %s" % (name, col))
            if charts:
                for png in ("sendrecv-time", "sendrecv-split", "rpc", "fanout", "stream"):
                    with open(os.path.join(out, png + ".png"), "rb") as f:
                        self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", png)
            self.assertEqual([f for f in os.listdir(out) if f.endswith(".tmp")], [])
        finally:
            shutil.rmtree(out, ignore_errors=True)


class EftBenchBrokerGone(unittest.TestCase):
    """No broker: a prompt failure, not a hang, and no result: no table
    header, no FAILED row, no CSV or JSON, just one line on stderr."""

    def check_unreached(self, *args, port=None):
        port = port or free_port()
        rc, out, err = bench(*args, "-p", port, "-n", 10, "-t", 2, timeout=15)
        what = "eft-bench %s -p %d\nstdout: %r\nstderr: %r" % (" ".join(map(str, args)), port,
                                                                  out, err)
        self.assertEqual(rc, 1, what)
        self.assertEqual(out, "", what)
        self.assertEqual(len(err.splitlines()), 1, what)
        self.assertTrue(err.endswith("\n"), what)
        self.assertIn("127.0.0.1 port %d" % port, err, what)
        self.assertIn("cannot connect", err, what)
        return err

    def test_nothing_listening(self):
        self.check_unreached("sendrecv")

    def test_nothing_listening_csv(self):
        self.check_unreached("sendrecv", "--csv")

    def test_nothing_listening_json(self):
        self.check_unreached("sendrecv", "--json")

    def test_nothing_listening_sizes(self):
        """--sweep and --sizes stop at the first run: one line, not one per size."""
        self.check_unreached("sendrecv", "--sweep")
        self.check_unreached("sendrecv", "--sizes", "64,128", "--csv")
        self.check_unreached("sendrecv", "--sweep", "--json")

    def test_nothing_listening_every_mode(self):
        self.check_unreached("stream", "--csv")
        self.check_unreached("rpc", "-c", 2)
        self.check_unreached("fanout", "-k", 3, "--json")

    def test_broker_gone_between_sizes(self):
        """The rows measured before the broker went away stay; then one line."""
        with FakeBroker(connections=1) as fake:
            rc, out, err = bench("sendrecv", "-p", fake.port, "-n", 50, "--sizes", "64,128,256",
                                 "-t", 2, "--csv", timeout=15)
        self.assertEqual(fake.failures, [], "the fake broker itself failed")
        self.assertEqual(rc, 1, out + err)
        rows = parse_csv(self, out)
        self.assertEqual([r["size"] for r in rows], [64], out)
        self.assertEqual((rows[0]["complete"], rows[0]["delivered"]), (1, 50))
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("cannot connect to 127.0.0.1 port %d" % fake.port, err)


# ---------------------------------------------------------------- TLS

TLS_TOOLS_MISSING = [t for t in ("openssl", "socat") if shutil.which(t) is None]


def make_certs(d):
    """Into directory d: a throwaway CA (ca.pem), a server certificate it
    signs for IP 127.0.0.1 and DNS localhost (server.pem, server.key), and a
    self-signed certificate for the same names (self.pem, self.key)."""
    def openssl(*args):
        p = subprocess.run(["openssl"] + list(args), cwd=d, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30)
        if p.returncode != 0:
            raise RuntimeError("openssl %s: %s" % (" ".join(args), p.stdout.decode("utf-8", "replace")))
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"]
    openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=eft-bench test CA")
    openssl("req", *key, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=eft-bench test server")
    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                "extendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "2",
            "-days", "2", "-extfile", "server.ext", "-out", "server.pem")
    openssl("req", "-x509", *key, "-keyout", "self.key", "-out", "self.pem", "-subj", "/CN=localhost",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost")


class Socat:
    """socat terminating TLS on a free port in front of a plain TCP port.  It
    forks per connection, so it runs in its own session and stop() signals
    the whole process group."""

    def __init__(self, cert, key, target_port):
        self.port = free_port()
        # nodelay both ways: without it socat's small writes wait for
        # delayed ACKs (40 ms stalls) and the runs only get slower.
        listen = "OPENSSL-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork,cert=%s,key=%s,verify=0,nodelay" % (
            self.port, cert, key)
        self.proc = subprocess.Popen(["socat", listen, "TCP:127.0.0.1:%d,nodelay" % target_port],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 5 * SLOW
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("socat exited with status %d" % self.proc.returncode)
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("socat did not listen on port %d" % self.port)
                time.sleep(0.02)

    def stop(self):
        if self.proc.returncode is not None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=5)
                return
            except subprocess.TimeoutExpired:
                continue


@unittest.skipIf(TLS_TOOLS_MISSING, "--tls tests need %s (tools/install-deps test installs them)"
                 % " and ".join(TLS_TOOLS_MISSING))
@unittest.skipIf(harness.TRANSPORT == "tls", "eft-bench against eftd's own TLS: EftBenchModes")
class EftBenchTls(BrokerTest):
    """--tls against eftd behind socat: every mode works and checks every
    message; verification fails when it should, in one line naming host,
    port and OpenSSL's reason; a plain port fails at once, not at --timeout."""

    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="eft-bench-tls-")
        try:
            make_certs(cls.certs)
        except Exception:
            shutil.rmtree(cls.certs, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.certs, ignore_errors=True)

    def setUp(self):
        super().setUp()
        self.socats = []

    def tearDown(self):
        for s in self.socats:       # first, so eftd sees its connections go
            s.stop()
        super().tearDown()

    def cert(self, name):
        return os.path.join(self.certs, name)

    def tls_port(self, cert="server"):
        """A TLS port in front of this test's eftd, with the CA-signed
        certificate ('server') or the self-signed one ('self')."""
        s = Socat(self.cert(cert + ".pem"), self.cert(cert + ".key"), self.broker.port)
        self.socats.append(s)
        self.addCleanup(s.stop)
        return s.port

    def run_ok(self, mode, port, *args, fmt="--csv"):
        rc, out, err = bench(mode, "-p", port, "-n", N, "-t", 10 * SLOW, "-d", 20 * SLOW, "--tls",
                             *args, fmt)
        self.assertEqual(rc, 0, "eft-bench %s --tls: exit %d\n%s\n%s" % (mode, rc, out, err))
        return out, err

    def check_row(self, r, mode, port, delivered):
        self.assertEqual((r["mode"], r["port"], r["count"], r["delivered"]), (mode, port, N, delivered))
        self.assertTrue(r["server"].startswith("eft/"), r["server"])
        self.assertEqual((r["complete"], r["error"], r["transport"]), (1, "", "tls"))
        for col in CHECKS:
            self.assertEqual(r[col], 0, col)
        self.assertGreater(r["total_s"], 0)

    def fails_in_one_line(self, *args, want, port, timeout=2):
        """eft-bench --tls ARGS exits 1 within a few seconds, prints no row,
        and says why in one stderr line naming host and port."""
        t0 = time.monotonic()
        rc, out, err = bench("sendrecv", "-p", port, "-n", 10, "-t", timeout, "--tls", *args,
                             timeout=15)
        elapsed = time.monotonic() - t0
        what = "exit %d after %.1f s\nstdout: %r\nstderr: %r" % (rc, elapsed, out, err)
        self.assertEqual(rc, 1, what)
        self.assertEqual(out, "", what)
        self.assertEqual(len(err.splitlines()), 1, what)
        self.assertIn("TLS handshake with 127.0.0.1 port %d" % port, err, what)
        self.assertIn(want, err, what)
        return elapsed, err

    # (a) every mode over TLS, every message checked

    def test_sendrecv(self):
        port = self.tls_port()
        out, _ = self.run_ok("sendrecv", port, "--ca", self.cert("ca.pem"))
        (r,) = parse_csv(self, out)
        self.check_row(r, "sendrecv", port, N)
        self.assertAlmostEqual(r["total_s"], r["send_s"] + r["recv_s"], delta=2e-6)

    def test_stream(self):
        port = self.tls_port()
        out, _ = self.run_ok("stream", port, "--ca", self.cert("ca.pem"), "-s", 256)
        (r,) = parse_csv(self, out)
        self.check_row(r, "stream", port, N)
        self.assertIsNotNone(r["lat_p50_us"])

    def test_rpc(self):
        port = self.tls_port()
        out, _ = self.run_ok("rpc", port, "--ca", self.cert("ca.pem"), "-c", 2, "--inflight", 4)
        (r,) = parse_csv(self, out)
        self.check_row(r, "rpc", port, N)
        self.assertEqual(r["conns"], 3)

    def test_fanout(self):
        port = self.tls_port()
        out, _ = self.run_ok("fanout", port, "--ca", self.cert("ca.pem"), "-k", 3)
        (r,) = parse_csv(self, out)
        self.check_row(r, "fanout", port, 3 * N)

    def test_input_left_inside_openssl(self):
        """A frame larger than one read's room fills it while OpenSSL still
        holds the frame's last bytes, and nothing more comes: eft-bench must
        read them without waiting for poll() (without, most of these runs
        stop at -t)."""
        port = self.tls_port()
        rc, out, err = bench("sendrecv", "-p", port, "-n", 1, "--sizes", "1m,2m,1m,2m", "-t", 3 * SLOW,
                             "--tls", "--ca", self.cert("ca.pem"), "--csv", timeout=60)
        self.assertEqual(rc, 0, out + err)
        rows = parse_csv(self, out)
        self.assertEqual([(r["delivered"], r["complete"], r["corrupted"]) for r in rows], [(1, 1, 0)] * 4)

    # (e) the transport column, the text header

    def test_transport_column_and_header(self):
        port = self.tls_port()
        out, _ = self.run_ok("sendrecv", port, "--ca", self.cert("ca.pem"), fmt="--json")
        (j,) = parse_json(self, out)
        self.assertEqual(j["transport"], "tls")
        out, _ = self.run_ok("sendrecv", port, "--ca", self.cert("ca.pem"), fmt="-q")
        self.assertIn("127.0.0.1 port %d over TLS (eft/" % port, out.splitlines()[0])
        rc, out, err = bench("sendrecv", "-p", self.broker.port, "-n", N, "--csv")
        self.assertEqual(rc, 0, out + err)
        (r,) = parse_csv(self, out)
        self.assertEqual(r["transport"], "tcp")
        rc, out, err = bench("sendrecv", "-p", self.broker.port, "-n", N)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("127.0.0.1 port %d over TCP (eft/" % self.broker.port, out.splitlines()[0])

    # (b) --insecure, and the system store refusing a self-signed certificate

    def test_insecure_accepts_self_signed(self):
        port = self.tls_port("self")
        out, err = self.run_ok("sendrecv", port, "--insecure")
        (r,) = parse_csv(self, out)
        self.check_row(r, "sendrecv", port, N)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("warning: --insecure", err)
        out, err = self.run_ok("sendrecv", port, "--insecure", "-q")
        self.assertEqual(err, "")

    def test_self_signed_fails_verification(self):
        port = self.tls_port("self")
        _, err = self.fails_in_one_line(want="certificate verify failed", port=port)
        self.assertIn("self-signed", err)
        # the test's CA did not sign it either
        self.fails_in_one_line("--ca", self.cert("ca.pem"), want="certificate verify failed", port=port)

    # (c) the name checked: --sni, or --host

    def test_wrong_sni_fails_verification(self):
        port = self.tls_port()
        _, err = self.fails_in_one_line("--ca", self.cert("ca.pem"), "--sni", "wrong.example",
                                        want="certificate verify failed", port=port)
        self.assertIn("hostname mismatch", err)

    def test_right_names_pass(self):
        """--sni localhost, and -H localhost (its default SNI), match the
        certificate's DNS entry; 127.0.0.1 matches its IP entry."""
        port = self.tls_port()
        self.run_ok("sendrecv", port, "--ca", self.cert("ca.pem"), "--sni", "localhost")
        out, _ = self.run_ok("sendrecv", port, "--ca", self.cert("ca.pem"), "-H", "localhost")
        self.assertEqual(parse_csv(self, out)[0]["host"], "localhost")

    # (d) a port that does not speak TLS

    def test_plain_port_fails_quickly(self):
        """eftd answers the ClientHello with a STOMP ERROR: OpenSSL sees no
        TLS and eft-bench says so at once, long before -t."""
        elapsed, err = self.fails_in_one_line("--ca", self.cert("ca.pem"), want="failed",
                                              port=self.broker.port, timeout=10 * SLOW)
        self.assertIn("not TLS", err)
        self.assertLess(elapsed, 3 * SLOW, err)   # well before -t

    def test_silent_port_fails_at_timeout(self):
        """A listener that never answers: the handshake is bounded by -t."""
        with socket.socket() as lsock:
            lsock.bind(("127.0.0.1", 0))
            lsock.listen(8)     # the kernel accepts; nobody ever answers
            port = lsock.getsockname()[1]
            elapsed, err = self.fails_in_one_line("--ca", self.cert("ca.pem"), want="did not finish",
                                                  port=port, timeout=1)
        self.assertLess(elapsed, 5 * SLOW, err)


class EftBenchTlsUsage(unittest.TestCase):
    """The TLS options' usage errors: exit 2, no broker needed."""

    def usage(self, *args):
        rc, out, err = bench("sendrecv", "-p", free_port(), *args, timeout=10)
        self.assertEqual(rc, 2, "%r: exit %d\n%s%s" % (args, rc, out, err))
        self.assertEqual(out, "")
        return err

    def test_tls_options_need_tls(self):
        for args in (("--ca", "x.pem"), ("--insecure",), ("--sni", "localhost")):
            self.assertIn("with --tls only", self.usage(*args))

    def test_ca_and_insecure_contradict(self):
        self.assertIn("not both", self.usage("--tls", "--ca", "x.pem", "--insecure"))

    def test_unreadable_ca(self):
        d = tempfile.mkdtemp(prefix="eft-bench-ca-")
        try:
            missing = os.path.join(d, "missing.pem")
            err = self.usage("--tls", "--ca", missing)
            self.assertEqual(len(err.splitlines()), 1, err)
            self.assertIn(missing, err)
            self.assertIn("No such file", err)
            junk = os.path.join(d, "junk.pem")
            with open(junk, "w") as f:
                f.write("not a certificate\n")
            err = self.usage("--tls", "--ca", junk)
            self.assertIn("cannot load CA certificates", err)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_help_documents_tls(self):
        rc, out, err = bench("--help")
        self.assertEqual(rc, 0)
        for opt in ("--tls", "--ca FILE", "--insecure", "--sni NAME", "transport"):
            self.assertIn(opt, out)



# ---------------------------------------------------------------- WebSocket against eftd

class EftBenchWsNotWs(BrokerTest):
    """--ws against a port that does not speak WebSocket (eftd's plain STOMP
    port): exit 1 within --timeout and a bit, no row, one line naming host,
    port and path and asking whether the port is a WebSocket one."""

    def test_plain_port_fails_in_one_line(self):
        for extra in ((), ("--csv",), ("--json",)):
            t0 = time.monotonic()
            rc, out, err = bench("sendrecv", "-p", self.broker.port, "-n", 10, "-t", 1, "--ws",
                                 *extra, timeout=15)
            elapsed = time.monotonic() - t0
            what = "exit %d after %.1f s\nstdout: %r\nstderr: %r" % (rc, elapsed, out, err)
            self.assertEqual((rc, out), (1, ""), what)
            self.assertEqual(len(err.splitlines()), 1, what)
            self.assertIn("WebSocket handshake with 127.0.0.1 port %d (GET /ws)"
                          % self.broker.port, err)
            self.assertIn("WebSocket one?", err)
            self.assertLess(elapsed, 5 * SLOW, what)


class EftBenchWs(BrokerTest):
    """Every mode over eftd's ws:// listener, and over its wss:// one, every
    message checked; the transport column says ws or wss."""

    listen = [("ws", "127.0.0.1"), ("wss", "127.0.0.1")]

    def run_mode(self, mode, *args, tls=False):
        port = self.broker.ports[1] if tls else self.broker.port
        extra = ["--tls", "--ca", harness.certs().ca] if tls else []
        rc, out, err = bench(mode, "-p", port, "-n", N, "-t", 10 * SLOW, "-d", 20 * SLOW, "--ws",
                             "--csv", *extra, *args)
        self.assertEqual(rc, 0, "eft-bench %s --ws%s: exit %d\n%s\n%s"
                         % (mode, " --tls" if tls else "", rc, out, err))
        (r,) = parse_csv(self, out)
        self.assertEqual((r["mode"], r["port"], r["count"]), (mode, port, N))
        self.assertTrue(r["server"].startswith("eft/"), r["server"])
        self.assertEqual((r["complete"], r["error"], r["transport"]),
                         (1, "", "wss" if tls else "ws"))
        for col in CHECKS:
            self.assertEqual(r[col], 0, col)
        return r

    def test_sendrecv(self):
        r = self.run_mode("sendrecv")
        self.assertEqual(r["delivered"], N)
        self.assertAlmostEqual(r["total_s"], r["send_s"] + r["recv_s"], delta=2e-6)

    def test_sendrecv_sizes_and_binary(self):
        rc, out, err = bench("sendrecv", "-p", self.broker.port, "-n", 200, "--sizes",
                             "64,1000,70000,1m", "-t", 10 * SLOW, "--ws", "--ws-binary", "--csv",
                             "--ack", "client-individual", timeout=60)
        self.assertEqual(rc, 0, out + err)
        rows = parse_csv(self, out)
        self.assertEqual([(r["delivered"], r["complete"]) for r in rows], [(200, 1)] * 4)

    def test_stream(self):
        r = self.run_mode("stream", "-s", 256)
        self.assertEqual(r["delivered"], N)
        self.assertIsNotNone(r["lat_p50_us"])

    def test_rpc(self):
        r = self.run_mode("rpc", "-c", 2, "--inflight", 4)
        self.assertEqual((r["delivered"], r["conns"]), (N, 3))

    def test_fanout(self):
        self.assertEqual(self.run_mode("fanout", "-k", 3)["delivered"], 3 * N)

    def test_every_mode_over_wss(self):
        self.assertEqual(self.run_mode("sendrecv", tls=True)["delivered"], N)
        self.assertEqual(self.run_mode("stream", tls=True)["delivered"], N)
        self.assertEqual(self.run_mode("rpc", "-c", 2, tls=True)["delivered"], N)
        self.assertEqual(self.run_mode("fanout", "-k", 2, tls=True)["delivered"], 2 * N)

    def test_wrong_path_fails_in_one_line(self):
        rc, out, err = bench("sendrecv", "-p", self.broker.port, "-n", 10, "-t", 2, "--ws",
                             "--ws-path", "/not-the-path", timeout=15)
        what = "exit %d\nstdout: %r\nstderr: %r" % (rc, out, err)
        self.assertEqual((rc, out), (1, ""), what)
        self.assertEqual(len(err.splitlines()), 1, what)
        self.assertIn("WebSocket handshake with 127.0.0.1 port %d (GET /not-the-path)"
                      % self.broker.port, err)


if __name__ == "__main__":
    unittest.main()
