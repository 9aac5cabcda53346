"""tools/examples (rpc_client/rpc_server, Python and Ruby) when they cannot
work: with nothing listening on the port, and with an eftd that answers
CONNECT with an ERROR (a wrong login), each script says why in one line on
stderr, with no traceback, prints nothing on stdout, and exits 1.
test_rpc_clients.py runs them against a working eftd.

    /usr/bin/python3 test/e2e/run.py 'test_examples*.py'
"""

import os
import subprocess
import unittest

import harness

from clientscript import HAVE_RUBY_STOMP, HAVE_STOMP_PY, PYTHON, RUBY, clean_env

EXAMPLES = os.path.join(harness.ROOT, "tools", "examples")
USERS = os.path.join(harness.ROOT, "etc", "users.example")
SCRIPTS = ("rpc_client.py", "rpc_server.py", "rpc_client.rb", "rpc_server.rb")
HAVE = {"py": HAVE_STOMP_PY, "rb": HAVE_RUBY_STOMP}
INTERP = {"py": PYTHON, "rb": RUBY}


class ExampleFailureTest(unittest.TestCase):
    def run_script(self, script, port):
        """Run one example against 127.0.0.1:port; (exit status, stdout, stderr)."""
        lang = script.rsplit(".", 1)[1]
        if not HAVE[lang]:
            self.skipTest("no stomp library for %s" % lang)
        cmd = [INTERP[lang], os.path.join(EXAMPLES, script), "127.0.0.1", str(port)]
        try:
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=30 * harness.SLOW,
                               env=clean_env())
        except subprocess.TimeoutExpired:
            self.fail("%s did not exit within %d s" % (" ".join(cmd), 30 * harness.SLOW))
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")

    def check_one_line(self, script, port, *expected):
        rc, out, err = self.run_script(script, port)
        what = "%s: exit %s\nstdout: %r\nstderr: %r" % (script, rc, out, err)
        self.assertEqual(rc, 1, what)
        self.assertEqual(out, "", what)
        self.assertEqual(len(err.splitlines()), 1, what)
        self.assertTrue(err.startswith(script + ": "), what)
        self.assertIn(str(port), err, what)
        for text in expected:
            self.assertIn(text, err, what)
        for trace in ("Traceback", "from /"):
            self.assertNotIn(trace, err, what)
        self.assertNotRegex(err, r'\.rb:\d+:in |\.py", line \d+', what)   # a stack frame


class NothingListening(ExampleFailureTest):
    """A free loopback port with nothing behind it."""

    def check(self, script):
        self.check_one_line(script, harness.free_port(), "cannot connect to 127.0.0.1 port")

    def test_rpc_client_py(self):
        self.check("rpc_client.py")

    def test_rpc_server_py(self):
        self.check("rpc_server.py")

    def test_rpc_client_rb(self):
        self.check("rpc_client.rb")

    def test_rpc_server_rb(self):
        self.check("rpc_server.rb")


@unittest.skipIf(harness.TRANSPORT == "tls", "the examples speak plain TCP")
class LoginRefused(ExampleFailureTest, harness.BrokerTest):
    """An eftd that wants a login from etc/users.example: guest/guest gets
    an ERROR, whose message the script passes on."""

    config = "users-file = %s\nallow-anonymous = no\nauth-delay-ms = 0\n" % USERS

    def check(self, script):
        self.check_one_line(script, self.broker.port, "refused the connection",
                            "authentication failed")

    def test_rpc_client_py(self):
        self.check("rpc_client.py")

    def test_rpc_server_py(self):
        self.check("rpc_server.py")

    def test_rpc_client_rb(self):
        self.check("rpc_client.rb")

    def test_rpc_server_rb(self):
        self.check("rpc_server.rb")


if __name__ == "__main__":
    unittest.main()
