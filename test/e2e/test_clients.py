"""Real STOMP clients against a real eftd: the Ruby `stomp` gem
(test/clients/ruby_client.rb) and stomp.py (test/clients/stomp_py_client.py).

Each scenario of each script is one test: a fresh eftd (-l debug) on a free
loopback port, the script run as a subprocess with a timeout, exit code 0 and
a PASS line required.  A failure shows the script's output and eftd's log.

    /usr/bin/python3 test/e2e/run.py 'test_clients*.py'
"""

import os
import unittest

from clientscript import (CLIENTS, HAVE_RUBY_STOMP, HAVE_STOMP_PY, PYTHON, RUBY,
                          ScriptTest, add_scenario_tests)

RUBY_SCRIPT = os.path.join(CLIENTS, "ruby_client.rb")
PY_SCRIPT = os.path.join(CLIENTS, "stomp_py_client.py")

RUBY_SCENARIOS = [
    "stomp10", "ack12_individual", "ack12_client", "ack10_client", "nack11",
    "transactions", "receipts", "cross_version", "client_ack", "client_topic",
    "heartbeats", "crlf12", "binary", "client10", "client_queue_share",
    "bulk", "wildcards",
]
PY_SCENARIOS = [
    "basic_10", "ack_client_10", "tx_10", "receipts_10",
    "basic_11", "ack_client_11", "ack_individual_11", "nack_11", "tx_11", "receipts_11",
    "basic_12", "ack_client_12", "ack_individual_12", "nack_12", "tx_12", "receipts_12",
    "heartbeats_12", "topic_fanout", "bulk_12", "wildcards_12",
    "exclusive_12", "queue_wildcards_12", "scheduled_12", "topic_prefetch_12",
]


@unittest.skipUnless(HAVE_RUBY_STOMP, "ruby with the stomp gem (ruby-stomp) not available")
class RubyStompGemTest(ScriptTest):
    command = [RUBY, RUBY_SCRIPT]
    summary = "ruby"


@unittest.skipUnless(HAVE_STOMP_PY, "python3 with stomp.py (python3-stomp) not available")
class StompPyTest(ScriptTest):
    command = [PYTHON, PY_SCRIPT]
    summary = "stomp.py"



add_scenario_tests(RubyStompGemTest, RUBY_SCENARIOS)
add_scenario_tests(StompPyTest, PY_SCENARIOS)
