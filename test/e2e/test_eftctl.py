"""eftctl, the command line for eftd's admin HTTP API (docs/admin-api.md),
against a real eftd with an http:// listener: every command over a known
workload, as a table and as JSON, with exact numbers; what purge, delete and
close do to queues and clients; Basic auth with a users-file; and the
failures (no broker, no answer, a bad command line), each one line on stderr
with exit status 1, or 2 for the command line."""

import json
import os
import re
import socket
import subprocess
import tempfile
import time
import unittest

import harness
from harness import send, Broker, BrokerTest, SLOW, expect_receipt, free_port, subscribe, wait_for

EFTCTL = os.path.join(harness.ROOT, harness.BUILD, "eftctl")
EFT_PASSWD = os.path.join(harness.ROOT, harness.BUILD, "eft-passwd")

TCP_ONLY = unittest.skipIf(harness.TRANSPORT == "tls",
                           "eftctl speaks http:// whatever the STOMP transport: runs in the tcp pass")


def eft_version():
    with open(os.path.join(harness.ROOT, "include", "eft", "version.h")) as f:
        return re.search(r'#define EFT_VERSION "([^"]+)"', f.read()).group(1)


def eftctl(*args, url=None, env=None, timeout=15):
    """Run eftctl to completion: (exit status, stdout, stderr).  It runs in
    a session of its own, without a terminal, so it can never stop to ask
    for a password; EFTCTL_URL and EFTCTL_PASSWORD come from env only."""
    e = {k: v for k, v in os.environ.items() if k not in ("EFTCTL_URL", "EFTCTL_PASSWORD")}
    e.update(env or {})
    cmd = [EFTCTL] + (["-u", url] if url else []) + list(args)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=e, stdin=subprocess.DEVNULL,
                           start_new_session=True, timeout=timeout * SLOW)
    except subprocess.TimeoutExpired as ex:
        raise AssertionError("%s did not exit within %ss" % (" ".join(cmd), timeout)) from ex
    return p.returncode, p.stdout, p.stderr


def cells(line):
    """A table line's cells: columns are at least two blanks apart (a cell
    holds single blanks at most, as "listener tcp://..." does)."""
    return re.split(r" {2,}", line.strip())


def table(out):
    """eftctl's table as (header cells, rows of cells)."""
    lines = out.splitlines()
    return cells(lines[0]), [cells(l) for l in lines[1:]]



class EftctlTest(BrokerTest):
    """A STOMP listener of the run's transport and an http:// one; in every
    test the same workload:

    - a producer (anonymous, no subscriptions) sent 3 messages to /queue/a,
      3 to /queue/b and 1 to /topic/t;
    - a consumer subscribed to /topic/t (auto) and to /queue/b
      (client-individual, prefetch-count 1), and holds one message of
      /queue/b unacknowledged; the other two wait.
    """

    listen = [(harness.TRANSPORT, "127.0.0.1"), ("http", "127.0.0.1")]
    BODIES = {"/queue/a": 3, "/queue/b": 3, "/topic/t": 1}

    def setUp(self):
        super().setUp()
        self.url = self.broker.url(1)
        self.producer = self.client()
        self.consumer = self.client()
        subscribe(self.consumer, "/topic/t", "0")
        subscribe(self.consumer, "/queue/b", "1", ack="client-individual",
                  headers=[("prefetch-count", "1")])
        for dest, n in self.BODIES.items():
            for i in range(n):
                send(self.producer, dest, "%s message %d" % (dest, i), receipt="%s-%d" % (dest, i))
        got = {}
        for f in self.consumer.read_frames(2):
            self.assertEqual(f.command, "MESSAGE")
            got[f["destination"]] = f
        self.assertEqual(sorted(got), ["/queue/b", "/topic/t"])
        self.held = got["/queue/b"]
        self.consumer.expect_nothing(0.2)   # prefetch-count 1 keeps the others waiting

    def ctl(self, *args, env=None):
        """eftctl against this broker; it must succeed and say nothing on stderr."""
        rc, out, err = eftctl(*args, url=self.url, env=env)
        self.assertEqual((rc, err), (0, ""), "eftctl %s: stdout %r" % (" ".join(args), out))
        return out

    def ctl_json(self, *args):
        out = self.ctl("--json", *args)
        self.assertTrue(out.endswith("\n"), out)
        return json.loads(out)

    def assert_fails(self, *args, status=1):
        """eftctl fails with one line on stderr (returned) and nothing on stdout."""
        rc, out, err = eftctl(*args, url=self.url)
        self.assertEqual(rc, status, "eftctl %s: stdout %r stderr %r" % (" ".join(args), out, err))
        self.assertEqual(out, "")
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith("eftctl: ") and err.endswith("\n"), err)
        return err.rstrip("\n")

    def stomp_listener(self):
        return self.broker.url(0)

    def peer(self, c):
        return "%s:%d" % c.sock.getsockname()[:2]

    # ---- overview ----

    def test_overview_table(self):
        header, rows = table(self.ctl("overview"))
        self.assertEqual(header, ["NAME", "VALUE"])
        for row in rows:
            self.assertEqual(len(row), 2, row)
        values = dict(rows)
        self.assertEqual(len(values), len(rows), "a name twice: %r" % rows)
        expect = {"version": eft_version(), "connections": "2", "connections_rejected": "0",
                  "queues": "2", "topics": "1", "temp_queues": "0", "durable_subscriptions": "0",
                  "messages_queued": "5", "messages_unacked": "1", "messages_published": "7",
                  "messages_delivered": "2", "messages_acknowledged": "0",
                  "messages_redelivered": "0", "messages_dropped": "0", "producers_paused": "0",
                  "journal_bytes": "-",     # null: no data-dir
                  "listener " + self.stomp_listener(): "2"}
        self.assertEqual({k: values.get(k) for k in expect}, expect)
        for name in ("started_at", "uptime_seconds", "connections_accepted", "memory_bytes",
                     "memory_limit_bytes"):
            self.assertRegex(values.get(name, ""), r"^\d+$", name)
        self.assertGreaterEqual(int(values["connections_accepted"]), 2)
        self.assertGreater(int(values["memory_bytes"]), 0)
        self.assertLessEqual(abs(int(values["started_at"]) + int(values["uptime_seconds"]) -
                                 time.time()), 5 * SLOW)

    def test_overview_json(self):
        o = self.ctl_json("overview")
        expect = {"version": eft_version(), "connections": 2, "connections_rejected": 0,
                  "queues": 2, "topics": 1, "temp_queues": 0, "durable_subscriptions": 0,
                  "messages_queued": 5, "messages_unacked": 1, "messages_published": 7,
                  "messages_delivered": 2, "messages_acknowledged": 0,
                  "messages_redelivered": 0, "messages_dropped": 0, "producers_paused": 0,
                  "journal_bytes": None}
        self.assertEqual({k: o.get(k) for k in expect}, expect)
        self.assertIn({"url": self.stomp_listener(), "connections": 2}, o["listeners"])
        self.assertGreater(o["memory_bytes"], 0)
        # the table and the JSON are the same data
        values = dict(table(self.ctl("overview"))[1])
        self.assertEqual(values["memory_limit_bytes"], str(o["memory_limit_bytes"]))
        self.assertEqual(values["started_at"], str(o["started_at"]))

    # ---- queues ----

    def test_queues_table(self):
        out = self.ctl("queues")
        header, rows = table(out)
        self.assertEqual(header, ["NAME", "TYPE", "DEPTH", "BYTES", "UNACKED", "CONSUMERS",
                                  "PUBLISHED", "CLUSTER_WAITING"])
        self.assertEqual([r[0] for r in rows], ["/queue/a", "/queue/b"])
        a, b = rows
        # cluster_waiting: "-" (null), this eftd is not clustered
        self.assertEqual(a[:3] + a[4:], ["/queue/a", "queue", "3", "0", "0", "3", "-"])
        self.assertEqual(b[:3] + b[4:], ["/queue/b", "queue", "2", "1", "1", "3", "-"])
        # bytes: the memory of the messages waiting, more than their bodies
        self.assertGreater(int(a[3]), 3 * len("/queue/a message 0"))
        self.assertGreater(int(b[3]), 2 * len("/queue/b message 0"))
        # numbers are right-aligned under their heading
        lines = out.splitlines()
        for col in ("DEPTH", "PUBLISHED"):
            end = lines[0].index(col) + len(col)
            for line in lines[1:]:
                self.assertNotEqual(line[end - 1], " ", "%s not right-aligned:\n%s" % (col, out))
                self.assertTrue(end == len(line) or line[end] == " ", out)
        # CLUSTER_WAITING, all "-" here, is text: left-aligned, no blanks after
        cut = lines[0].index("  CLUSTER_WAITING")
        self.assertEqual(len({len(l[:cut].rstrip()) for l in lines}), 1, "ragged table:\n" + out)
        self.assertEqual({l[cut:] for l in lines[1:]}, {"  -"}, out)

    def test_queues_json(self):
        qs = self.ctl_json("queues")
        self.assertEqual([q["name"] for q in qs], ["/queue/a", "/queue/b"])
        for q, depth, unacked, consumers in ((qs[0], 3, 0, 0), (qs[1], 2, 1, 1)):
            self.assertEqual({k: q[k] for k in ("type", "depth", "unacked", "consumers",
                                                "published")},
                             {"type": "queue", "depth": depth, "unacked": unacked,
                              "consumers": consumers, "published": 3}, q)
        rows = table(self.ctl("queues"))[1]
        self.assertEqual([int(r[3]) for r in rows], [q["bytes"] for q in qs])

    # ---- topics ----

    def test_topics(self):
        header, rows = table(self.ctl("topics"))
        self.assertEqual(header, ["NAME", "SUBSCRIBERS", "DURABLE_SUBSCRIPTIONS", "PUBLISHED"])
        self.assertEqual(rows, [["/topic/t", "1", "0", "1"]])
        self.assertEqual(self.ctl_json("topics"), [{"name": "/topic/t", "subscribers": 1,
                                                    "durable_subscriptions": 0, "published": 1}])

    # ---- connections ----

    def test_connections_table(self):
        header, rows = table(self.ctl("connections"))
        self.assertEqual(header, ["ID", "PEER", "LISTENER", "LOGIN", "VERSION", "STATE",
                                  "CONNECTED_SECONDS", "UNACKED", "SUBSCRIPTIONS"])
        by_peer = {r[1]: r for r in rows}
        self.assertEqual(sorted(by_peer), sorted([self.peer(self.producer),
                                                  self.peer(self.consumer)]))
        p, c = by_peer[self.peer(self.producer)], by_peer[self.peer(self.consumer)]
        # the producer's subscriptions are none: an empty last cell
        self.assertEqual(p[2:6] + p[7:], [self.stomp_listener(), "-", "1.2", "open", "0"])
        self.assertEqual(c[2:6] + c[7:8], [self.stomp_listener(), "-", "1.2", "open", "1"])
        self.assertEqual(sorted(c[8].split(",")), ["/queue/b", "/topic/t"])
        for r in (p, c):
            self.assertRegex(r[0], r"^\d+$")
            self.assertRegex(r[6], r"^\d+$")
        ids = {c["peer"]: str(c["id"]) for c in self.ctl_json("connections")}
        self.assertEqual(ids, {peer: r[0] for peer, r in by_peer.items()})

    def test_connections_json(self):
        conns = {c["peer"]: c for c in self.ctl_json("connections")}
        self.assertEqual(sorted(conns), sorted([self.peer(self.producer),
                                                self.peer(self.consumer)]))
        p, c = conns[self.peer(self.producer)], conns[self.peer(self.consumer)]
        for conn, unacked in ((p, 0), (c, 1)):
            self.assertEqual({k: conn[k] for k in ("listener", "login", "version", "state",
                                                   "unacked")},
                             {"listener": self.stomp_listener(), "login": None, "version": "1.2",
                              "state": "open", "unacked": unacked}, conn)
            self.assertIsInstance(conn["id"], int)
            self.assertGreaterEqual(conn["connected_seconds"], 0)
        self.assertNotEqual(p["id"], c["id"])
        self.assertEqual(p["subscriptions"], [])
        self.assertEqual(sorted(c["subscriptions"], key=lambda s: s["id"]),
                         [{"id": "0", "destination": "/topic/t", "ack": "auto"},
                          {"id": "1", "destination": "/queue/b", "ack": "client-individual"}])

    # ---- purge ----

    def test_purge(self):
        self.assertEqual(self.ctl_json("purge", "/queue/b"), {"queue": "/queue/b", "purged": 2})
        # a name without '/' is /queue/NAME
        self.assertEqual(self.ctl("purge", "a"), "purged 3 messages from /queue/a\n")
        qs = {q["name"]: q for q in self.ctl_json("queues")}
        # /queue/a is empty and unheld now, so it may be forgotten; /queue/b
        # has its consumer and the message handed out
        self.assertEqual({k: qs["/queue/b"][k] for k in ("depth", "bytes", "unacked", "consumers")},
                         {"depth": 0, "bytes": 0, "unacked": 1, "consumers": 1})
        self.assertEqual(qs.get("/queue/a", {"depth": 0})["depth"], 0)
        row = [r for r in table(self.ctl("queues"))[1] if r[0] == "/queue/b"][0]
        self.assertEqual(row[2:6], ["0", "0", "1", "1"])
        # the purged messages are gone: acknowledging the held one brings none
        self.consumer.send_frame("ACK", [("id", self.held["ack"]), ("receipt", "ack")])
        expect_receipt(self.consumer, "ack")
        self.consumer.expect_nothing(0.3)
        self.assertEqual(self.ctl_json("overview")["messages_queued"], 0)

    def test_purge_one_message_says_message(self):
        send(self.producer, "/queue/one", "x", receipt="one")
        self.assertEqual(self.ctl("purge", "/queue/one"), "purged 1 message from /queue/one\n")

    def test_purge_percent_encodes_the_name(self):
        odd = "/queue/odd name?x=1&y=%2F#z/ü"
        send(self.producer, odd, "x", receipt="odd")
        self.assertIn(odd, [q["name"] for q in self.ctl_json("queues")])
        self.assertEqual(self.ctl("purge", odd), "purged 1 message from %s\n" % odd)

    def test_purge_unknown_queue_is_404(self):
        err = self.assert_fails("purge", "/queue/nothing-here")
        self.assertTrue(err.startswith("eftctl: 404 Not Found: "), err)
        err = self.assert_fails("--json", "purge", "nothing-here")
        self.assertTrue(err.startswith("eftctl: 404 Not Found: "), err)

    # ---- delete ----

    def test_delete(self):
        self.assertEqual(self.ctl("delete", "/queue/a"), "deleted /queue/a (3 messages)\n")
        self.assertEqual([q["name"] for q in self.ctl_json("queues")], ["/queue/b"])
        send(self.producer, "/queue/c", "x", receipt="c")
        self.assertEqual(self.ctl_json("delete", "c"), {"queue": "/queue/c", "deleted": 1})
        self.assertEqual([q["name"] for q in self.ctl_json("queues")], ["/queue/b"])
        o = self.ctl_json("overview")
        self.assertEqual((o["queues"], o["messages_queued"]), (1, 2))

    def test_delete_queue_with_consumers_is_409(self):
        err = self.assert_fails("delete", "/queue/b")
        self.assertTrue(err.startswith("eftctl: 409 Conflict: "), err)
        self.assertEqual(self.ctl_json("queues")[1]["depth"], 2)    # still there

    def test_delete_unknown_queue_is_404(self):
        err = self.assert_fails("delete", "/queue/nothing-here")
        self.assertTrue(err.startswith("eftctl: 404 Not Found: "), err)

    # ---- close ----

    def ids(self):
        return {c["peer"]: c["id"] for c in self.ctl_json("connections")}

    def test_close(self):
        ids = self.ids()
        cid = ids[self.peer(self.consumer)]
        self.assertEqual(self.ctl("close", str(cid)), "closed connection %d\n" % cid)
        f = self.consumer.expect_error_and_close()
        self.assertEqual(f.get("message"), "closed by an administrator")
        wait_for(lambda: list(self.ids()) == [self.peer(self.producer)], 5,
                 "the closed connection to leave the list")
        # its subscription went with it (the topic, held by nothing now, may
        # be forgotten), and its unacknowledged message went back
        self.assertIn(self.ctl_json("topics"), ([], [{"name": "/topic/t", "subscribers": 0,
                                                      "durable_subscriptions": 0,
                                                      "published": 1}]))
        b = [q for q in self.ctl_json("queues") if q["name"] == "/queue/b"][0]
        self.assertEqual({k: b[k] for k in ("depth", "unacked", "consumers")},
                         {"depth": 3, "unacked": 0, "consumers": 0})

    def test_close_json(self):
        pid = self.ids()[self.peer(self.producer)]
        self.assertEqual(self.ctl_json("close", str(pid)), {"closed": pid})
        f = self.producer.expect_error_and_close()
        self.assertEqual(f.get("message"), "closed by an administrator")

    def test_close_unknown_or_malformed_id(self):
        err = self.assert_fails("close", "999999")
        self.assertTrue(err.startswith("eftctl: 404 Not Found: "), err)
        err = self.assert_fails("close", "seven")
        self.assertTrue(err.startswith("eftctl: 400 Bad Request: "), err)
        self.assertEqual(len(self.ids()), 2)

    # ---- where eftctl goes ----

    def test_url_from_environment_and_u_over_it(self):
        rc, out, err = eftctl("topics", env={"EFTCTL_URL": self.url})
        self.assertEqual((rc, err), (0, ""))
        self.assertTrue(out.startswith("NAME"), out)
        dead = "http://127.0.0.1:%d" % free_port()
        rc, out, err = eftctl("topics", url=self.url, env={"EFTCTL_URL": dead})
        self.assertEqual((rc, err), (0, ""))

    def test_stomp_port_is_not_http(self):
        """Pointed at a STOMP listener by mistake: one line, exit 1, saying so
        (eftd answers an HTTP request on a STOMP port with a 400 that says it)."""
        url = "http://127.0.0.1:%d" % self.broker.port
        rc, out, err = eftctl("-t", "2", "overview", url=url)
        self.assertEqual((rc, out), (1, ""), err)
        self.assertEqual(len(err.splitlines()), 1, err)
        if harness.TRANSPORT == "tls":  # plain HTTP to a tls:// port: no handshake
            self.assertTrue(err.startswith("eftctl: cannot reach eftd at %s: " % url), err)
        else:
            self.assertTrue(err.startswith("eftctl: 400 Bad Request: This port speaks STOMP, "
                                           "not HTTP"), err)


def run_passwd(name, password):
    p = subprocess.run([EFT_PASSWD, name], input=password + "\n", capture_output=True, text=True,
                       timeout=30 * SLOW)
    if p.returncode != 0:
        raise AssertionError("eft-passwd %s: %s" % (name, p.stderr))
    return p.stdout.strip()


@TCP_ONLY
class EftctlAuthTest(unittest.TestCase):
    """A users-file: root (password with a ':' in it) has the admin mark,
    bob has not."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="eftctl-")
        self.addCleanup(self.dir.cleanup)
        users = os.path.join(self.dir.name, "users")
        with open(users, "w") as f:
            f.write(run_passwd("root", "s3:cret") + ":admin\n")
            f.write(run_passwd("bob", "builder") + "\n")
        os.chmod(users, 0o600)
        self.broker = Broker(config="users-file = %s\n" % users,
                             listen=[("tcp", "127.0.0.1"), ("http", "127.0.0.1")]).start()
        self.url = self.broker.url(1)

    def tearDown(self):
        self.broker.finish()

    def fails(self, *args, env=None):
        rc, out, err = eftctl(*args, url=self.url, env=env)
        self.assertEqual((rc, out), (1, ""), err)
        self.assertEqual(len(err.splitlines()), 1, err)
        return err

    def test_no_user_is_told_to_pass_user(self):
        err = self.fails("topics")
        self.assertTrue(err.startswith("eftctl: 401 Unauthorized"), err)
        self.assertIn("--user", err)

    def test_user_and_password(self):
        rc, out, err = eftctl("--user", "root:s3:cret", "topics", url=self.url)
        self.assertEqual((rc, out, err), (0, "NAME  SUBSCRIBERS  DURABLE_SUBSCRIPTIONS  PUBLISHED\n",
                                          ""))
        rc, out, err = eftctl("--user", "root:s3:cret", "--json", "queues", url=self.url)
        self.assertEqual((rc, json.loads(out), err), (0, [], ""))

    def test_password_from_environment(self):
        rc, out, err = eftctl("--user", "root", "--json", "topics", url=self.url,
                              env={"EFTCTL_PASSWORD": "s3:cret"})
        self.assertEqual((rc, json.loads(out), err), (0, [], ""))

    def test_wrong_password_is_401(self):
        err = self.fails("--user", "root:s3", "topics")
        self.assertTrue(err.startswith("eftctl: 401 Unauthorized"), err)
        err = self.fails("--user", "root", "topics", env={"EFTCTL_PASSWORD": "wrong"})
        self.assertTrue(err.startswith("eftctl: 401 Unauthorized"), err)

    def test_user_without_admin_mark_is_403(self):
        err = self.fails("--user", "bob:builder", "overview")
        # eftd's reason gives the hint; eftctl does not repeat it
        self.assertEqual(err, "eftctl: 403 Forbidden: this user has no admin mark in the users "
                         "file (eft-passwd --admin)\n")


def silent_listener(test):
    """A port that accepts connections (the kernel does) and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    test.addCleanup(s.close)
    return "http://127.0.0.1:%d" % s.getsockname()[1]


@TCP_ONLY
class EftctlCommandLineTest(unittest.TestCase):
    """What needs no broker: help, version, bad command lines, and a broker
    that is not there or does not answer."""

    def assert_one_line(self, r, status):
        rc, out, err = r
        self.assertEqual((rc, out), (status, ""), "stderr: %r" % err)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertTrue(err.startswith("eftctl: ") and err.endswith("\n"), err)
        return err.rstrip("\n")

    def test_help(self):
        for flag in ("-h", "--help"):
            rc, out, err = eftctl(flag)
            self.assertEqual((rc, err), (0, ""))
            for word in ("overview", "queues", "topics", "connections", "purge QUEUE",
                         "delete QUEUE", "close ID", "-u", "--url", "--user", "--json",
                         "--timeout", "EFTCTL_URL", "EFTCTL_PASSWORD", "http://127.0.0.1:15672",
                         "--version"):
                self.assertIn(word, out, "--help does not mention %s" % word)

    def test_version(self):
        for flag in ("-V", "--version"):
            self.assertEqual(eftctl(flag), (0, "eftctl %s\n" % eft_version(), ""))

    def test_bad_command_lines_exit_2(self):
        dead = "http://127.0.0.1:%d" % free_port()
        for args in ([], ["frob"], ["purge"], ["purge", "a", "b"], ["queues", "extra"],
                     ["close"], ["close", ""], ["--bogus", "queues"], ["-x", "queues"],
                     ["queues", "-u"], ["-t", "0", "queues"], ["-t", "soon", "queues"],
                     ["-u", "https://127.0.0.1:1", "queues"], ["-u", "ftp://h/", "queues"],
                     ["-u", "http://user@127.0.0.1:1", "queues"]):
            with self.subTest(args=args):
                self.assert_one_line(eftctl(*args, env={"EFTCTL_URL": dead}), 2)

    def test_no_broker_is_one_line(self):
        port = free_port()
        url = "http://127.0.0.1:%d" % port
        for args in (["overview"], ["--json", "queues"], ["topics"], ["connections"],
                     ["purge", "a"], ["delete", "/queue/a"], ["close", "1"]):
            with self.subTest(args=args):
                err = self.assert_one_line(eftctl(*args, url=url), 1)
                self.assertEqual(err, "eftctl: cannot reach eftd at %s: connection refused" % url)
        # EFTCTL_URL, and a bare host:port is http
        err = self.assert_one_line(eftctl("queues", env={"EFTCTL_URL": url}), 1)
        self.assertEqual(err, "eftctl: cannot reach eftd at %s: connection refused" % url)
        err = self.assert_one_line(eftctl("queues", url="127.0.0.1:%d" % port), 1)
        self.assertEqual(err, "eftctl: cannot reach eftd at %s: connection refused" % url)

    def test_no_answer_times_out(self):
        url = silent_listener(self)
        start = time.time()
        err = self.assert_one_line(eftctl("-t", "0.5", "overview", url=url), 1)
        self.assertEqual(err, "eftctl: cannot reach eftd at %s: no answer within 0.5 s" % url)
        self.assertLess(time.time() - start, 3 * SLOW)

    def test_no_password_and_no_terminal(self):
        """--user without a password, no EFTCTL_PASSWORD, no terminal to ask on:
        one line saying how to give it, before any request."""
        url = silent_listener(self)
        err = self.assert_one_line(eftctl("--user", "root", "queues", url=url), 1)
        self.assertIn("no password for root", err)
        self.assertIn("EFTCTL_PASSWORD", err)


if __name__ == "__main__":
    unittest.main()
