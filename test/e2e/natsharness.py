"""NATS servers for the cluster tests: real nats-server processes with
JetStream on free loopback ports, alone or as a 3-node cluster, and a bare
NATS client (the text protocol) to ask JetStream what it holds."""

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

from harness import SLOW, free_port

NATS_SERVER = shutil.which("nats-server")
NATS_SKIP = ("nats-server is not installed (tools/install-deps test installs it): "
             "the cluster tests need it")


class NatsServer:
    """One nats-server -js, on 127.0.0.1; its store in a directory of its own."""

    def __init__(self, name="n1", port=None, cluster_port=None, routes=(), store=None):
        self.name = name
        self.port = port or free_port()
        self.http_port = free_port()    # monitoring: who subscribes to what (subscribers)
        self.cluster_port = cluster_port
        self.routes = list(routes)
        self.dir = store or tempfile.mkdtemp(prefix="eft-nats-")
        self.proc = None
        self.log_path = os.path.join(self.dir, "nats.log")

    @property
    def url(self):
        return "nats://127.0.0.1:%d" % self.port

    def start(self, wait=True):
        cmd = [NATS_SERVER, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-n", self.name,
               "-m", str(self.http_port), "-sd", os.path.join(self.dir, "js")]
        if self.cluster_port:
            cmd += ["--cluster_name", "eft", "--cluster",
                    "nats://127.0.0.1:%d" % self.cluster_port]
            if self.routes:
                cmd += ["--routes", ",".join("nats://127.0.0.1:%d" % p for p in self.routes)]
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=10):
        deadline = time.time() + timeout * SLOW
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("nats-server exited:\n" + self.read_log())
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.5):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("nats-server did not start:\n" + self.read_log())

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def kill(self):
        """kill -9."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if getattr(self, "log", None):
            self.log.close()
            self.log = None

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10 * SLOW)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if getattr(self, "log", None):
            self.log.close()
            self.log = None

    def cleanup(self):
        self.kill()
        shutil.rmtree(self.dir, True)


def nats_cluster(n=3):
    """n NatsServers routed to each other (not started)."""
    ports = [free_port() for _ in range(n)]
    cports = [free_port() for _ in range(n)]
    return [NatsServer(name="n%d" % (i + 1), port=ports[i], cluster_port=cports[i],
                       routes=[cports[j] for j in range(n) if j != i]) for i in range(n)]


def request(port, subject, payload=b"", timeout=5):
    """One NATS request, by the text protocol: the answer's payload."""
    with socket.create_connection(("127.0.0.1", port), timeout) as s:
        f = s.makefile("rb")
        f.readline()  # INFO
        s.sendall(b'CONNECT {"verbose":false,"headers":true,"no_responders":true}\r\n'
                  b"SUB _EFT_TEST.r 1\r\nPUB %s _EFT_TEST.r %d\r\n%s\r\n"
                  % (subject.encode(), len(payload), payload))
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = f.readline()
            if not line:
                break
            if line.startswith(b"PING"):
                s.sendall(b"PONG\r\n")
            elif line.startswith(b"MSG") or line.startswith(b"HMSG"):
                parts = line.split()
                n = int(parts[-1])
                data = f.read(n + 2)[:-2]
                if line.startswith(b"HMSG"):
                    data = data[int(parts[-2]):]
                return data
        raise AssertionError("no answer to %s" % subject)


def stream_info(port, stream, subjects_filter=None):
    body = json.dumps({"subjects_filter": subjects_filter}).encode() if subjects_filter else b""
    return json.loads(request(port, "$JS.API.STREAM.INFO." + stream, body))


def queue_streams(port):
    """The queue partitions' streams (EFT_Q_0, ...) in the account."""
    names = json.loads(request(port, "$JS.API.STREAM.NAMES")).get("streams") or []
    return sorted((n for n in names if n.startswith("EFT_Q_")), key=lambda n: int(n[6:]))


def stream_messages(port, stream=None):
    """Messages the stream holds (a work queue: not yet acknowledged); by
    default, what every queue stream holds."""
    if stream is None:
        counts = [stream_messages(port, s) for s in queue_streams(port)]
        return None if not counts or None in counts else sum(counts)
    info = stream_info(port, stream)
    return info["state"]["messages"] if "state" in info else None


def queue_partition(name, streams):
    """Queue NAME's partition (after /queue/): eftd's FNV-1a 32, computed apart."""
    h = 2166136261
    for c in name.encode():
        h = ((h ^ c) * 16777619) & 0xFFFFFFFF
    return h % streams if streams > 1 else 0


def stream_last_seq(port, stream="EFT_TOPICS"):
    """The stream's last sequence number: how many messages it has taken in,
    kept or not (a message nobody is interested in still takes one)."""
    info = stream_info(port, stream)
    return info["state"]["last_seq"] if "state" in info else 0


def consumers(port, stream="EFT_TOPICS"):
    """The stream's consumers, as JetStream describes them (name,
    num_waiting: pull requests not yet expired or filled, ...)."""
    return json.loads(request(port, "$JS.API.CONSUMER.LIST." + stream)).get("consumers") or []


def subscribers(server, prefix):
    """The connections to server with a subscription on a subject that
    starts with prefix, from its monitoring port (/subsz): interest NATS
    has, so a message published now reaches them."""
    url = "http://127.0.0.1:%d/subsz?subs=1&limit=100000" % server.http_port
    with urllib.request.urlopen(url, timeout=5 * SLOW) as r:
        subs = json.load(r).get("subscriptions_list") or []
    return {s["cid"] for s in subs if s["subject"].startswith(prefix)}


class Proxy:
    """A loopback TCP proxy to a NATS server that the test controls: cut()
    closes every connection through it (the client sees EOF) and turns new
    ones away until restore().  Its threads poll in short steps and end
    with close()."""

    def __init__(self, port):
        import threading
        self.target = port
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.pairs = []        # connections through it
        self.done = []         # ... cut, closed at close()
        self.open = True
        self.muted = False     # what the server sends is dropped
        self.closed = False
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    @property
    def url(self):
        return "nats://127.0.0.1:%d" % self.port

    def _accept(self):
        import threading
        while not self.closed:
            try:
                c, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if not self.open:
                c.close()
                continue
            try:
                s = socket.create_connection(("127.0.0.1", self.target), 5)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.pairs.append((c, s))
            for a, b, down in ((c, s, False), (s, c, True)):
                t = threading.Thread(target=self._pump, args=(a, b, down), daemon=True)
                self.threads.append(t)
                t.start()

    def _pump(self, src, dst, down):
        import select
        while not self.closed:
            try:
                r, _, _ = select.select([src], [], [], 0.05)
                if not r:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                if not (down and self.muted):
                    dst.sendall(data)
            except (OSError, ValueError):
                break
        for x in (src, dst):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        """Close every connection through it (EOF both ways); turn new ones
        away."""
        self.open = False
        with self.lock:
            pairs, self.pairs = self.pairs, []
            self.done += pairs
        for pair in pairs:
            for x in pair:
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def mute(self, on=True):
        """Drop what the server sends (the client's bytes still go): acks
        lost on the way."""
        self.muted = on

    def restore(self):
        self.open = True
        self.muted = False

    def close(self):
        self.cut()
        self.closed = True
        for t in self.threads:
            t.join(5)
        self.listener.close()
        for pair in self.done:
            for x in pair:
                x.close()
