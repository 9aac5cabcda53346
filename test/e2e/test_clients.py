"""Real STOMP clients against a real eftd: the Ruby `stomp` gem
(test/clients/ruby_client.rb) and stomp.py (test/clients/stomp_py_client.py).

Each scenario of each script is one test: a fresh eftd (-l debug) on a free
loopback port, the script run as a subprocess with a timeout, exit code 0 and
a PASS line required.  A failure shows the script's output and eftd's log.

    /usr/bin/python3 test/e2e/run.py 'test_clients*.py'
"""

import os
import shutil
import subprocess
import unittest

import harness

CLIENTS = os.path.join(harness.ROOT, "test", "clients")
RUBY_SCRIPT = os.path.join(CLIENTS, "ruby_client.rb")
PY_SCRIPT = os.path.join(CLIENTS, "stomp_py_client.py")
TIMEOUT = 60 * harness.SLOW

RUBY = "/usr/bin/ruby" if os.path.exists("/usr/bin/ruby") else shutil.which("ruby")
# Debian's python3 sees python3-stomp; a pyenv or venv python may not.
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")

RUBY_SCENARIOS = [
    "stomp10", "ack12_individual", "ack12_client", "ack10_client", "nack11",
    "transactions", "receipts", "cross_version", "client_ack", "client_topic",
    "heartbeats", "crlf12", "binary", "client10", "client_queue_share",
    "bulk",
]
PY_SCENARIOS = [
    "basic_10", "ack_client_10", "tx_10", "receipts_10",
    "basic_11", "ack_client_11", "ack_individual_11", "nack_11", "tx_11", "receipts_11",
    "basic_12", "ack_client_12", "ack_individual_12", "nack_12", "tx_12", "receipts_12",
    "heartbeats_12", "topic_fanout", "bulk_12",
]


def _works(cmd):
    if not cmd[0]:
        return False
    try:
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


HAVE_RUBY_STOMP = _works([RUBY, "-e", "require 'stomp'"])
HAVE_STOMP_PY = _works([PYTHON, "-c", "import stomp"])


class ClientScriptTest(harness.BrokerTest):
    """Runs one scenario of a client script against this test's eftd."""

    args = ("-l", "debug")
    command = None      # [interpreter, script]
    summary = None      # e.g. "ruby", as in "ruby: 1 passed, 0 failed"

    def run_scenario(self, scenario):
        cmd = self.command + [str(self.broker.port), scenario]
        env = dict(os.environ)
        env.pop("EFT_CLIENT_DEBUG", None)
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=TIMEOUT, env=env)
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


def _add_tests(cls, scenarios):
    for name in scenarios:
        def test(self, name=name):
            self.run_scenario(name)
        test.__name__ = "test_" + name
        test.__doc__ = None
        setattr(cls, test.__name__, test)
    return cls


@unittest.skipUnless(HAVE_RUBY_STOMP, "ruby with the stomp gem (ruby-stomp) not available")
class RubyStompGemTest(ClientScriptTest):
    command = [RUBY, RUBY_SCRIPT]
    summary = "ruby"


@unittest.skipUnless(HAVE_STOMP_PY, "python3 with stomp.py (python3-stomp) not available")
class StompPyTest(ClientScriptTest):
    command = [PYTHON, PY_SCRIPT]
    summary = "stomp.py"


_add_tests(RubyStompGemTest, RUBY_SCENARIOS)
_add_tests(StompPyTest, PY_SCENARIOS)
