"""The admin listener (listen = http://HOST:PORT): Prometheus metrics after a
known workload, with exact counts, and scraped under load; every call of the
JSON API (docs/admin-api.md) with its errors; who may use it (Basic auth of
admin users, loopback only without a users file, other origins refused);
SIGHUP's certificate rotation and log-file reopening.

STOMP goes over the run's transport (tcp or tls); the admin listener is
plain HTTP on 127.0.0.1 in both passes."""

import base64
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.parse

import harness
from harness import expect_receipt, subscribe, wait_for

TCP_ONLY = unittest.skipIf(harness.TRANSPORT == "tls",
                           "about the admin listener and files, not the STOMP transport")
USERS = os.path.join(harness.ROOT, "etc", "users.example")  # alice (admin), bob


def request(port, method, path, headers=None, timeout=10):
    """(status, headers dict, body bytes) of one HTTP request to 127.0.0.1:port."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout * harness.SLOW)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def get_json(port, path, **kw):
    status, hdrs, body = request(port, "GET", path, **kw)
    if status != 200:
        raise AssertionError("%s: %d %r" % (path, status, body))
    assert hdrs["content-type"] == "application/json", hdrs
    return json.loads(body)


def basic(user, password):
    return {"Authorization": "Basic " + base64.b64encode(
        ("%s:%s" % (user, password)).encode()).decode()}


def parse_metrics(text):
    """{'name{labels}': value} of Prometheus text, checking that every sample
    belongs to the family its # TYPE line announced, and no family twice."""
    samples, families, current = {}, set(), None
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert name not in families, "family %s twice" % name
            assert kind in ("counter", "gauge", "summary"), line
            families.add(name)
            current = name
            continue
        if line.startswith("#") or not line:
            continue
        key, value = line.rsplit(" ", 1)
        base = key.split("{", 1)[0]
        assert base == current or base in (current + "_sum", current + "_count"), \
            "%s outside its family (%s)" % (key, current)
        assert key not in samples, "sample %s twice" % key
        samples[key] = float(value)
    return samples


def scrape(port, **kw):
    status, hdrs, body = request(port, "GET", "/metrics", **kw)
    assert status == 200, (status, body)
    assert hdrs["content-type"].startswith("text/plain; version=0.0.4"), hdrs
    return parse_metrics(body.decode())


class Admin(harness.BrokerTest):
    """An eftd with a STOMP listener of the run's transport and an admin one."""

    listen = [(harness.TRANSPORT, "127.0.0.1"), ("http", "127.0.0.1")]

    @property
    def admin(self):
        return self.broker.ports[1]

    def raw(self, connect="1.2", headers=None):
        c = harness.RawClient(self.broker.port, tls=harness.TRANSPORT == "tls")
        self.clients.append(c)
        if connect:
            c.connect(connect, headers)
        return c


class Metrics(Admin):
    def test_exact_counts_after_a_known_workload(self):
        # The harness's readiness probe was accepted too.
        probes = scrape(self.admin)["eft_connections_accepted_total"]
        consumer = self.raw()
        subscribe(consumer, "/queue/work", "q", ack="client-individual")
        subscribe(consumer, "/topic/news", "t")
        producer = self.raw()
        for i in range(5):
            producer.send_frame("SEND", [("destination", "/queue/work")], "job %d" % i)
        for i in range(3):
            producer.send_frame("SEND", [("destination", "/topic/news")], "news %d" % i)
        for i in range(2):
            producer.send_frame("SEND", [("destination", "/topic/nobody")], "lost")
        producer.send_frame("SEND", [("destination", "/queue/idle"), ("receipt", "r")], "kept")
        expect_receipt(producer, "r")
        frames = consumer.read_frames(8)
        jobs = [f for f in frames if f["destination"] == "/queue/work"]
        self.assertEqual(len(jobs), 5)
        for f in jobs[:3]:
            consumer.send_frame("ACK", [("id", f["ack"])])
        consumer.send_frame("NACK", [("id", jobs[3]["ack"])])
        again = consumer.expect("MESSAGE")
        self.assertEqual(again["redelivered"], "true")
        consumer.send_frame("DISCONNECT", [("receipt", "bye")])
        expect_receipt(consumer, "bye")
        consumer.expect_closed()
        wait_for(lambda: scrape(self.admin)["eft_queue_consumers{queue=\"/queue/work\"}"] == 0,
                 5, "the consumer to be gone")

        m = scrape(self.admin)
        url = self.broker.url(0)
        expected = {
            'eft_connections{listener="%s"}' % url: 1,
            "eft_connections_accepted_total": probes + 2,
            'eft_connections_rejected_total{reason="limit"}': 0,
            'eft_connections_rejected_total{reason="login"}': 0,
            'eft_frames_received_total{command="CONNECT"}': 2,
            'eft_frames_received_total{command="SEND"}': 11,
            'eft_frames_received_total{command="SUBSCRIBE"}': 2,
            'eft_frames_received_total{command="ACK"}': 3,
            'eft_frames_received_total{command="NACK"}': 1,
            'eft_frames_received_total{command="DISCONNECT"}': 1,
            'eft_frames_received_total{command="unknown"}': 0,
            'eft_frames_sent_total{command="CONNECTED"}': 2,
            'eft_frames_sent_total{command="MESSAGE"}': 9,
            'eft_frames_sent_total{command="RECEIPT"}': 4,  # subscribe() asks for one
            'eft_frames_sent_total{command="ERROR"}': 0,
            "eft_messages_published_total": 11,
            "eft_messages_delivered_total": 9,
            "eft_messages_acknowledged_total": 3,
            "eft_messages_redelivered_total": 1,
            'eft_messages_dropped_total{reason="no_subscriber"}': 2,
            'eft_messages_dropped_total{reason="purged"}': 0,
            # The two unacknowledged jobs went back when the consumer left.
            'eft_queue_messages{queue="/queue/work"}': 2,
            'eft_queue_messages_unacknowledged{queue="/queue/work"}': 0,
            'eft_queue_consumers{queue="/queue/work"}': 0,
            'eft_queue_messages_published_total{queue="/queue/work"}': 5,
            'eft_queue_messages{queue="/queue/idle"}': 1,
            'eft_queue_messages_bytes{queue="/queue/idle"}': None,
            "eft_queues": 2,
            "eft_topics": 0,  # its only subscriber left
            "eft_temp_queues": 0,
            "eft_messages_queued": 3,
            "eft_producers_paused": 0,
        }
        for key, value in expected.items():
            self.assertIn(key, m)
            if value is not None:
                self.assertEqual(m[key], value, key)
        self.assertGreater(m["eft_message_memory_bytes"], 0)
        self.assertGreater(m["eft_message_memory_limit_bytes"], m["eft_message_memory_bytes"])
        self.assertGreater(m['eft_queue_messages_bytes{queue="/queue/idle"}'], 0)
        self.assertNotIn("eft_journal_bytes", m)  # no data-dir
        # The standard process metrics describe this eftd.
        self.assertGreater(m["process_resident_memory_bytes"], 1 << 20)
        self.assertGreaterEqual(m["process_open_fds"], 4)
        self.assertLessEqual(abs(m["process_start_time_seconds"] - time.time()), 120)

    def test_topics_and_temp_queues(self):
        sub = self.raw()
        subscribe(sub, "/topic/a", "1")
        subscribe(sub, "/topic/a", "2")
        sub.send_frame("SEND", [("destination", "/queue/rpc"), ("reply-to", "/temp-queue/r"),
                                ("receipt", "x")], "call")
        expect_receipt(sub, "x")
        p = self.raw()
        for _ in range(4):
            p.send_frame("SEND", [("destination", "/topic/a")], "m")
        p.send_frame("SEND", [("destination", "/topic/a"), ("receipt", "y")], "m")
        expect_receipt(p, "y")
        m = scrape(self.admin)
        self.assertEqual(m['eft_topic_subscribers{topic="/topic/a"}'], 2)
        self.assertEqual(m['eft_topic_messages_published_total{topic="/topic/a"}'], 5)
        self.assertEqual(m["eft_messages_delivered_total"], 10)
        self.assertEqual(m["eft_temp_queues"], 1)
        # Temp-queues are counted, never listed (random names, one per client).
        self.assertFalse([k for k in m if "/reply-queue/" in k or "/temp-queue/" in k])

    def test_label_values_are_escaped(self):
        p = self.raw()
        name = '/queue/a"b\\\\c'  # a quote and a backslash (escaped in the header)
        p.send_frame("SEND", [("destination", name), ("receipt", "r")], "m")
        expect_receipt(p, "r")
        status, _, body = request(self.admin, "GET", "/metrics")
        self.assertIn(b'eft_queue_messages{queue="/queue/a\\"b\\\\c"} 1\n', body)

    def test_scrape_under_load(self):
        """Scrapes between batches of a stream still in flight: every scrape
        answers, the counters never go back, and no message is lost."""
        batches, per_batch = 40, 500
        total = batches * per_batch
        consumer = self.raw()
        subscribe(consumer, "/queue/load", "0")
        got = [0]

        def consume():
            deadline = time.time() + 120 * harness.SLOW
            while got[0] < total and time.time() < deadline:
                frames, closed = consumer.drain(0.2)
                got[0] += len(frames)
                if closed:
                    return

        t = threading.Thread(target=consume, daemon=True)
        t.start()
        p = self.raw()
        batch = b"".join(harness.frame("SEND", [("destination", "/queue/load")], b"x" * 100)
                         for _ in range(per_batch))
        last, in_flight = {}, 0
        for _ in range(batches):
            p.send(batch)
            m = scrape(self.admin)
            in_flight += m["eft_messages_published_total"] < total
            for key in ("eft_messages_published_total", "eft_messages_delivered_total",
                        'eft_frames_received_total{command="SEND"}'):
                self.assertGreaterEqual(m[key], last.get(key, 0), key)
                last[key] = m[key]
        t.join(120 * harness.SLOW)
        self.assertEqual(got[0], total)
        self.assertGreater(in_flight, 0)
        m = scrape(self.admin)
        self.assertEqual(m["eft_messages_published_total"], total)
        self.assertEqual(m["eft_messages_delivered_total"], total)
        self.assertEqual(m['eft_queue_messages{queue="/queue/load"}'], 0)


class Api(Admin):
    def test_overview(self):
        probes = get_json(self.admin, "/api/overview")["connections_accepted"]
        c = self.raw()
        subscribe(c, "/topic/t", "0")
        c.send_frame("SEND", [("destination", "/queue/q"), ("receipt", "r")], "hello")
        expect_receipt(c, "r")
        o = get_json(self.admin, "/api/overview")
        self.assertEqual(o["connections"], 1)
        self.assertEqual(o["connections_accepted"], probes + 1)
        self.assertEqual(o["queues"], 1)
        self.assertEqual(o["topics"], 1)
        self.assertEqual(o["messages_queued"], 1)
        self.assertEqual(o["messages_published"], 1)
        self.assertIsNone(o["journal_bytes"])
        self.assertEqual(o["listeners"], [{"url": self.broker.url(0), "connections": 1}])
        self.assertRegex(o["version"], r"^\d+\.\d+\.\d+$")
        self.assertLessEqual(abs(o["started_at"] - time.time()), 120)
        # The same as rows of names and values.
        status, hdrs, body = request(self.admin, "GET", "/api/overview",
                                     {"Accept": "text/tab-separated-values"})
        self.assertEqual(status, 200)
        self.assertTrue(hdrs["content-type"].startswith("text/tab-separated-values"))
        rows = dict(line.split("\t") for line in body.decode().splitlines()[1:])
        self.assertEqual(rows["messages_queued"], "1")
        self.assertEqual(rows["journal_bytes"], "-")
        self.assertEqual(rows["listener " + self.broker.url(0)], "1")

    def test_queues_topics_connections(self):
        a = self.raw(headers={"login": "ann"})
        subscribe(a, "/queue/jobs", "s1", ack="client")
        subscribe(a, "/topic/news", "s2")
        b = self.raw("1.1")
        for i in range(3):
            b.send_frame("SEND", [("destination", "/queue/backlog")], "m%d" % i)
        b.send_frame("SEND", [("destination", "/queue/jobs")], "job")
        b.send_frame("SEND", [("destination", "/topic/news"), ("receipt", "r")], "n")
        expect_receipt(b, "r")
        a.read_frames(2)

        queues = {q["name"]: q for q in get_json(self.admin, "/api/queues")}
        self.assertEqual(sorted(queues), ["/queue/backlog", "/queue/jobs"])
        self.assertEqual(queues["/queue/backlog"], {
            "name": "/queue/backlog", "type": "queue", "depth": 3,
            "bytes": queues["/queue/backlog"]["bytes"], "unacked": 0, "consumers": 0,
            "published": 3, "cluster_waiting": None})  # null: not clustered
        self.assertGreater(queues["/queue/backlog"]["bytes"], 0)
        self.assertEqual((queues["/queue/jobs"]["depth"], queues["/queue/jobs"]["unacked"],
                          queues["/queue/jobs"]["consumers"]), (0, 1, 1))
        self.assertEqual(get_json(self.admin, "/api/topics"), [
            {"name": "/topic/news", "subscribers": 1, "durable_subscriptions": 0,
             "published": 1}])
        conns = get_json(self.admin, "/api/connections")
        self.assertEqual([c["version"] for c in conns], ["1.2", "1.1"])
        first = conns[0]
        self.assertEqual(first["listener"], self.broker.url(0))
        self.assertEqual(first["state"], "open")
        self.assertEqual(first["unacked"], 1)
        self.assertIsNone(first["login"])  # no users file: anonymous
        self.assertRegex(first["peer"], r"^127\.0\.0\.1:\d+$")
        self.assertEqual(sorted(first["subscriptions"], key=lambda s: s["id"]), [
            {"id": "s1", "destination": "/queue/jobs", "ack": "client"},
            {"id": "s2", "destination": "/topic/news", "ack": "auto"}])
        self.assertEqual(conns[1]["subscriptions"], [])
        # Tables for eftctl: a header line, then one row each.
        status, _, body = request(self.admin, "GET", "/api/queues",
                                  {"Accept": "text/tab-separated-values"})
        lines = body.decode().splitlines()
        self.assertEqual(lines[0].split("\t"),
                         ["name", "type", "depth", "bytes", "unacked", "consumers", "published",
                          "cluster_waiting"])
        self.assertEqual(lines[1].split("\t")[:3], ["/queue/backlog", "queue", "3"])
        status, _, body = request(self.admin, "GET", "/api/connections",
                                  {"Accept": "text/tab-separated-values"})
        row = body.decode().splitlines()[1].split("\t")
        self.assertEqual(row[3], "-")
        self.assertEqual(sorted(row[8].split(",")), ["/queue/jobs", "/topic/news"])

    def test_purge(self):
        p = self.raw()
        for i in range(4):
            p.send_frame("SEND", [("destination", "/queue/old")], "m%d" % i)
        p.send_frame("SEND", [("destination", "/queue/old"), ("receipt", "r")], "last")
        expect_receipt(p, "r")
        status, _, body = request(self.admin, "POST", "/api/queues/old/purge")
        self.assertEqual((status, json.loads(body)), (200, {"queue": "/queue/old", "purged": 5}))
        self.assertEqual([q for q in get_json(self.admin, "/api/queues") if q["depth"]], [])
        self.assertEqual(scrape(self.admin)['eft_messages_dropped_total{reason="purged"}'], 5)
        # A subscriber that comes later gets only what is sent after.
        c = self.raw()
        subscribe(c, "/queue/old", "0")
        p.send_frame("SEND", [("destination", "/queue/old")], "new")
        self.assertEqual(c.expect("MESSAGE").body, b"new")
        status, _, body = request(self.admin, "POST", "/api/queues/%2Fqueue%2Fnone/purge")
        self.assertEqual((status, json.loads(body)), (404, {"error": "no queue /queue/none"}))

    def test_delete_queue(self):
        p = self.raw()
        p.send_frame("SEND", [("destination", "/queue/a b"), ("receipt", "r")], "m")
        expect_receipt(p, "r")
        c = self.raw()
        subscribe(c, "/queue/busy", "0")
        status, _, body = request(self.admin, "DELETE", "/api/queues/busy")
        self.assertEqual(status, 409)
        self.assertIn("1 consumer", json.loads(body)["error"])
        status, _, body = request(self.admin, "DELETE", "/api/queues/" +
                                  urllib.parse.quote("/queue/a b", safe=""))
        self.assertEqual((status, json.loads(body)), (200, {"queue": "/queue/a b", "deleted": 1}))
        self.assertEqual([q["name"] for q in get_json(self.admin, "/api/queues")], ["/queue/busy"])
        self.assertEqual(request(self.admin, "DELETE", "/api/queues/a%20b")[0], 404)
        self.assertEqual(request(self.admin, "DELETE", "/api/queues/bad%zz")[0], 400)
        self.assertEqual(request(self.admin, "DELETE", "/api/queues/nul%00")[0], 400)

    def test_subscription_queues(self):
        """A topic subscription with a queue of its own (prefetch-count,
        x-queue-name): the queue is a "subscription" one, its subscriber
        counts as the topic's, and it is no durable subscription."""
        c = self.raw()
        subscribe(c, "/topic/t", "p", ack="client", headers=[("prefetch-count", "1"),
                                                               ("x-queue-name", "tq")])
        subscribe(c, "/topic/t", "plain")
        p = self.raw()
        p.send_frame("SEND", [("destination", "/topic/t")], "x")
        p.send_frame("SEND", [("destination", "/topic/t"), ("receipt", "s")], "y")
        expect_receipt(p, "s")
        queues = get_json(self.admin, "/api/queues")
        self.assertEqual([(q["name"], q["type"], q["depth"], q["unacked"]) for q in queues],
                         [("/queue/tq", "subscription", 1, 1)])
        self.assertEqual(get_json(self.admin, "/api/topics"), [
            {"name": "/topic/t", "subscribers": 2, "durable_subscriptions": 0, "published": 2}])

    def test_delete_durable_subscription(self):
        """Deleting a durable subscription's queue ends the subscription."""
        c = self.raw()
        durable = [("durable", "true"), ("auto-delete", "false")]
        subscribe(c, "/topic/t", "d1", headers=durable)
        c.send_frame("UNSUBSCRIBE", [("id", "d1"), ("receipt", "u")])
        expect_receipt(c, "u")
        c.send_frame("SEND", [("destination", "/topic/t"), ("receipt", "s")], "kept")
        expect_receipt(c, "s")
        queues = get_json(self.admin, "/api/queues")
        self.assertEqual([(q["name"], q["type"], q["depth"]) for q in queues],
                         [("/durable/rabbitmq:d1", "durable", 1)])
        self.assertEqual(get_json(self.admin, "/api/overview")["durable_subscriptions"], 1)
        status, _, body = request(self.admin, "DELETE", "/api/queues/" +
                                  urllib.parse.quote("/durable/rabbitmq:d1", safe=""))
        self.assertEqual((status, json.loads(body)["deleted"]), (200, 1))
        self.assertEqual(get_json(self.admin, "/api/queues"), [])
        self.assertEqual(get_json(self.admin, "/api/overview")["durable_subscriptions"], 0)
        # The topic feeds nothing any more: a message to it reaches nobody.
        c.send_frame("SEND", [("destination", "/topic/t"), ("receipt", "s2")], "lost")
        expect_receipt(c, "s2")
        self.assertEqual(get_json(self.admin, "/api/queues"), [])

    def test_close_connection(self):
        c = self.raw()
        other = self.raw()
        ids = [x["id"] for x in get_json(self.admin, "/api/connections")]
        self.assertEqual(len(ids), 2)
        status, _, body = request(self.admin, "DELETE", "/api/connections/%d" % ids[0])
        self.assertEqual((status, json.loads(body)), (200, {"closed": ids[0]}))
        err = c.expect("ERROR")
        self.assertEqual(err["message"], "closed by an administrator")
        port = c.sock.getsockname()[1]
        c.expect_closed()
        # Logged once, as what it is: an operator's close, not a protocol error.
        lines = [l for l in self.broker.read_log().splitlines() if "127.0.0.1:%d" % port in l]
        self.assertEqual([l for l in lines if "protocol error" in l], [])
        self.assertEqual(len([l for l in lines if " info: admin: closing %s 127.0.0.1:%d "
                              "(connection %d), as asked through the admin API"
                              % (harness.TRANSPORT, port, ids[0]) in l]), 1, lines)
        wait_for(lambda: [x["id"] for x in get_json(self.admin, "/api/connections")] == ids[1:],
                 5, "the connection to be gone")
        other.send_frame("SEND", [("destination", "/queue/q"), ("receipt", "r")], "still here")
        expect_receipt(other, "r")
        self.assertEqual(request(self.admin, "DELETE", "/api/connections/%d" % ids[0])[0], 404)
        self.assertEqual(request(self.admin, "DELETE", "/api/connections/x1")[0], 400)

    def test_errors(self):
        cases = [
            ("GET", "/nothing", 404, None),
            ("GET", "/api/nothing", 404, None),
            ("POST", "/api/queues", 405, "GET, HEAD"),
            ("DELETE", "/api/overview", 405, "GET, HEAD"),
            ("GET", "/api/queues/q/purge", 405, "POST"),
            ("GET", "/api/queues/q", 405, "DELETE"),
            ("PUT", "/api/connections/1", 405, "DELETE"),
            ("POST", "/metrics", 405, "GET, HEAD"),
        ]
        for method, path, status, allow in cases:
            got, hdrs, body = request(self.admin, method, path)
            self.assertEqual(got, status, (method, path, body))
            self.assertIn("error", json.loads(body))
            if allow:
                self.assertEqual(hdrs["allow"], allow, (method, path))
        # The same errors as one line of text for eftctl.
        got, hdrs, body = request(self.admin, "GET", "/api/nothing",
                                  {"Accept": "text/tab-separated-values"})
        self.assertEqual(got, 404)
        self.assertEqual(body.decode().count("\n"), 1)
        # eftd carries on.
        self.assertEqual(get_json(self.admin, "/api/overview")["connections"], 0)

    def test_dashboard_page_is_served_self_contained(self):
        status, hdrs, body = request(self.admin, "GET", "/")
        self.assertEqual(status, 200)
        self.assertEqual(hdrs["content-type"], "text/html; charset=utf-8")
        self.assertIn("default-src 'none'", hdrs["content-security-policy"])
        with open(os.path.join(harness.ROOT, "web", "dashboard.html"), "rb") as f:
            self.assertEqual(body, f.read())
        # Nothing fetched from elsewhere.
        self.assertNotRegex(body, rb"(src|href)\s*=\s*[\"']?(https?:)?//")
        # HEAD: the length, no body (the next request on the connection works).
        conn = http.client.HTTPConnection("127.0.0.1", self.admin, timeout=10 * harness.SLOW)
        conn.request("HEAD", "/")
        r = conn.getresponse()
        self.assertEqual((r.status, r.getheader("Content-Length"), r.read()),
                         (200, str(len(body)), b""))
        conn.request("GET", "/api/topics")
        r = conn.getresponse()
        self.assertEqual((r.status, r.read()), (200, b"[]\n"))
        conn.close()


@TCP_ONLY
class Access(Admin):
    config = "users-file = %s\nauth-delay-ms = 10\n" % USERS

    def test_basic_auth_admin_users_only(self):
        status, hdrs, _ = request(self.admin, "GET", "/api/overview")
        self.assertEqual(status, 401)
        self.assertTrue(hdrs["www-authenticate"].startswith('Basic realm="eft"'))
        self.assertEqual(request(self.admin, "GET", "/metrics",
                                 basic("alice", "wrong"))[0], 401)
        self.assertEqual(request(self.admin, "GET", "/metrics",
                                 {"Authorization": "Basic !!!"})[0], 401)
        status, _, body = request(self.admin, "GET", "/api/overview", basic("bob", "builder"))
        self.assertEqual(status, 403)
        self.assertIn(b"admin", body)
        self.assertEqual(request(self.admin, "GET", "/api/overview",
                                 basic("alice", "wonderland"))[0], 200)
        scrape(self.admin, headers=basic("alice", "wonderland"))
        self.assertIn("admin listener: authentication failed for 'alice'",
                      self.broker.read_log())

    def test_logins_show_and_refused_logins_count(self):
        c = self.raw(headers={"login": "bob", "passcode": "builder"})
        bad = harness.RawClient(self.broker.port)
        self.clients.append(bad)
        bad.send_frame("CONNECT", [("accept-version", "1.2"), ("login", "alice"),
                                   ("passcode", "nope")])
        self.assertEqual(bad.expect("ERROR")["message"], "authentication failed")
        conns = get_json(self.admin, "/api/connections", headers=basic("alice", "wonderland"))
        self.assertIn("bob", [x["login"] for x in conns])
        m = scrape(self.admin, headers=basic("alice", "wonderland"))
        self.assertEqual(m['eft_connections_rejected_total{reason="login"}'], 1)
        del c

    def test_other_origins_may_not_change_anything(self):
        creds = basic("alice", "wonderland")
        p = self.raw(headers={"login": "alice", "passcode": "wonderland"})
        p.send_frame("SEND", [("destination", "/queue/q"), ("receipt", "r")], "m")
        expect_receipt(p, "r")
        evil = dict(creds, Origin="http://evil.example")
        self.assertEqual(request(self.admin, "POST", "/api/queues/q/purge", evil)[0], 403)
        self.assertEqual(get_json(self.admin, "/api/queues", headers=creds)[0]["depth"], 1)
        own = dict(creds, Origin="http://127.0.0.1:%d" % self.admin)
        self.assertEqual(request(self.admin, "POST", "/api/queues/q/purge", own)[0], 200)
        # Empty and unused, the queue is forgotten like any other.
        self.assertEqual(get_json(self.admin, "/api/queues", headers=creds), [])


@TCP_ONLY
class LoopbackOnly(Admin):
    def test_host_must_be_loopback_without_users_file(self):
        for host in ("127.0.0.1:%d" % self.admin, "localhost", "[::1]:1"):
            self.assertEqual(request(self.admin, "GET", "/api/overview", {"Host": host})[0], 200,
                             host)
        for host in ("evil.example", "evil.example:%d" % self.admin, "10.0.0.1"):
            status, _, body = request(self.admin, "GET", "/api/overview", {"Host": host})
            self.assertEqual(status, 421, host)
            self.assertIn(b"loopback", body)


@TCP_ONLY
class StartupChecks(unittest.TestCase):
    def run_eftd(self, *args, config=None):
        cmd = [harness.EFTD, "-p", "0"] + list(args)
        if config is not None:
            d = tempfile.mkdtemp(prefix="eftd-admin-")
            self.addCleanup(shutil.rmtree, d, True)
            path = os.path.join(d, "eftd.conf")
            with open(path, "w") as f:
                f.write(config)
            cmd += ["-c", path]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10 * harness.SLOW,
                              stdin=subprocess.DEVNULL)

    def test_admin_listener_off_loopback_needs_a_users_file(self):
        for url in ("http://0.0.0.0:15672", "http://[::]:15672", "http://192.0.2.1:1"):
            r = self.run_eftd("-L", url)
            self.assertEqual(r.returncode, 1, url)
            self.assertIn("without a users-file the admin listener must be on a loopback "
                          "address", r.stderr)
            self.assertEqual(r.stderr.count("\n"), 1)

    def test_an_admin_listener_alone_keeps_the_stomp_listener(self):
        """listen = http://... does not replace the default tcp listener."""
        port = harness.free_port()
        b = harness.Broker(args=["-L", "http://127.0.0.1:%d" % port])
        b.start()
        try:
            self.assertIn("listening on tcp://127.0.0.1:%d" % b.port, b.read_log())
            self.assertEqual(get_json(port, "/api/overview")["listeners"][0]["url"],
                             "tcp://127.0.0.1:%d" % b.port)
        finally:
            b.finish()


@TCP_ONLY
class Passwd(unittest.TestCase):
    """eft-passwd --admin sets the mark."""

    def passwd(self, *args):
        return subprocess.run([os.path.join(harness.ROOT, harness.BUILD, "eft-passwd")] +
                              list(args), input="pw\n", capture_output=True, text=True,
                              timeout=30 * harness.SLOW)

    def test_admin_mark(self):
        r = self.passwd("--admin", "carol")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^carol:\$argon2id\$[^:]+:admin\n$")
        d = tempfile.mkdtemp(prefix="eft-passwd-")
        self.addCleanup(shutil.rmtree, d, True)
        users = os.path.join(d, "users")
        with open(users, "w") as f:
            f.write("# users\ndave:$argon2id$x:read=/topic/:write=\n")
        os.chmod(users, 0o600)
        self.assertEqual(self.passwd("-a", "-f", users, "dave").returncode, 0)
        self.assertEqual(self.passwd("-f", users, "erin").returncode, 0)
        self.assertEqual(self.passwd("--admin", "-f", users, "dave").returncode, 0)  # once
        with open(users) as f:
            lines = f.read().splitlines()
        self.assertEqual(lines[0], "# users")
        self.assertRegex(lines[1], r"^dave:\$argon2id\$[^:]+:read=/topic/:write=:admin$")
        self.assertRegex(lines[2], r"^erin:\$argon2id\$[^:]+$")


def on_terminal(argv, answers, timeout=20):
    """Run argv on a pseudo-terminal, typing each answer after a password
    prompt; (exit code, everything the terminal showed)."""
    import pty
    import select
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    shown, typed, deadline = b"", 0, time.time() + timeout * harness.SLOW
    try:
        while time.time() < deadline:
            if not select.select([fd], [], [], 0.2)[0]:
                continue
            try:
                data = os.read(fd, 4096)
            except OSError:
                break
            if not data:
                break
            shown += data
            if shown.count(b"assword") > typed and typed < len(answers):
                os.write(fd, answers[typed])
                typed += 1
    finally:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == 0:  # still running at the deadline
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), shown


@TCP_ONLY
class Terminal(unittest.TestCase):
    """eft-passwd and eftctl ask for passwords on the terminal, without echo
    (tools/ask.c, which both use)."""

    def test_prompts_without_echo(self):
        bin_dir = os.path.join(harness.ROOT, harness.BUILD)
        rc, shown = on_terminal([os.path.join(bin_dir, "eft-passwd"), "--admin", "zed"],
                                [b"s3cret-pw\n", b"s3cret-pw\n"])
        self.assertEqual(rc, 0, shown)
        self.assertRegex(shown, rb"Password: \r?\nPassword again: \r?\nzed:\$argon2id\$[^:]+:admin")
        self.assertNotIn(b"s3cret-pw", shown)
        rc, shown = on_terminal([os.path.join(bin_dir, "eft-passwd"), "zed"], [b"a\n", b"b\n"])
        self.assertEqual(rc, 1)
        self.assertIn(b"the passwords differ", shown)
        port = harness.free_port()  # nothing listens there
        rc, shown = on_terminal([os.path.join(bin_dir, "eftctl"), "-u", "127.0.0.1:%d" % port,
                                 "--user", "bob", "queues"], [b"hidden-pw\n"])
        self.assertEqual(rc, 1)
        self.assertIn(b"Password for bob: ", shown)
        self.assertIn(b"connection refused", shown)
        self.assertNotIn(b"hidden-pw", shown)


@TCP_ONLY
class Reload(unittest.TestCase):
    """SIGHUP: a new certificate for new connections while old ones stay,
    and the log file reopened after a rotation."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="eftd-reload-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def start(self, config):
        """eftd with a tls:// listener on our own certificate files (the
        harness's Broker would give it the shared ones)."""
        self.port = harness.free_port()
        conf = self.write_conf(config)
        self.log = self.path("stderr.log")
        with open(self.log, "w") as log:
            proc = subprocess.Popen([harness.EFTD, "-L", "tls://127.0.0.1:%d" % self.port,
                                     "-c", conf], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait(10)))

        def up():
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return True
            except OSError:
                self.assertIsNone(proc.poll(), open(self.log).read())
                return False
        wait_for(up, 10 * harness.SLOW, "eftd to listen")
        return proc

    def read_log(self):
        with open(self.log) as f:
            return f.read()

    @staticmethod
    def peer_cert(port):
        with harness.open_socket(port, tls=True) as s:
            return s.getpeercert(binary_form=True)

    def test_sighup_rotates_the_certificate(self):
        certs = harness.certs()
        cert, key = self.path("server.pem"), self.path("server.key")
        shutil.copy(certs.server, cert)
        shutil.copy(certs.server_key, key)
        proc = self.start("tls-cert-file = %s\ntls-key-file = %s\n" % (cert, key))
        old = self.peer_cert(self.port)
        c = harness.RawClient(self.port, tls=True)
        self.addCleanup(c.close)
        c.connect("1.2")
        subscribe(c, "/queue/q", "0")

        # A new certificate from the same CA, put in place as rotation does.
        certs._leaf(self.path("new.pem"), self.path("new.key"), "localhost", certs.ca,
                    certs.ca_key, "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n"
                    "extendedKeyUsage=serverAuth\n")
        os.replace(self.path("new.pem"), cert)
        os.replace(self.path("new.key"), key)
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "reloaded the TLS certificate" in self.read_log(), 5, "the reload")
        new = self.peer_cert(self.port)
        self.assertNotEqual(new, old)
        # The connection made before still works, both ways.
        c.send_frame("SEND", [("destination", "/queue/q"), ("receipt", "r")], "after")
        self.assertEqual(c.expect("MESSAGE").body, b"after")
        expect_receipt(c, "r")

        # A broken certificate keeps the one loaded.
        with open(cert, "w") as f:
            f.write("not a certificate\n")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "TLS certificate not reloaded" in self.read_log(), 5, "the failed reload")
        self.assertEqual(self.peer_cert(self.port), new)
        self.assertIsNone(proc.poll())
        c.send_frame("SEND", [("destination", "/queue/q"), ("receipt", "r2")], "still")
        self.assertEqual(c.expect("MESSAGE").body, b"still")
        expect_receipt(c, "r2")
        proc.terminate()
        harness.check_exit(proc.wait(10 * harness.SLOW), self.read_log(), where=self.log)

    def test_sighup_reopens_the_log_file(self):
        log = self.path("eftd.log")
        b = harness.Broker(config="log-file = %s\n" % log)
        b.start()
        self.addCleanup(b.finish)
        wait_for(lambda: os.path.exists(log) and "listening on" in open(log).read(), 5,
                 "the log file")
        self.assertEqual(b.read_log(), "")  # stderr went to the file
        os.rename(log, log + ".1")
        b.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: os.path.exists(log), 5, "a new log file")
        wait_for(lambda: "log-file %s reopened" % log in open(log).read(), 5, "the reopen line")
        c = harness.RawClient(b.port)
        c.connect("1.2", {"login": "after-rotation"})
        c.close()
        wait_for(lambda: "login 'after-rotation'" in open(log).read(), 5,
                 "new lines in the new file")
        self.assertNotIn("after-rotation", open(log + ".1").read())
        self.assertIn("listening on", open(log + ".1").read())
        b.stop()  # exit 0, no sanitizer or valgrind report
        r = subprocess.run([harness.EFTD, "-p", "0", "-c", self.write_conf(
            "log-file = %s\n" % self.path("no/such/dir/x.log"))], capture_output=True, text=True,
            timeout=10 * harness.SLOW, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot open log-file", r.stderr)

    def write_conf(self, text):
        path = self.path("eftd.conf")
        with open(path, "w") as f:
            f.write(text)
        return path


if __name__ == "__main__":
    unittest.main()
