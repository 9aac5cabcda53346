"""The dashboard (web/dashboard.html, served by eftd's admin listener at /)
in headless Chromium against a real eftd with a tcp:// and an http://
listener: while raw STOMP clients make three queues of depths 1, 2 and 3, a
topic with two subscribers and a steady stream of messages to it, the page
must show those queues with exactly those depths, the topic, our
connections (found by their local addresses) and the overview figures;
draw the rate chart; sort a table by a column header; write destination
names as text, never markup; and say so when eftd cannot be reached, then
carry on once it is back.  A screenshot goes to $BUILD/dashboard.png.

Needs Chromium and python3-websocket (browser.py); skipped, saying which,
without them.  The admin listener is plain HTTP, so this runs in the tcp
pass only:

    /usr/bin/python3 test/e2e/run.py test_dashboard.py
"""

import os
import threading
import time
import unittest

import browser
import harness
from harness import Broker, RawClient, expect_receipt, subscribe

WAIT = browser.WAIT
QUEUES = {"/queue/dash-a": 1, "/queue/dash-b": 2, "/queue/dash-<b>c</b>": 3}
TOPIC = "/topic/dash-news"

# What the page shows, read from its DOM: rows by their marker, each cell's
# raw value (data-value) by column, the figures' text, the status line and
# the chart's sample count and latest rates; or, before the dashboard is
# there, the page's address and text.
SNAPSHOT = """(() => {
  const rows = (id, attr) => Array.from(document.querySelectorAll('#' + id + ' tbody tr'), tr => {
    const o = {key: tr.dataset[attr]};
    for (const td of tr.cells) o[td.dataset.col] = td.dataset.value;
    return o;
  });
  const chart = document.getElementById('chart'), status = document.getElementById('status');
  if (!chart || !status)  // not (yet) the dashboard: say what is there
    return {page: location.href, text: document.body ? document.body.innerText.slice(0, 300) : ''};
  return {state: status.dataset.state, status: status.textContent,
          queues: rows('queues', 'queue'), topics: rows('topics', 'topic'),
          connections: rows('connections', 'conn'),
          stats: Object.fromEntries(Array.from(document.querySelectorAll('[data-stat]'),
                                               e => [e.dataset.stat, e.textContent])),
          samples: Number(chart.dataset.samples), publish: Number(chart.dataset.publish),
          deliver: Number(chart.dataset.deliver)};
})()"""

# How many pixels of the chart's plot (below the legend's line) have a
# colour rather than a grey: the two rate lines.
COLOURED = """(() => {
  const c = document.getElementById('chart'), top = Math.ceil(20 * (window.devicePixelRatio || 1));
  const d = c.getContext('2d').getImageData(0, top, c.width, c.height - top).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4)
    if (d[i + 3] > 200 && Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 80)
      n++;
  return n;
})()"""


class Traffic:
    """A thread sending to TOPIC every 50 ms on one connection and reading
    what the subscribers on others get, until stop()."""

    def __init__(self, sender, subscribers):
        self.sender, self.subscribers = sender, subscribers
        self.stopping = threading.Event()
        self.sent = self.received = 0
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            while not self.stopping.wait(0.05):
                self.sender.send_frame("SEND", [("destination", TOPIC)], "tick %d" % self.sent)
                self.sent += 1
                for s in self.subscribers:
                    self.received += sum(f.command == "MESSAGE" for f in s.poll(0.01))
        except Exception as e:  # noqa: BLE001 -- reported by stop()
            self.error = e

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=WAIT)
        return self.error


@unittest.skipIf(harness.TRANSPORT == "tls", "the admin listener is plain HTTP: runs in the tcp pass")
class DashboardTest(unittest.TestCase):
    listen = [("tcp", "127.0.0.1"), ("http", "127.0.0.1")]

    def setUp(self):
        if browser.NEED_CHROMIUM:
            self.skipTest(browser.NEED_CHROMIUM)
        self.broker = self.start_broker(Broker(listen=self.listen))
        self.clients = []
        self.addCleanup(lambda: [c.close() for c in self.clients])
        self.page = None

    def start_broker(self, broker):
        """broker started, and stopped at the end of the test (its log
        removed, also when it does not start)."""
        try:
            broker.start()
        except BaseException:
            broker.kill()
            broker.finish()
            raise
        self.addCleanup(broker.finish)
        return broker

    def client(self):
        c = RawClient(self.broker.ports[0])
        self.clients.append(c)
        c.connect()
        return c

    def open_page(self):
        """Chromium on the dashboard, closed at the end of the test."""
        self.page = browser.Chromium(self.broker.url(1) + "/", size=(1280, 1000))
        self.addCleanup(self.page.close)
        return self.page

    def snapshot(self):
        return self.page.evaluate(SNAPSHOT, throw=True)

    def wait_page(self, pred, what, timeout=WAIT):
        """Poll the page's snapshot every 200 ms until pred(snapshot)."""
        deadline = time.time() + timeout
        snap = None
        while time.time() < deadline:
            snap = self.snapshot()
            if "page" not in snap and pred(snap):
                return snap
            time.sleep(0.2)
        raise AssertionError("the dashboard never showed %s; it shows %r\n--- eftd log ---\n%s\n"
                             "--- chromium stderr ---\n%s" % (what, snap,
                                                               self.broker.read_log()[-3000:],
                                                               self.page.stderr()))

    def make_traffic(self):
        """The queues, filled; two subscribers on TOPIC (so that twice as
        many messages are delivered as published: two lines on the chart)
        and messages flowing to them.  Returns (traffic, {role: our local
        address, as eftd's peer})."""
        producer = self.client()
        for dest, depth in QUEUES.items():
            for i in range(depth):
                producer.send_frame("SEND", [("destination", dest), ("receipt", "r")], "m%d" % i)
                expect_receipt(producer, "r")
        subscribers = [self.client(), self.client()]
        for s in subscribers:
            subscribe(s, TOPIC)
        sender = self.client()
        traffic = Traffic(sender, subscribers)
        self.addCleanup(traffic.stop)
        peers = {role: "127.0.0.1:%d" % c.sock.getsockname()[1]
                 for role, c in (("producer", producer), ("subscriber", subscribers[0]),
                                 ("subscriber 2", subscribers[1]), ("sender", sender))}
        return traffic, peers

    def test_shows_queues_topics_connections_and_rates(self):
        traffic, peers = self.make_traffic()
        self.open_page()

        def shown(s):
            by_peer = {c.get("peer"): c for c in s["connections"]}
            return ({q["key"]: q.get("depth") for q in s["queues"]}
                    == {k: str(v) for k, v in QUEUES.items()}
                    and any(t["key"] == TOPIC and t.get("subscribers") == "2" for t in s["topics"])
                    and all(p in by_peer for p in peers.values())
                    and s["stats"].get("queues") == "3" and s["stats"].get("messages_queued") == "6")
        snap = self.wait_page(shown, "our queues, topic, connections and figures")
        self.assertEqual(snap["state"], "ok", snap["status"])
        by_peer = {c["peer"]: c for c in snap["connections"]}
        for role, peer in peers.items():
            conn = by_peer[peer]
            self.assertEqual(conn["listener"], self.broker.url(0), role)
            self.assertEqual(conn["state"], "open", role)
            self.assertEqual(conn["version"], "1.2", role)
        self.assertEqual(by_peer[peers["subscriber"]]["subscriptions"], TOPIC)
        self.assertEqual(by_peer[peers["subscriber 2"]]["subscriptions"], TOPIC)
        self.assertEqual(by_peer[peers["producer"]]["subscriptions"], "")
        topic = next(t for t in snap["topics"] if t["key"] == TOPIC)
        self.assertGreater(int(topic["published"]), 0)
        # A name is text: "<b>" in one is shown, not made an element.
        self.assertEqual(self.page.evaluate("document.querySelectorAll('main b:not([data-stat])')"
                                            ".length"), 0)
        self.assertIn("dash-<b>c</b>", self.page.evaluate(
            "document.getElementById('queues').textContent"))

        # The chart: samples and rates from the steady stream, and lines drawn.
        snap = self.wait_page(lambda s: s["samples"] >= 3 and s["publish"] > 0 and s["deliver"] > 0,
                              "three samples and non-zero rates in the chart")
        self.page.wait_value(COLOURED, lambda n: n and n > 20, "the rate lines on the chart")

        # Sorting: depth, then depth reversed; the table stays sorted across refreshes.
        def order():
            return self.page.evaluate(
                "Array.from(document.querySelectorAll('#queues tbody tr'),"
                " tr => [tr.dataset.queue, Number(tr.querySelector('[data-col=depth]')"
                ".dataset.value)])", throw=True)
        header = "document.querySelector('#queues th[data-col=depth]')"
        self.page.evaluate(header + ".click()", throw=True)
        first = self.page.evaluate(header + ".getAttribute('aria-sort')")
        self.assertIn(first, ("ascending", "descending"))
        by_depth = sorted(QUEUES.items(), key=lambda kv: kv[1], reverse=first == "descending")
        self.assertEqual(order(), [list(kv) for kv in by_depth])
        # two refreshes (each ends by writing "updated TIME", to the second)
        seen = [self.snapshot()["status"]]

        def refreshed_twice(snap):
            if snap["status"] != seen[-1]:
                seen.append(snap["status"])
            return len(seen) >= 3
        self.wait_page(refreshed_twice, "two refreshes after the sort")
        self.assertEqual(order(), [list(kv) for kv in by_depth])
        self.page.evaluate(header + ".click()", throw=True)
        self.assertNotEqual(self.page.evaluate(header + ".getAttribute('aria-sort')"), first)
        self.assertEqual(order(), [list(kv) for kv in reversed(by_depth)])

        path = os.path.join(harness.ROOT, harness.BUILD, "dashboard.png")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.page.screenshot(path)
        print("\n  screenshot: %s" % path, end=" ", flush=True)
        self.assertIsNone(traffic.stop())
        self.assertGreater(traffic.received, 0)

    def test_says_when_eftd_is_away_and_comes_back(self):
        self.open_page()
        self.wait_page(lambda s: s["state"] == "ok", "that it reached eftd")
        old = self.broker
        old.stop()  # exit 0, no sanitizer or valgrind report
        snap = self.wait_page(lambda s: s["state"] == "error", "an error status")
        self.assertIn("not reachable", snap["status"])
        # A new eftd on the same ports, with a queue: the page keeps polling.
        new = Broker(listen=self.listen)
        new.ports, new.port = list(old.ports), old.ports[0]
        self.broker = self.start_broker(new)
        producer = self.client()
        producer.send_frame("SEND", [("destination", "/queue/dash-back"), ("receipt", "r")], "x")
        expect_receipt(producer, "r")
        snap = self.wait_page(lambda s: s["state"] == "ok" and [q["key"] for q in s["queues"]]
                              == ["/queue/dash-back"], "eftd back, with its one queue")
        self.assertNotIn("not reachable", snap["status"])


if __name__ == "__main__":
    unittest.main()
