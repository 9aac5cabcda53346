"""The test runners themselves (test/run, test/e2e/run.py): skips are
counted in the final line and named; under REQUIRE_ALL=1 a skip that
test/allowed-skips does not declare is a failure, for cmocka's tests and
the end-to-end ones alike; a unit test binary that hangs is stopped and
named; and every line of test/allowed-skips declares a skip that a real test
can make.  Fake cmocka binaries (shell scripts printing what cmocka prints)
and a fake test file stand in for real tests."""

import fnmatch
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import time
import unittest

import allowed_skips
import harness

ROOT = harness.ROOT
RUN = os.path.join(ROOT, "test", "run")
RUN_PY = os.path.join(ROOT, "test", "e2e", "run.py")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else "python3"


def cmocka_output(passed, skipped):
    """What a cmocka 1.1 binary prints when tests `passed` pass and tests
    `skipped` call skip()."""
    lines = ["[==========] Running %d test(s)." % (len(passed) + len(skipped))]
    for t in passed:
        lines += ["[ RUN      ] " + t, "[       OK ] " + t]
    for t in skipped:
        lines += ["[ RUN      ] " + t, "[  SKIPPED ] " + t]
    lines += ["[==========] %d test(s) run." % (len(passed) + len(skipped)),
              "[  PASSED  ] %d test(s)." % len(passed)]
    if skipped:
        lines.append("[  SKIPPED ] %d test(s), listed below:" % len(skipped))
        lines += ["[  SKIPPED ] " + t for t in skipped]
        lines += ["", " %d SKIPPED TEST(S)" % len(skipped)]
    return "\n".join(lines) + "\n"


def last_line(out):
    return out.strip().splitlines()[-1]


@unittest.skipIf(harness.TRANSPORT == "tls", "about the test runners, not the transport")
class UnitRunTest(unittest.TestCase):
    """test/run unit against a build directory of fake test binaries."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="eft-run-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def build(self, name, binaries):
        """A build directory `name` whose test/ holds each binary: name ->
        shell script body."""
        build = os.path.join(self.dir, name)
        os.makedirs(os.path.join(build, "test"))
        for binary, body in binaries.items():
            path = os.path.join(build, "test", binary)
            with open(path, "w") as f:
                f.write("#!/bin/sh\n" + body)
            os.chmod(path, 0o755)
        return build

    def run_unit(self, build, require_all, **env):
        e = dict(os.environ, BUILD=build, REQUIRE_ALL="1" if require_all else "0", **env)
        e.pop("EFTD_WRAPPER", None)
        p = subprocess.run([RUN, "unit"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, env=e, timeout=60, text=True)
        return p.returncode, p.stdout

    def fake_with_a_skip(self, build_name="build", binary="test_fake", skipped="test_c"):
        out = cmocka_output(["test_a", "test_b"], [skipped])
        return self.build(build_name, {binary: "cat <<'EOF'\n%sEOF\n" % out})

    def test_a_skip_is_counted_and_named(self):
        rc, out = self.run_unit(self.fake_with_a_skip(), require_all=False)
        self.assertEqual(last_line(out), "2 passed, 0 failed, 1 skipped", out)
        self.assertIn("skipped, not declared in test/allowed-skips: test_fake.test_c", out)
        self.assertEqual(rc, 0, out)

    def test_require_all_fails_a_skip_not_declared(self):
        rc, out = self.run_unit(self.fake_with_a_skip(), require_all=True)
        self.assertEqual(last_line(out), "2 passed, 1 failed, 0 skipped", out)
        self.assertIn("FAIL (REQUIRE_ALL=1): test_fake.test_c: skipped, and test/allowed-skips "
                      "does not declare it", out)
        self.assertEqual(rc, 1, out)

    def test_require_all_lets_a_declared_skip_pass(self):
        """test/allowed-skips declares test_trim's ASan skip, in an ASan build only."""
        name = "test_gives_back_memory_below_a_live_allocation"
        asan = self.fake_with_a_skip("build-asan", "test_trim", name)
        rc, out = self.run_unit(asan, require_all=True)
        self.assertEqual(last_line(out), "2 passed, 0 failed, 1 skipped", out)
        self.assertEqual(rc, 0, out)
        plain = self.fake_with_a_skip("build", "test_trim", name)
        rc, out = self.run_unit(plain, require_all=True)
        self.assertEqual(last_line(out), "2 passed, 1 failed, 0 skipped", out)
        self.assertIn("FAIL (REQUIRE_ALL=1): test_trim." + name, out)

    def test_a_hung_binary_is_stopped_named_and_failed(self):
        ok = cmocka_output(["test_a"], [])
        build = self.build("build", {"test_hang": "exec sleep 60\n",
                                     "test_ok": "cat <<'EOF'\n%sEOF\n" % ok})
        t0 = time.time()
        rc, out = self.run_unit(build, require_all=False, UNIT_TIMEOUT="1")
        self.assertLess(time.time() - t0, 30, "the timeout did not stop the run's wait")
        self.assertIn("unit: FAIL: %s/test/test_hang did not finish within 1s (timeout killed it)"
                      % build, out)
        self.assertEqual(last_line(out), "1 passed, 1 failed, 0 skipped", out)
        self.assertEqual(rc, 1, out)


FAKE_TESTS = '''
import unittest


class Fake(unittest.TestCase):
    def test_runs(self):
        pass

    @unittest.skip(%r)
    def test_skipped(self):
        pass
'''


@unittest.skipIf(harness.TRANSPORT == "tls", "about the test runners, not the transport")
class E2eRunTest(unittest.TestCase):
    """test/e2e/run.py on a directory holding one fake test file."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="eft-run-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    def run_py(self, module, reason, require_all, transport="tcp"):
        with open(os.path.join(self.dir, module + ".py"), "w") as f:
            f.write(FAKE_TESTS % reason)
        e = dict(os.environ, EFT_TRANSPORT=transport, BUILD="build",
                 REQUIRE_ALL="1" if require_all else "0")
        e.pop("EFTD_WRAPPER", None)
        p = subprocess.run([PY, RUN_PY, module + ".py", self.dir], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=e,
                           timeout=60, text=True)
        return p.returncode, p.stdout

    def test_a_skip_is_counted_and_named(self):
        rc, out = self.run_py("test_fake", "a made-up reason", require_all=False)
        self.assertEqual(last_line(out), "e2e: 1 passed, 0 failed, 1 skipped", out)
        self.assertIn("skipped, not declared in test/allowed-skips: "
                      "test_fake.Fake.test_skipped: a made-up reason", out)
        self.assertEqual(rc, 0, out)

    def test_require_all_fails_a_skip_not_declared(self):
        rc, out = self.run_py("test_fake", "a made-up reason", require_all=True)
        self.assertEqual(last_line(out), "e2e: 1 passed, 1 failed, 0 skipped", out)
        self.assertIn("FAIL (REQUIRE_ALL=1): test_fake.Fake.test_skipped: skipped "
                      "(a made-up reason), and test/allowed-skips does not declare it", out)
        self.assertEqual(rc, 1, out)

    def test_a_declared_skip_needs_its_pass_and_its_reason(self):
        """test/allowed-skips declares test_ws.* skipping over TLS because it
        manages its own listeners: allowed there; over TCP, or for any other
        reason (a library missing, say), not."""
        why = "manages its own listeners: runs in the tcp pass"
        rc, out = self.run_py("test_ws", why, require_all=True, transport="tls")
        self.assertEqual(last_line(out), "e2e: 1 passed, 0 failed, 1 skipped", out)
        self.assertRegex(out, r"1  test/allowed-skips:\d+: tls test_ws\.\* " + re.escape(why))
        self.assertEqual(rc, 0, out)
        rc, out = self.run_py("test_ws", why, require_all=True, transport="tcp")
        self.assertEqual(last_line(out), "e2e: 1 passed, 1 failed, 0 skipped", out)
        rc, out = self.run_py("test_ws", "python3-websocket not installed", require_all=True,
                              transport="tls")
        self.assertEqual(last_line(out), "e2e: 1 passed, 1 failed, 0 skipped", out)


def all_tests(suite):
    todo = [suite]
    while todo:
        for t in todo.pop():
            if isinstance(t, unittest.TestSuite):
                todo.append(t)
            else:
                yield t


def e2e_tests():
    return list(all_tests(unittest.defaultTestLoader.discover(
        os.path.dirname(os.path.abspath(__file__)), pattern="test_*.py")))


def print_decorated_skips():
    """Print 'id<TAB>reason' for each test its decorators skip in this
    process's run (EFT_TRANSPORT)."""
    for t in e2e_tests():
        for o in (t.__class__, getattr(t, t._testMethodName)):
            if getattr(o, "__unittest_skip__", False):
                print("%s\t%s" % (t.id(), o.__unittest_skip_why__))
                break


def decorated_skips(transport):
    """[(id, reason)] of the tests skipped by their decorators over transport."""
    p = subprocess.run([PY, "-c", "import test_run; test_run.print_decorated_skips()"],
                       cwd=os.path.dirname(os.path.abspath(__file__)), capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, EFT_TRANSPORT=transport))
    assert p.returncode == 0, p.stderr
    return [tuple(line.split("\t", 1)) for line in p.stdout.splitlines()]


def unit_test_ids():
    """binary.test for every cmocka test function of test/unit/test_*.c."""
    ids = []
    unit = os.path.join(ROOT, "test", "unit")
    for name in sorted(os.listdir(unit)):
        if name.startswith("test_") and name.endswith(".c"):
            with open(os.path.join(unit, name)) as f:
                src = f.read()
            ids += ["%s.%s" % (name[:-2], t)
                    for t in re.findall(r"^(test_\w+)\(void \*\*state\)", src, re.M)]
    return ids


class AllowedSkipsTest(unittest.TestCase):
    def test_every_line_declares_a_skip_a_real_test_makes(self):
        """Each line's pass is TLS, ASan or valgrind (the TCP pass of a
        normal build runs everything), and a real test makes the skip it
        declares, so that a line cannot outlive its skip unnoticed: over
        TLS, a test that its decorators skip with that reason; for ASan and
        valgrind (skips made as the test runs), a test the pattern names
        whose source gives the reason (up to its first wildcard)."""
        entries = allowed_skips.load()
        self.assertLess(len(entries), 40, "the list is meant to be short")
        tls = decorated_skips("tls")
        self.assertGreater(len(tls), 100)
        ids = [t.id() for t in e2e_tests()] + unit_test_ids()
        for e in entries:
            self.assertIn(e.pass_tag, ("tls", "asan", "valgrind"), str(e))
            if e.pass_tag == "tls":
                self.assertTrue(any(e.allows({"tls"}, i, why) for i, why in tls),
                                "%s: no test skips so over TLS" % e)
                continue
            self.assertTrue([i for i in ids if fnmatch.fnmatchcase(i, e.test)],
                            "%s: no such test" % e)
            module = e.test.split(".")[0]
            src = os.path.join(ROOT, "test", "e2e", module + ".py")
            if not os.path.exists(src):
                src = os.path.join(ROOT, "test", "unit", module + ".c")
            with open(src) as f:
                text = f.read()
            fixed = re.split(r"[*?\[]", e.reason)[0].rstrip()
            self.assertGreater(len(fixed), 10, str(e))
            self.assertTrue(fixed in text, "%s: %s does not give the reason" % (e, src))


if __name__ == "__main__":
    unittest.main()
