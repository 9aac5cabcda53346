"""Running real-client scripts (test/clients/*) as end-to-end tests: which
interpreters have the STOMP libraries, and a test case that runs one scenario
of a script against its own eftd and shows the script's output and eftd's log
when it fails."""

import os
import shutil
import subprocess

import harness

CLIENTS = os.path.join(harness.ROOT, "test", "clients")
TIMEOUT = 60 * harness.SLOW

RUBY = "/usr/bin/ruby" if os.path.exists("/usr/bin/ruby") else shutil.which("ruby")
# Debian's python3 sees python3-stomp; a pyenv or venv python may not.
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")


def works(cmd):
    if not cmd[0]:
        return False
    try:
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


HAVE_RUBY_STOMP = works([RUBY, "-e", "require 'stomp'"])
# stomp.py 8 sends from the caller's thread while its receiver thread reads,
# on one SSL object, and OpenSSL allows one call at a time (CPython does not
# serialize them: python/cpython#85763).  Over TLS about one scenario run in
# a hundred then failed inside the client (no CONNECTED, or a lost MESSAGE).
# The stomp.py scripts and harness.stomp_py therefore make their calls one at
# a time (shared_tls.share_stomp_py_tls), and run over TLS like the rest;
# test_tls.py's RealClientsTest keeps stomp.py's own, unguarded socket.
HAVE_STOMP_PY = works([PYTHON, "-c", "import stomp"])


def clean_env():
    """The environment without the scripts' own debug and target variables;
    over TLS (EFT_TRANSPORT=tls), EFT_TLS_CA tells them to speak TLS."""
    env = dict(os.environ)
    for k in ("EFT_CLIENT_DEBUG", "EFT_HOST", "EFT_PORT", "EFT_RPC_QUEUE", "EFT_TLS_CA"):
        env.pop(k, None)
    if harness.TRANSPORT == "tls":
        env["EFT_TLS_CA"] = harness.certs().ca
    return env


class ScriptTest(harness.BrokerTest):
    """Runs one scenario of a client script against this test's eftd."""

    args = ("-l", "debug")
    command = None      # [interpreter, script]
    summary = None      # e.g. "ruby", as in "ruby: 1 passed, 0 failed"

    def run_scenario(self, scenario):
        cmd = self.command + [str(self.broker.port), scenario]
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=TIMEOUT, env=clean_env())
            out, rc = p.stdout.decode("utf-8", "replace"), p.returncode
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode("utf-8", "replace")
            rc = "timeout after %ss" % TIMEOUT
        alive = self.broker.alive()
        want = "%s: 1 passed, 0 failed" % self.summary
        ok = rc == 0 and ("PASS %s " % scenario) in out and want in out and alive
        if not ok:
            log = self.broker.read_log()
            self.fail("%s scenario %r failed (exit %s%s)\n--- client output ---\n%s\n"
                      "--- eftd log (last 8000 chars) ---\n%s"
                      % (self.summary, scenario, rc, "" if alive else ", eftd died",
                         out, log[-8000:]))


def add_scenario_tests(cls, scenarios):
    """One test method per scenario name."""
    for name in scenarios:
        def test(self, name=name):
            self.run_scenario(name)
        test.__name__ = "test_" + name
        test.__doc__ = None
        setattr(cls, test.__name__, test)
    return cls
