"""stomp.js (@stomp/stompjs, the JavaScript client browsers use) against
eftd's WebSocket listener: in Node (test/js/stomp_node.mjs, with the ws
package) over ws:// and wss://, and in headless Chromium (test/js/page.html),
each exchanging messages with stomp.py on eftd's TCP listener: SUBSCRIBE with
ack client-individual, SEND and ACK with receipts, heart-beats, UTF-8 and
large bodies, queues and topics, and stomp.js reconnecting by itself after
eftd goes away and comes back on the same port.

Needs node and test/js/node_modules (test/js/setup, which tools/install-deps
test runs), stomp.py in this python, and for the browser test Chromium and
python3-websocket (the DevTools protocol, through browser.py); each test is
skipped, saying which, when its part is missing.  The tests manage their own listeners, so
they run once, in the tcp pass:

    /usr/bin/python3 test/e2e/run.py 'test_stompjs*.py'
"""

import functools
import http.server
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse

import browser
import harness
from harness import certs

JS = os.path.join(harness.ROOT, "test", "js")
NODE = shutil.which("node")
HAVE_MODULES = all(os.path.isfile(os.path.join(JS, "node_modules", m, "package.json"))
                   for m in ("@stomp/stompjs", "ws"))
WAIT = browser.WAIT  # seconds for any one step

try:
    import stomp
except ImportError:
    stomp = None

NEED_NODE = "no node" if not NODE else \
    "no test/js/node_modules (run test/js/setup)" if not HAVE_MODULES else \
    "stomp.py is not importable by this python (use /usr/bin/python3)" if not stomp else None
NEED_BROWSER = NEED_NODE or browser.NEED_CHROMIUM


class Peer:
    """A stomp.py connection (the peer of stomp.js), collecting what its
    subscriptions receive; waits are bounded."""

    def __init__(self, connect):
        """connect() returns a stomp.py connection, not yet connected."""
        self.cond = threading.Condition()
        self.bodies = {}
        self.errors = []
        self.receipts = set()
        self.headers = {}
        self.conn = connect()
        self.conn.set_listener("peer", self)
        self.conn.connect("guest", "guest", wait=True)
        self.subs = 0

    def on_message(self, frame):
        with self.cond:
            self.bodies.setdefault(frame.headers.get("destination"), []).append(frame.body)
            self.headers.setdefault(frame.headers.get("destination"), []).append(frame.headers)
            self.cond.notify_all()

    def on_error(self, frame):
        with self.cond:
            self.errors.append(frame.headers.get("message", frame.body))
            self.cond.notify_all()

    def on_receipt(self, frame):
        with self.cond:
            self.receipts.add(frame.headers.get("receipt-id"))
            self.cond.notify_all()

    def subscribe(self, dest):
        """Subscribe to dest and wait for the receipt (a topic's messages
        sent after this returns reach us)."""
        self.subs += 1
        receipt = "peer-sub-%d" % self.subs
        self.conn.subscribe(dest, id=str(self.subs), ack="auto", headers={"receipt": receipt})
        with self.cond:
            if not self.cond.wait_for(lambda: receipt in self.receipts or self.errors, WAIT):
                raise AssertionError("no receipt for stomp.py's SUBSCRIBE to " + dest)
            if self.errors:
                raise AssertionError("stomp.py peer got ERROR %r" % self.errors)

    def send(self, dest, body, headers=None):
        self.conn.send(dest, body, content_type="text/plain;charset=utf-8", headers=headers)

    def wait(self, dest, n, timeout=WAIT):
        """The first n bodies received from dest (fails after timeout)."""
        deadline = time.time() + timeout
        with self.cond:
            while len(self.bodies.get(dest, [])) < n:
                left = deadline - time.time()
                if left <= 0 or self.errors:
                    raise AssertionError("stomp.py peer got %d of %d messages on %s (errors %r)"
                                         % (len(self.bodies.get(dest, [])), n, dest, self.errors))
                self.cond.wait(left)
            return list(self.bodies[dest])

    def close(self):
        try:
            if self.conn.is_connected():
                self.conn.disconnect()
        except Exception:
            pass


class NodeClient:
    """test/js/stomp_node.mjs running; its JSON lines read by a thread."""

    def __init__(self, args):
        self.lines = queue.Queue()
        self.output = []
        self.proc = subprocess.Popen([NODE, os.path.join(JS, "stomp_node.mjs")] + args,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, cwd=JS)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.output.append(line)
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                pass  # a stray line (e.g. a Node warning): kept in output
        self.lines.put(None)

    def next(self, timeout=WAIT):
        """The next JSON line (None at EOF); fails after timeout."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("stomp_node.mjs said nothing for %s s; output:\n%s"
                                 % (timeout, self.text()))

    def text(self):
        return "\n".join(l[:400] for l in self.output)

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()
        self.reader.join(timeout=10)


def peer_body(tag, phase, i, count, big):
    text = "%s phase %d #%d gr\u00fc\u00df \u2713" % (tag, phase, i)
    if big and i == count - 1:
        text += " " + "y" * (big - len(text.encode()) - 1)
    return text


def run_node(test, url, peer_connect, in_dest, out_dest, count=3, big=0, phases=1,
             drop=None, extra=(), peer_sends_to=None):
    """Run stomp_node.mjs at url against a stomp.py peer (peer_connect()
    makes its connection): for each phase the peer sends `count` messages to
    in_dest once stomp.js is ready and must receive stomp.js's `count` on
    out_dest; before each later phase drop() makes the broker close stomp.js's
    connection and returns a fresh peer_connect.  peer_sends_to: where the
    peer sends instead of in_dest (a name in_dest, a pattern, matches).
    Returns node's result."""
    args = ["--url", url, "--in", in_dest, "--out", out_dest, "--count", str(count),
            "--big", str(big), "--phases", str(phases), "--timeout", str(WAIT)] + list(extra)
    peer = Peer(peer_connect)
    node = None
    try:
        peer.subscribe(out_dest)   # before stomp.js publishes (topics keep nothing)
        node = NodeClient(args)
        sent, got = {}, {}         # by phase: what the peer sent, and received
        for phase in range(1, phases + 1):
            if phase > 1:
                ev = node.next()
                test.assertEqual(ev and ev.get("event"), "await-drop", node.text())
                peer.close()
                peer_connect = drop()
                peer = Peer(peer_connect)
                peer.subscribe(out_dest)
            ev = node.next()
            test.assertEqual(ev and ev.get("event"), "ready", node.text())
            test.assertEqual(ev["phase"], phase)
            sent[phase] = [peer_body("py", phase, i, count, big) for i in range(count)]
            for b in sent[phase]:
                peer.send(peer_sends_to or in_dest, b)
            ev = node.next()
            test.assertEqual(ev and ev.get("event"), "phase-done", node.text())
            got[phase] = peer.wait(out_dest, count)
            peer.bodies[out_dest] = []
        result = node.next()
        test.assertIsNotNone(result, "stomp_node.mjs ended without a result:\n" + node.text())
        test.assertEqual(result.get("result"), "ok", node.text())
        test.assertEqual(node.proc.wait(timeout=WAIT), 0, node.text())
        test.assertEqual(len(result["phases"]), phases)
        for p in result["phases"]:
            phase = p["phase"]
            test.assertEqual(p["received"], sent[phase], "what stomp.js received in phase %d" % phase)
            test.assertEqual(got[phase], p["sent"], "what stomp.py received in phase %d" % phase)
            test.assertEqual(p["subprotocol"], "v12.stomp")
            test.assertEqual(p["version"], "1.2")
        test.assertEqual(result["connects"], phases)
        return result
    finally:
        if node:
            node.close()
        peer.close()


@unittest.skipIf(harness.TRANSPORT == "tls", "manages its own listeners: runs in the tcp pass")
class JsTest(unittest.TestCase):
    """An eftd per test with a WebSocket listener (ports[0]) and a TCP one
    (ports[1], for the stomp.py peer)."""
    listen = [("ws", "127.0.0.1"), ("tcp", "127.0.0.1")]

    def setUp(self):
        if NEED_NODE:
            self.skipTest(NEED_NODE)
        self.broker = harness.Broker(listen=self.listen, args=("-l", "debug")).start()

    def tearDown(self):
        self.broker.finish()

    def tcp_peer(self, broker=None):
        port = (broker or self.broker).ports[1]
        return lambda: harness.stomp_py(port)

    def fail_with_log(self, fn):
        try:
            return fn()
        except AssertionError as e:
            raise AssertionError("%s\n--- eftd log (last 6000 chars) ---\n%s"
                                 % (e, self.broker.read_log()[-6000:])) from None


class StompJsTest(JsTest):
    """stomp.js in Node over ws://."""

    def test_ws_queues_both_ways(self):
        # 300 kB bodies both ways cross the size of a WebSocket frame header
        # (16-bit and 64-bit lengths) and of eftd's reads; heart-beats every
        # 300 ms in both directions must keep an idle connection up.
        self.fail_with_log(lambda: run_node(
            self, self.broker.url(0), self.tcp_peer(), "/queue/js-in", "/queue/js-out",
            count=4, big=300000, extra=["--heartbeat", "300", "--idle", "1500"]))

    def test_ws_topics_both_ways(self):
        self.fail_with_log(lambda: run_node(
            self, self.broker.url(0), self.tcp_peer(), "/topic/js-in", "/topic/js-out", count=5))

    def test_ws_wildcard_subscription(self):
        # stomp.js subscribes to a pattern; the peer sends to a name it matches
        self.fail_with_log(lambda: run_node(
            self, self.broker.url(0), self.tcp_peer(), "/topic/js-wild.*.in", "/topic/js-out",
            count=5, peer_sends_to="/topic/js-wild.eu.in"))

    def test_reconnect_after_eftd_restarts(self):
        # eftd goes away (SIGTERM: ERROR "server shutting down", then the
        # close) and a new eftd comes up on the same ports; stomp.js must
        # reconnect by itself (reconnectDelay) and carry on.
        brokers = [self.broker]

        def drop():
            old = brokers[-1]
            old.finish()  # a clean stop: exit 0, no sanitizer or valgrind report
            new = harness.Broker(listen=self.listen, args=("-l", "debug"))
            new.ports = list(old.ports)
            new.port = new.ports[0]
            time.sleep(0.5)  # stomp.js retries meanwhile (connection refused)
            self.broker = new.start()
            brokers.append(new)
            return self.tcp_peer(new)

        result = self.fail_with_log(lambda: run_node(
            self, self.broker.url(0), self.tcp_peer(), "/queue/re-in", "/queue/re-out",
            count=2, phases=2, drop=drop))
        self.assertIn("server shutting down", result["errors"])
        self.assertGreaterEqual(result["closes"], 2)


class StompJsTlsTest(JsTest):
    """stomp.js in Node over wss://, checking eftd's certificate against the
    test CA."""
    listen = [("wss", "127.0.0.1"), ("tcp", "127.0.0.1")]

    def test_wss_queues_both_ways(self):
        self.fail_with_log(lambda: run_node(
            self, self.broker.url(0), self.tcp_peer(), "/queue/wss-in", "/queue/wss-out",
            count=4, big=300000, extra=["--ca", certs().ca, "--heartbeat", "300",
                                        "--idle", "1500"]))

    def test_untrusted_certificate_is_refused(self):
        # Without the test CA, stomp.js (ws) refuses eftd's certificate: the
        # run fails, in bounded time, and says so.
        node = NodeClient(["--url", self.broker.url(0), "--in", "/queue/x", "--out", "/queue/y",
                           "--timeout", "3"])
        try:
            self.assertEqual(node.proc.wait(timeout=WAIT), 1, node.text())
            node.reader.join(timeout=WAIT)
            last = json.loads(node.output[-1])
            self.assertEqual(last["result"], "fail")
            self.assertEqual(last["connects"], 0)
        finally:
            node.close()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class StaticServer:
    """An HTTP server on 127.0.0.1 for one folder (the browser's pages)."""

    def __init__(self, root):
        handler = functools.partial(_Quiet, directory=root)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


class Chromium(browser.Chromium):
    """Chromium on test/js/page.html, which says how it is doing in #state
    and what it did in #result."""

    def wait_state(self, states, timeout=WAIT):
        """Poll page.html's #state until it is one of states; returns it."""
        try:
            return self.wait_value("document.getElementById('state').textContent",
                                   lambda v: v in states, "/".join(states), timeout)
        except AssertionError as e:
            raise AssertionError("%s; result %r" % (e, self.result_text())) from None

    def result_text(self):
        return self.evaluate("document.getElementById('result').textContent")


def run_page(test, page_url, ws_url, peer_connect, in_dest, out_dest, count=3, **query):
    """Open test/js/page.html (at page_url) on ws_url in headless Chromium,
    with a stomp.py peer; returns the page's result (asserted ok)."""
    q = dict(url=ws_url, count=count, timeout=WAIT, tag="browser", **query)
    q["in"], q["out"] = in_dest, out_dest
    peer = Peer(peer_connect)
    browser = None
    try:
        peer.subscribe(out_dest)
        browser = Chromium(page_url + "?" + urllib.parse.urlencode(q))
        state = browser.wait_state(("ready", "done", "fail"))
        test.assertEqual(state, "ready", browser.result_text())
        sent = ["from stomp.py #%d gr\u00fc\u00df \u2713" % i for i in range(count)]
        for b in sent:
            peer.send(in_dest, b)
        state = browser.wait_state(("done", "fail"))
        result = json.loads(browser.result_text())
        test.assertEqual(state, "done", result)
        test.assertEqual(result["result"], "ok", result)
        test.assertEqual(result["received"], sent, "what stomp.js received in the browser")
        test.assertEqual(peer.wait(out_dest, count), result["sent"], "what stomp.py received")
        test.assertEqual(result["subprotocol"], "v12.stomp")
        test.assertEqual(result["version"], "1.2")
        return result
    except AssertionError as e:
        raise AssertionError("%s\n--- chromium stderr ---\n%s"
                             % (e, browser.stderr() if browser else "")) from None
    finally:
        if browser:
            browser.close()
        peer.close()


class BrowserTest(JsTest):
    """stomp.js's UMD bundle in headless Chromium, over ws://."""

    def setUp(self):
        if NEED_BROWSER:
            self.skipTest(NEED_BROWSER)
        super().setUp()
        self.http = StaticServer(JS)
        self.addCleanup(self.http.close)

    def page(self):
        return "http://127.0.0.1:%d/page.html" % self.http.port

    def test_ws_queues_both_ways(self):
        self.fail_with_log(lambda: run_page(
            self, self.page(), self.broker.url(0), self.tcp_peer(), "/queue/page-in",
            "/queue/page-out", count=3))

    def test_ws_topics_both_ways(self):
        self.fail_with_log(lambda: run_page(
            self, self.page(), self.broker.url(0), self.tcp_peer(), "/topic/page-in",
            "/topic/page-out", count=3))

    def test_chat_example(self):
        self.fail_with_log(lambda: run_chat(self, self.broker.url(0), self.tcp_peer()))


def run_chat(test, ws_url, peer_connect):
    """tools/examples/chat.html (with stomp.js copied beside it as
    setup-chat does, in a temporary folder) in headless Chromium: a line
    typed in the page reaches stomp.py on /topic/chat with the sender's name,
    and a line from stomp.py shows in the page."""
    site = tempfile.mkdtemp(prefix="eft-chat-")
    test.addCleanup(shutil.rmtree, site, True)
    os.mkdir(os.path.join(site, "vendor"))
    shutil.copy(os.path.join(harness.ROOT, "tools", "examples", "chat.html"), site)
    shutil.copy(os.path.join(JS, "node_modules", "@stomp", "stompjs", "bundles",
                             "stomp.umd.min.js"), os.path.join(site, "vendor"))
    http = StaticServer(site)
    test.addCleanup(http.close)
    peer = Peer(peer_connect)
    browser = None
    try:
        peer.subscribe("/topic/chat")
        browser = Chromium("http://127.0.0.1:%d/chat.html?%s" % (
            http.port, urllib.parse.urlencode({"url": ws_url, "name": "tester"})))
        browser.wait_value("document.getElementById('status').dataset.state",
                           lambda v: v in ("connected", "error"), "the chat to connect")
        test.assertEqual(browser.evaluate("document.getElementById('status').dataset.state"),
                         "connected", browser.evaluate("document.body.innerText"))
        browser.evaluate("document.getElementById('text').value = 'hello from the browser \u2713';"
                         "document.getElementById('send').click()")
        test.assertEqual(peer.wait("/topic/chat", 1), ["hello from the browser \u2713"])
        test.assertEqual(peer.headers["/topic/chat"][0].get("chat-name"), "tester")
        peer.send("/topic/chat", "<b>hi</b> from stomp.py", headers={"chat-name": "py"})
        lines = "Array.from(document.querySelectorAll('#log li'), li => li.textContent)"
        got = browser.wait_value(lines, lambda v: v and len(v) >= 3, "three lines in the chat")
        test.assertEqual(got, ["joined /topic/chat as tester",
                               "tester: hello from the browser \u2713",
                               "py: <b>hi</b> from stomp.py"])
        # Text, never markup.
        test.assertEqual(browser.evaluate("document.querySelectorAll('#log b').length"), 0)
    except AssertionError as e:
        raise AssertionError("%s\n--- chromium stderr ---\n%s"
                             % (e, browser.stderr() if browser else "")) from None
    finally:
        if browser:
            browser.close()
        peer.close()


if __name__ == "__main__":
    unittest.main()
