"""A million messages that expire together in a queue nobody reads: their
memory comes back, every one is counted expired, and other clients are
served meanwhile.  Runs tools/expiry-bench (which measures) and checks what
it measured.  Once, over TCP: the transport has nothing to do with it."""

import importlib.machinery
import importlib.util
import os
import unittest

import harness

TCP_ONLY = unittest.skipIf(harness.TRANSPORT == "tls",
                           "run once, over TCP: expiry does not depend on the transport")


def load_tool():
    path = os.path.join(harness.ROOT, "tools", "expiry-bench")
    loader = importlib.machinery.SourceFileLoader("expiry_bench", path)
    spec = importlib.util.spec_from_loader("expiry_bench", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


@TCP_ONLY
class MillionExpireTest(unittest.TestCase):
    N = 1000000
    SIZE = 64

    def test_memory_comes_back_after_a_million_expire(self):
        tool = load_tool()
        res = tool.run(harness.EFTD, self.N, self.SIZE, 2.0 * harness.SLOW)
        self.assertEqual(res["depth_queued"], self.N, res)
        # Measured, not assumed: the messages did hold memory...
        self.assertGreater(res["memory_queued"] - res["memory_before"], self.N * self.SIZE, res)
        # ... every one expired and was counted ...
        self.assertEqual(res["expired_counted"], self.N, res)
        # ... and their memory is back (to within 64 KiB), soon after the expiry
        # time.  The issue asks for a second; BENCHMARKS.md has the figure; this
        # bound only catches "never" or "much later" on a loaded machine.
        self.assertIsNotNone(res["freed_after_s"], res)
        self.assertLess(res["freed_after_s"], 5.0 * harness.SLOW, res)
        self.assertLessEqual(res["memory_after"], res["memory_before"] + 64 * 1024, res)
        # Other clients got answers while it happened.
        self.assertGreater(res["rtt_samples"][1], 0, res)
        # and eftd stopped cleanly (its output went to ours)
        harness.check_exit(res["eftd_exit"], "")


if __name__ == "__main__":
    unittest.main()
