"""Shared pieces of eft's end-to-end tests: start a real eftd on a free
loopback port, open every connection to it (open_socket), parse STOMP
frames out of bytes (parse_frames), and a raw STOMP client that sends exact
bytes and reads frames back (RawClient).  Every test that reads frames goes
through parse_frames, and every socket a test opens to eftd itself comes
from open_socket (the client libraries and programs the tests run open
their own).  Every wait is bounded; every process started is stopped.

EFT_TRANSPORT=tls runs the same tests over TLS: Broker then gives eftd a
tls:// listener (with certificates made for the run by certs()), and
open_socket speaks TLS, checking eftd's certificate."""

import atexit
import collections
import errno
import fcntl
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import termios
import threading
import time
import unittest

from shared_tls import SharedTLS, share_stomp_py_tls

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", "build")
EFTD = os.environ.get("EFTD", os.path.join(ROOT, BUILD, "eftd"))
# e.g. "valgrind --error-exitcode=99 -q" (make valgrind)
WRAPPER = os.environ.get("EFTD_WRAPPER", "").split()
# valgrind runs everything ~10x slower; an ASan build (make asan) 2-3x, which
# a gigabyte through TLS on two cores makes felt.
SLOW = 10 if WRAPPER else 2 if "asan" in BUILD else 1
# ASan keeps up to 256 MB of freed memory in quarantine (and shadow memory
# beside): what eftd's own memory is allowed, plus this, under make asan.
ASAN_RSS = 320 * 1024 * 1024 if "asan" in BUILD else 0
TRANSPORT = os.environ.get("EFT_TRANSPORT", "tcp")  # how tests reach eftd: tcp or tls
if TRANSPORT not in ("tcp", "tls"):
    raise SystemExit("EFT_TRANSPORT must be tcp or tls, not %r" % TRANSPORT)


class Certs:
    """A throwaway CA, a server certificate for 127.0.0.1, ::1 and localhost,
    a client certificate from that CA, and one from another CA, made with
    the openssl command in a temporary folder (never committed)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="eft-certs-")
        atexit.register(shutil.rmtree, self.dir, True)
        self.ca, self.ca_key = self.path("ca.pem"), self.path("ca.key")
        self.other_ca, other_ca_key = self.path("other-ca.pem"), self.path("other-ca.key")
        self._ca(self.ca, self.ca_key, "eft test CA")
        self._ca(self.other_ca, other_ca_key, "another CA")
        self.server, self.server_key = self.path("server.pem"), self.path("server.key")
        self._leaf(self.server, self.server_key, "localhost", self.ca, self.ca_key,
                   "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n"
                   "extendedKeyUsage=serverAuth\n")
        self.client, self.client_key = self.path("client.pem"), self.path("client.key")
        self._leaf(self.client, self.client_key, "alice", self.ca, self.ca_key,
                   "extendedKeyUsage=clientAuth\n")
        self.stranger, self.stranger_key = self.path("stranger.pem"), self.path("stranger.key")
        self._leaf(self.stranger, self.stranger_key, "mallory", self.other_ca, other_ca_key,
                   "extendedKeyUsage=clientAuth\n")

    def path(self, name):
        return os.path.join(self.dir, name)

    @staticmethod
    def _run(*args):
        subprocess.run(["openssl"] + list(args), check=True, capture_output=True, timeout=60,
                       stdin=subprocess.DEVNULL)

    def _ca(self, cert, key, name):
        self._run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                  "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=" + name)

    def _leaf(self, cert, key, name, ca, ca_key, ext):
        csr, extfile = cert + ".csr", cert + ".ext"
        with open(extfile, "w") as f:
            f.write(ext)
        self._run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", key, "-out", csr, "-subj", "/CN=" + name)
        self._run("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
                  "-out", cert, "-days", "2", "-extfile", extfile)

    def config(self):
        """The config lines a tls:// listener needs."""
        return "tls-cert-file = %s\ntls-key-file = %s\n" % (self.server, self.server_key)

    def context(self, cert=None, key=None):
        """A client context that trusts the test CA (and presents cert)."""
        ctx = ssl.create_default_context(cafile=self.ca)
        if cert:
            ctx.load_cert_chain(cert, key)
        return ctx


_certs = None


def certs():
    """The run's certificates, made on first use."""
    global _certs
    if _certs is None:
        _certs = Certs()
    return _certs


def wait_for(pred, timeout, what):
    """Poll pred until it is true, for at most timeout seconds (x SLOW)."""
    deadline = time.time() + timeout * SLOW
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def stomp_py(port, version="1.2", host="127.0.0.1", **kw):
    """A stomp.py connection object of the class for version, speaking TLS
    (trusting the test CA) when the run is over TLS, its TLS calls one at a
    time (shared_tls.share_stomp_py_tls)."""
    import stomp
    cls = {"1.0": stomp.Connection10, "1.1": stomp.Connection11, "1.2": stomp.Connection12}[version]
    conn = cls([(host, port)], **kw)
    if TRANSPORT == "tls":
        conn.set_ssl(for_hosts=[(host, port)], ca_certs=certs().ca)
        share_stomp_py_tls(conn)
    return conn


def ruby_ssl():
    """The Ruby stomp gem's `ssl:` host parameter for this run, as Ruby code."""
    if TRANSPORT != "tls":
        return "false"
    return "Stomp::SSLParams.new(ts_files: '%s')" % certs().ca


def rss_bytes(pid, field="VmRSS"):
    """Resident memory of a process; field VmHWM gives its peak so far."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no %s for pid %d" % (field, pid))


class RssSampler(threading.Thread):
    """VmRSS of a process every `every` seconds until stopped."""

    def __init__(self, pid, every=0.05):
        super().__init__(daemon=True)
        self.pid, self.every = pid, every
        self.samples = []          # (seconds since start, bytes)
        self.done = threading.Event()

    def run(self):
        t0 = time.time()
        while not self.done.is_set():
            try:
                self.samples.append((time.time() - t0, rss_bytes(self.pid)))
            except (OSError, AssertionError):
                return
            self.done.wait(self.every)

    def stop(self):
        self.done.set()
        self.join(5)

    def peak(self, since=0.0):
        return max((r for t, r in self.samples if t >= since), default=0)


def kill9(proc, what="eftd"):
    """kill -9 a process that must still be running, and check that SIGKILL
    is what ended it: a crash test that kills a process which had already
    died (or that then exits some other way) must not pass as a kill."""
    rc = proc.poll()
    if rc is not None:
        raise AssertionError("%s was no longer running when it was to be killed: %s"
                             % (what, exit_status(rc)))
    proc.send_signal(signal.SIGKILL)
    rc = proc.wait(timeout=10)
    if rc != -signal.SIGKILL:
        raise AssertionError("%s did not die of the kill -9: %s" % (what, exit_status(rc)))


def exit_status(rc):
    """A Popen returncode in words."""
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            return "killed by %s" % signal.Signals(-rc).name
        except ValueError:
            return "killed by signal %d" % -rc
    return "exit status %d" % rc


# What ASan, LeakSanitizer, UBSan, valgrind memcheck or glibc's heap checks
# print when eftd goes wrong (valgrind's error kinds, as make valgrind runs
# it with -q, and its summaries without -q).  eftd's own lines (a timestamp,
# then "eftd") are not searched: they may quote what a client sent.
REPORT = re.compile(r"(ERROR|SUMMARY): [A-Za-z]*Sanitizer|runtime error:|"
                    r"^==\d+== +(Invalid |Mismatched |Conditional jump|Use of uninitialised|"
                    r"Syscall param|Source and destination overlap|Jump to the invalid|"
                    r"Process terminating|Argument .* fishy|.* definitely lost in loss record)|"
                    r"^==\d+== ERROR SUMMARY: [1-9]|^==\d+== +definitely lost: [1-9]|"
                    r"free\(\): |double free|malloc\(\): ")
EFTD_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} eftd ")


def reports(output):
    """The lines of eftd's output that a sanitizer, valgrind or glibc wrote
    about an error or a leak; [] if none."""
    return [line for line in output.splitlines()
            if not EFTD_LINE.match(line) and REPORT.search(line)]


def exit_problems(rc, output, killed=False):
    """What is wrong with how eftd ended, in words ([] if nothing): a clean
    stop (SIGTERM, SIGINT) must exit 0 and a kill -9 end it by SIGKILL, and
    neither may leave a report in its output (report_problems)."""
    want = -signal.SIGKILL if killed else 0
    if rc == want:
        return report_problems(output)
    return ["eftd ended with %s, not %s" % (exit_status(rc), exit_status(want) if killed
                                            else "exit status 0")] + report_problems(output)


def report_problems(output):
    """A sanitizer or valgrind report in eftd's output, in words ([] if
    none).  Under make asan and make valgrind a leak or a memory error at
    exit shows only here and in the exit code."""
    found = reports(output)
    if not found:
        return []
    return ["eftd's output has %d lines of a sanitizer, valgrind or glibc report, the first: %s"
            % (len(found), found[0])]


def check_exit(rc, output, killed=False, where=None):
    """exit_problems for a process a test ran itself; raises AssertionError
    with the end of its output (and where it is kept)."""
    problems = exit_problems(rc, output, killed)
    if problems:
        raise AssertionError("; ".join(problems) +
                             ("; its log is kept in %s" % where if where else "") +
                             "; the end of its output:\n" + output[-4000:])


def listening_ports(pid):
    """The TCP ports process pid listens on, from /proc (its sockets'
    inodes, found in the kernel's tables of listening sockets)."""
    inodes = set()
    try:
        fds = os.listdir("/proc/%d/fd" % pid)
    except OSError:
        return set()
    for fd in fds:
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = set()
    for field in tcp_sockets():
        if field[3] == "0A" and field[9] in inodes:    # 0A: LISTEN
            ports.add(int(field[1].rsplit(":", 1)[1], 16))
    return ports


def tcp_sockets():
    """The kernel's TCP sockets, IPv4 and IPv6: each row of /proc/net/tcp
    and /proc/net/tcp6, split into its fields."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            yield row.split()


def eftd_has_read(*socks):
    """Whether eftd has read everything sent on each of socks (the test's
    ends of connections to it): our kernel holds none of it unacknowledged
    (SIOCOUTQ), so it reached eftd's socket, and that socket holds none of
    it unread (its receive queue in /proc/net/tcp).  The event a sleep after
    a send stood for ("eftd has read it by now"); poll it with wait_for."""
    ends = set()
    for s in socks:
        unsent = struct.unpack("i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
        if unsent:
            return False
        ends.add((s.getpeername()[1], s.getsockname()[1]))  # eftd's (local, remote) ports
    for field in tcp_sockets():
        ports = (int(field[1].rsplit(":", 1)[1], 16), int(field[2].rsplit(":", 1)[1], 16))
        if ports in ends and int(field[4].split(":")[1], 16):
            return False
    return True


_ports_given = collections.deque(maxlen=2000)


def free_port():
    """A loopback port free now and not handed out lately by this process:
    the kernel can give one port to two binds in a row, and a server started
    with both (nats-server's monitor and route ports) fails to listen."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _ports_given:
            _ports_given.append(port)
            return port
    raise RuntimeError("no free loopback port in 100 tries")


def open_socket(port, host="127.0.0.1", timeout=5, sockopts=(), tls=None, context=None):
    """A connection to eftd at host:port: the one place every test opens
    one.  timeout is in seconds, as given (callers scale it by SLOW); 0 starts
    a non-blocking connect and returns at once.  sockopts are (level, option,
    value) triples set before connecting (SO_RCVBUF must be, or the kernel
    tunes the buffer itself); anything else a test does to the socket it
    does to what this returns.  tls (default: EFT_TRANSPORT is tls) wraps it
    in TLS with context (default: trusting the test CA); with timeout 0 the
    handshake is left to the caller (do_handshake until it stops raising
    SSLWantReadError)."""
    s = _open_tcp(port, host, timeout, sockopts)
    if tls is None:
        tls = TRANSPORT == "tls"
    if not tls:
        return s
    ctx = context or certs().context()
    try:
        t = ctx.wrap_socket(s, server_hostname=host, do_handshake_on_connect=timeout != 0)
    except (OSError, ssl.SSLError):
        s.close()
        raise
    return SharedTLS(t, timeout)


def _open_tcp(port, host, timeout, sockopts):
    error = None
    for family, kind, proto, _, addr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        s = socket.socket(family, kind, proto)
        try:
            for level, option, value in sockopts:
                s.setsockopt(level, option, value)
            s.settimeout(timeout)
            if timeout == 0:
                err = s.connect_ex(addr)
                if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                    raise OSError(err, os.strerror(err))
            else:
                s.connect(addr)
            return s
        except OSError as e:
            s.close()
            error = e
    raise error


class Broker:
    """An eftd process.  Use as a context manager, or start() and then
    stop() (a clean stop), crash() (kill -9) or finish() (after a test).
    Each judges how eftd ended (exit_problems): anything but what the test
    meant fails it, and eftd's log is then kept and named."""

    def __init__(self, config=None, args=(), bind="127.0.0.1", transport=None, listen=None,
                 env=None):
        """listen: a list of (scheme, host) for several listeners on free ports
        (self.ports, in order; self.port is the first's); else one listener
        of the run's transport (or `transport`) on bind.  env: variables
        added to eftd's environment (LD_PRELOAD, for test_powercut)."""
        self.port = free_port()
        self.bind = bind
        self.config_text = config
        self.args = list(args)
        self.transport = transport or TRANSPORT
        self.listen = list(listen or [])
        self.ports = [self.port] + [free_port() for _ in self.listen[1:]]
        self.env = dict(os.environ, **env) if env else None
        self.proc = None
        self.log_path = None
        self.config_path = None
        self.judged = False     # how eftd ended has been checked (or start failed)
        self.keep_log = False   # it ended wrongly: its log stays for whoever looks

    def url(self, i=0):
        """The i-th listener's URL; ws:// and wss:// ones end in /ws."""
        scheme, host = self.listen[i]
        return "%s://%s:%d%s" % (scheme, "[%s]" % host if ":" in host else host, self.ports[i],
                                 "/ws" if scheme in ("ws", "wss") else "")

    def start(self):
        fd, self.log_path = tempfile.mkstemp(prefix="eftd-", suffix=".log")
        os.close(fd)
        if self.listen:
            cmd = WRAPPER + [EFTD] + self.args
            for i in range(len(self.listen)):
                cmd += ["-L", self.url(i)]
            if any(scheme in ("tls", "wss") for scheme, _ in self.listen):
                self.config_text = certs().config() + (self.config_text or "")
            self.transport, self.bind = self.listen[0]
        elif self.transport == "tls":
            host = "[%s]" % self.bind if ":" in self.bind else self.bind
            cmd = WRAPPER + [EFTD, "-L", "tls://%s:%d" % (host, self.port)] + self.args
            self.config_text = certs().config() + (self.config_text or "")
        else:
            cmd = WRAPPER + [EFTD, "-b", self.bind, "-p", str(self.port)] + self.args
        if self.config_text is not None:
            fd, self.config_path = tempfile.mkstemp(prefix="eftd-", suffix=".conf")
            with os.fdopen(fd, "w") as f:
                f.write(self.config_text)
            cmd += ["-c", self.config_path]
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env)
        deadline = time.time() + 10 * SLOW
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.judged = True  # said here, with the log
                raise RuntimeError("eftd exited early (%s):\n%s"
                                   % (exit_status(self.proc.returncode), self.read_log()))
            # Ready when every listener answers (eftd opens them in turn),
            # and is eftd's: a port free_port() gave may be taken by another
            # process meanwhile, and then answers for an eftd not started yet
            # (valgrind's slow start makes that window seconds long).
            where = list(zip(self.listen, self.ports)) or [((self.transport, self.bind),
                                                           self.port)]
            if not {port for _, port in where} <= listening_ports(self.proc.pid):
                time.sleep(0.02)
                continue
            try:
                for (scheme, host), port in where:
                    with open_socket(port, host, timeout=1, tls=scheme in ("tls", "wss")):
                        pass
                return self
            except OSError:
                time.sleep(0.02)
        self.kill()
        self.judged = True
        raise RuntimeError("eftd did not start listening:\n" + self.read_log())

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=10):
        """A clean stop: SIGTERM, and eftd must exit 0 within timeout seconds
        (x SLOW) with no sanitizer or valgrind report (ended()).  Returns 0;
        raises AssertionError otherwise, also when eftd had already died.
        Once it has been judged, returns the exit code again."""
        if self.proc is None:
            return None
        if self.judged:
            return self.proc.returncode
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.ended(timeout)

    def ended(self, timeout=10):
        """Wait for eftd, which a test has told to stop (SIGTERM, SIGINT), to
        exit, and judge how: exit 0 and no report in its log.  If it does
        not exit within timeout seconds (x SLOW) it is killed.  Raises
        AssertionError naming its log, which is kept, when anything is
        wrong; returns the exit code."""
        try:
            rc = self.proc.wait(timeout=timeout * SLOW)
        except subprocess.TimeoutExpired:
            self.kill()
            self.conclude(["eftd did not exit within %g s" % (timeout * SLOW)] +
                          report_problems(self.read_log()))
        self.conclude(exit_problems(rc, self.read_log()))
        return rc

    def crash(self):
        """kill -9, as a power cut would stop it.  eftd must still be running
        and die of the SIGKILL, with no report in its log so far (valgrind
        reports errors as they happen); AssertionError otherwise."""
        problems = []
        try:
            kill9(self.proc)
        except AssertionError as e:
            self.kill()
            problems.append(str(e))
        self.conclude(problems + report_problems(self.read_log()))

    def conclude(self, problems):
        """eftd has ended, and problems say what was wrong with how: none,
        or AssertionError, with the log kept."""
        self.judged = True
        self.cleanup()
        if problems:
            self.keep_log = True
            raise AssertionError("%s; eftd's log is kept in %s; its end:\n%s"
                                 % ("; ".join(problems), self.log_path,
                                    self.read_log()[-4000:]))

    def finish(self):
        """After a test: a clean stop if eftd still runs, and a judgement of
        how it ended if nobody has judged it (a death the test did not make
        fails here); then its log is removed, unless it is kept."""
        try:
            if self.proc is not None:
                self.stop()
        finally:
            self.cleanup()
            self.discard_log()

    def discard_log(self):
        if os.environ.get("EFT_KEEP_LOGS") == "1":
            return  # kept for whoever looks (a campaign's loop)
        if self.log_path and not self.keep_log and os.path.exists(self.log_path):
            os.unlink(self.log_path)

    def kill(self):
        """kill -9 without a judgement, for a test that has failed already
        (crash() is the kill a test means)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.judged = True
        self.cleanup()

    def cleanup(self):
        if getattr(self, "log", None):
            self.log.close()
            self.log = None
        for p in (self.config_path,):
            if p and os.path.exists(p):
                os.unlink(p)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.finish()


def finish_all(brokers):
    """Broker.finish for each (all of them, even when one fails); one
    AssertionError for every eftd that ended wrongly."""
    failures = []
    for b in brokers:
        try:
            b.finish()
        except AssertionError as e:
            failures.append(str(e))
    if failures:
        raise AssertionError("\n\n".join(failures))


class DataDirTest(unittest.TestCase):
    """Tests that run eftd on a data-dir of their own and kill -9 it: the
    brokers and clients each test makes are closed and killed after it, and
    the directory removed."""
    data_prefix = "eftd-data-"

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix=self.data_prefix)
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.data = os.path.join(self.dir, "data")
        self.brokers = []
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        finish_all(self.brokers)

    def start_on_data(self, config, args=(), data=None, listen=None, env=None):
        """A started eftd with config's text, on data (self.data by default)."""
        b = Broker(config=config, listen=listen, env=env,
                   args=["--data-dir", data or self.data] + list(args))
        self.brokers.append(b)
        return b.start()

    def connect(self, b, version="1.2"):
        """A RawClient of b, CONNECTed, closed after the test."""
        c = RawClient(b.port)
        self.clients.append(c)
        c.connect(version)
        return c

    @staticmethod
    def crash(b):
        """kill -9, as a power cut would stop it (Broker.crash)."""
        b.crash()


class Frame:
    def __init__(self, command, headers, body):
        self.command = command
        self.headers = headers      # list of (name, value), in order, raw (escaped) text;
                                    # value None for a line without a colon
        self.body = body            # bytes

    def get(self, name, default=None):
        for k, v in self.headers:
            if k == name:
                return v
        return default

    def __getitem__(self, name):
        v = self.get(name)
        if v is None:
            raise KeyError("%s frame has no %r header: %r" % (self.command, name, self.headers))
        return v

    def __repr__(self):
        return "Frame(%r, %r, %r)" % (self.command, self.headers, self.body[:80])


def frame(command, headers=(), body=b""):
    """Encode a frame; headers is a list of (name, value) or a dict, used as given."""
    if isinstance(headers, dict):
        headers = list(headers.items())
    out = command.encode() + b"\n"
    for k, v in headers:
        out += (k.encode() if isinstance(k, str) else k) + b":" + \
               (v.encode() if isinstance(v, str) else v) + b"\n"
    if isinstance(body, str):
        body = body.encode()
    return out + b"\n" + body + b"\0"


def _eols(buf, pos):
    """Where the run of EOLs (LF or CRLF) at pos ends, and how many it holds."""
    n = 0
    while True:
        if buf.startswith(b"\n", pos):
            pos += 1
        elif buf.startswith(b"\r\n", pos):
            pos += 2
        else:
            return pos, n
        n += 1


def _parse_frame(buf, pos):
    """The frame starting at pos: (Frame, where the next one starts), or None
    if it is not complete yet."""
    lf = buf.find(b"\n\n", pos)
    crlf = buf.find(b"\n\r\n", pos, len(buf) if lf < 0 else lf + 2)
    if crlf >= 0:
        head_end, start = crlf, crlf + 3
    elif lf >= 0:
        head_end, start = lf, lf + 2
    else:
        return None
    lines = [line[:-1] if line.endswith(b"\r") else line
             for line in bytes(buf[pos:head_end]).split(b"\n")]
    headers, length = [], None
    for line in lines[1:]:
        name, colon, value = line.decode("utf-8", "replace").partition(":")
        headers.append((name, value if colon else None))
        if name == "content-length" and colon and length is None:
            length = int(value)
    if length is not None:
        if len(buf) < start + length + 1:
            return None
        if buf[start + length] != 0:
            raise AssertionError("no NUL after content-length body: %r"
                                 % bytes(buf[pos:start + length + 1])[:200])
        stop = start + length
    else:
        stop = buf.find(b"\0", start)
        if stop < 0:
            return None
    command = lines[0].decode("utf-8", "replace")
    return Frame(command, headers, bytes(buf[start:stop])), stop + 1


def parse_frames(buf):
    """The complete frames at the start of buf (bytes or bytearray).  Returns
    (frames, rest, eols): rest is what follows the last complete frame (the
    start of an incomplete one, or b""); eols counts the heart-beat EOLs
    (LF or CRLF) before, between and after the frames, which are consumed.

    Header lines may end in LF or CRLF.  The body is content-length bytes
    and a NUL when that header is there (the first one counts), else
    everything up to the first NUL.  Header text is kept as sent (escapes
    are not undone).  A malformed frame (content-length not a number, no
    NUL after the body it gives) raises, once the frames before it have
    been returned."""
    frames, eols, pos = [], 0, 0
    while True:
        pos, n = _eols(buf, pos)
        eols += n
        try:
            parsed = _parse_frame(buf, pos)
        except (AssertionError, ValueError):
            if frames:
                break
            raise
        if parsed is None:
            break
        f, pos = parsed
        frames.append(f)
    return frames, bytes(buf[pos:]), eols


def expect_receipt(c, rid, timeout=None):
    """The next frame is the RECEIPT for rid."""
    f = c.expect("RECEIPT", timeout)
    if f.get("receipt-id") != rid:
        raise AssertionError("expected RECEIPT receipt-id:%s, got %r" % (rid, f))
    return f


def subscribe(c, dest, sid="0", ack=None, headers=()):
    """SUBSCRIBE and wait for its RECEIPT, so the subscription is in place."""
    h = [("destination", dest), ("id", sid)]
    if ack:
        h.append(("ack", ack))
    h += list(headers)
    h.append(("receipt", "sub-" + sid))
    c.send_frame("SUBSCRIBE", h)
    expect_receipt(c, "sub-" + sid)


def send(c, dest, body="", headers=(), receipt=None):
    """SEND; with a receipt, wait for its RECEIPT (the message was routed)."""
    h = [("destination", dest)] + list(headers)
    if receipt is not None:
        h.append(("receipt", receipt))
    c.send_frame("SEND", h, body)
    if receipt is not None:
        expect_receipt(c, receipt)


def send_receipted(c, sends, rid="sent"):
    """SENDs of (destination, body, headers) in one write, the last asking
    for a RECEIPT, and wait for it: all of them were routed by then."""
    last = len(sends) - 1
    c.send(b"".join(frame("SEND", [("destination", d)] + list(h) +
                          ([("receipt", rid)] if i == last else []), body)
                    for i, (d, body, h) in enumerate(sends)))
    expect_receipt(c, rid)


def expect_messages(c, n):
    """n MESSAGE frames, then nothing more for a while."""
    got = c.read_frames(n)
    for f in got:
        if f.command != "MESSAGE":
            raise AssertionError("expected MESSAGE, got %r" % f)
    c.expect_nothing()
    return got


class Closed(Exception):
    pass


class RawClient:
    """A STOMP client speaking exact bytes over a socket from open_socket.
    What arrives is parsed by parse_frames as it comes; read_frame hands the
    frames out in order."""

    RECV = 1 << 18

    def __init__(self, port, host="127.0.0.1", timeout=5, sockopts=(), tls=None, context=None):
        self.timeout = timeout * SLOW
        self.sock = open_socket(port, host, self.timeout, sockopts, tls=tls, context=context)
        self.buf = b""                          # received, not a complete frame yet
        self.pending = collections.deque()      # complete frames not read yet
        self.heartbeats = 0                     # EOLs seen between frames

    def send(self, data):
        self.sock.sendall(data)

    def send_frame(self, command, headers=(), body=b""):
        self.send(frame(command, headers, body))

    def connect(self, version="1.2", headers=None):
        h = [("accept-version", version), ("host", "/")] if version else []
        h += list((headers or {}).items())
        self.send_frame("CONNECT", h)
        f = self.read_frame()
        if f.command != "CONNECTED":
            raise AssertionError("expected CONNECTED, got %r" % f)
        return f

    def _fill(self, deadline):
        """One receive (bounded by deadline), parsed into pending."""
        remaining = deadline - time.time()
        if remaining <= 0:
            raise socket.timeout("no complete frame in time; have %r" % self.buf[:200])
        self.sock.settimeout(remaining)
        data = self.sock.recv(self.RECV)
        if not data:
            raise Closed("connection closed; unparsed %r" % self.buf[:200])
        frames, self.buf, eols = parse_frames(self.buf + data)
        self.pending.extend(frames)
        self.heartbeats += eols

    def read_frame(self, timeout=None):
        """The next frame; socket.timeout after timeout seconds (default
        self.timeout), Closed when the server has closed the connection."""
        deadline = time.time() + (timeout if timeout is not None else self.timeout)
        while not self.pending:
            self._fill(deadline)
        return self.pending.popleft()

    def poll(self, timeout):
        """The frames already here, or else those one receive brings within
        timeout seconds; [] if none came.  Closed at EOF."""
        if not self.pending:
            try:
                self._fill(time.time() + timeout)
            except socket.timeout:
                pass
        frames = list(self.pending)
        self.pending.clear()
        return frames

    def drain(self, timeout, idle=None):
        """Every frame until the server closes (returns frames, True), or until
        none came for `idle` seconds or `timeout` passed (returns frames, False)."""
        out = []
        deadline = time.time() + timeout
        while True:
            remaining = deadline - time.time()
            if remaining <= 0:
                return out, False
            try:
                out.append(self.read_frame(min(remaining, idle) if idle else remaining))
            except socket.timeout:
                return out, False
            except (Closed, ConnectionResetError):
                return out, True

    def read_frames(self, n, timeout=None):
        return [self.read_frame(timeout) for _ in range(n)]

    def expect(self, command, timeout=None):
        f = self.read_frame(timeout)
        if f.command != command:
            raise AssertionError("expected %s, got %r" % (command, f))
        return f

    def expect_error_and_close(self, timeout=None):
        """An ERROR frame, then the server closes the connection."""
        f = self.expect("ERROR", timeout)
        self.expect_closed(timeout)
        return f

    def expect_closed(self, timeout=None):
        """The server ends the connection; then we close our end, as real
        clients do (eftd's lingering close waits for that, up to 2 s)."""
        deadline = time.time() + (timeout if timeout is not None else self.timeout)
        while True:
            try:
                self._fill(deadline)
            except (Closed, ConnectionResetError):
                self.close()
                return

    def expect_nothing(self, wait=0.2):
        """No frame arrives within `wait` seconds (x SLOW, like every other
        wait: a slow build must not make "nothing came" easier to pass).
        Heart-beat EOLs are ignored."""
        self.expect_nothing_for(wait * SLOW)

    def expect_nothing_for(self, seconds):
        """No frame arrives within exactly `seconds`, not scaled: for a window
        whose length is itself what is measured (heart-beats counted in it)."""
        try:
            f = self.read_frame(timeout=seconds)
        except socket.timeout:
            return
        raise AssertionError("expected nothing, got %r" % f)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class BrokerTest(unittest.TestCase):
    """A test case with a fresh eftd per test and clients closed afterwards."""

    config = None
    args = ()
    listen = None  # several listeners: see Broker

    def setUp(self):
        self.broker = Broker(config=self.config, args=self.args, listen=self.listen).start()
        self.clients = []

    def tearDown(self):
        for c in self.clients:
            c.close()
        self.broker.finish()

    def client(self, connect="1.2", **kw):
        c = RawClient(self.broker.port, **kw)
        self.clients.append(c)
        if connect:
            c.connect(connect)
        return c
