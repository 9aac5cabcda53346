"""RPC over temp-queues with real clients against a real eftd (issue 3).

- test/clients/ruby_rpc.rb (Ruby `stomp` gem, both sides Ruby) and
  test/clients/stomp_py_rpc.py (stomp.py): each scenario is one test, as in
  test_clients.py: a fresh eftd (-l debug) on a free loopback port, the
  script run with a timeout, exit 0 and a PASS line required; a failure
  shows the script's output and eftd's log.
- tools/examples/rpc_server.{rb,py} + rpc_client.{rb,py}: every server with
  every client (the server in the background, the client sending 5
  requests and exiting 0), bounded in time; the server is always stopped.

    /usr/bin/python3 test/e2e/run.py 'test_rpc_clients*.py'
"""

import os
import signal
import subprocess
import tempfile
import time
import unittest

import harness
from clientscript import (CLIENTS, HAVE_RUBY_STOMP, HAVE_STOMP_PY, PYTHON, RUBY,
                          ScriptTest, add_scenario_tests, clean_env)

EXAMPLES = os.path.join(harness.ROOT, "tools", "examples")
RUBY_SCRIPT = os.path.join(CLIENTS, "ruby_rpc.rb")
PY_SCRIPT = os.path.join(CLIENTS, "stomp_py_rpc.py")

RUBY_SCENARIOS = ["rpc10", "rpc12", "rpc_two_clients"]
PY_SCENARIOS = ["subscribe_first_12", "subscribe_first_11", "auto_12", "auto_11", "auto_10",
                "two_clients_12"]


HAVE = {"rb": HAVE_RUBY_STOMP, "py": HAVE_STOMP_PY}
INTERP = {"rb": RUBY, "py": PYTHON}


@unittest.skipUnless(HAVE_RUBY_STOMP, "ruby with the stomp gem (ruby-stomp) not available")
class RubyRpcTest(ScriptTest):
    command = [RUBY, RUBY_SCRIPT]
    summary = "ruby-rpc"


@unittest.skipUnless(HAVE_STOMP_PY, "python3 with stomp.py (python3-stomp) not available")
class StompPyRpcTest(ScriptTest):
    command = [PYTHON, PY_SCRIPT]
    summary = "stomp.py-rpc"


add_scenario_tests(RubyRpcTest, RUBY_SCENARIOS)
add_scenario_tests(StompPyRpcTest, PY_SCENARIOS)


@unittest.skipIf(harness.TRANSPORT == "tls", "the examples speak plain TCP")
class RpcExampleTest(harness.BrokerTest):
    """tools/examples: a server in the background, a client sending 5 requests."""

    args = ("-l", "debug")
    COUNT = 5

    def run_pair(self, server_lang, client_lang, use_env=False):
        missing = [lang for lang in (server_lang, client_lang) if not HAVE[lang]]
        if missing:
            self.skipTest("no stomp library for %s" % ", ".join(missing))
        port = str(self.broker.port)
        env = clean_env()
        if use_env:
            env.update(EFT_HOST="127.0.0.1", EFT_PORT=port)
            srv_args, cli_args = [], []
        else:
            srv_args, cli_args = ["127.0.0.1", port], ["127.0.0.1", port, str(self.COUNT)]
        server_cmd = [INTERP[server_lang], os.path.join(EXAMPLES, "rpc_server." + server_lang)]
        client_cmd = [INTERP[client_lang], os.path.join(EXAMPLES, "rpc_client." + client_lang)]
        srv_out = tempfile.TemporaryFile()
        server = subprocess.Popen(server_cmd + srv_args, stdout=srv_out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, env=env)
        client_out, client_rc, server_rc = "", None, None
        try:
            # The queue keeps requests until the server subscribes, but wait for
            # it to say so, so that a server that cannot start is reported as such.
            deadline = time.time() + 15 * harness.SLOW
            while b"rpc_server: serving" not in self._read(srv_out):
                if server.poll() is not None or time.time() > deadline:
                    break
                time.sleep(0.05)
            try:
                p = subprocess.run(client_cmd + cli_args, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   timeout=30 * harness.SLOW, env=env)
                client_out, client_rc = p.stdout.decode("utf-8", "replace"), p.returncode
            except subprocess.TimeoutExpired as e:
                client_out = (e.stdout or b"").decode("utf-8", "replace")
                client_rc = "timeout"
        finally:
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
            try:
                server_rc = server.wait(timeout=10 * harness.SLOW)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=10)
                server_rc = "did not stop on SIGTERM"
            server_text = self._read(srv_out).decode("utf-8", "replace")
            srv_out.close()
        report = ("--- %s ---\n%s\n--- %s (exit %s) ---\n%s\n--- eftd log ---\n%s"
                  % (" ".join(client_cmd + cli_args), client_out, " ".join(server_cmd + srv_args),
                     server_rc, server_text, self.broker.read_log()[-4000:]))
        self.assertEqual(client_rc, 0, "client failed\n" + report)
        for i in range(1, self.COUNT + 1):
            self.assertIn("hello %d -> HELLO %d" % (i, i), client_out, report)
        self.assertEqual(server_rc, 0, "server did not stop cleanly\n" + report)
        self.assertIn("rpc_server: serving /queue/rpc", server_text, report)
        self.assertTrue(self.broker.alive(), report)

    @staticmethod
    def _read(f):
        f.seek(0)
        return f.read()

    def test_ruby_server_ruby_client(self):
        self.run_pair("rb", "rb")

    def test_python_server_python_client(self):
        self.run_pair("py", "py")

    def test_ruby_server_python_client(self):
        self.run_pair("rb", "py")

    def test_python_server_ruby_client(self):
        self.run_pair("py", "rb")

    def test_ruby_pair_host_port_from_env(self):
        self.run_pair("rb", "rb", use_env=True)

    def test_python_pair_host_port_from_env(self):
        self.run_pair("py", "py", use_env=True)


if __name__ == "__main__":
    unittest.main()
