"""Run the end-to-end tests (test/e2e/test_*.py, or the files of the pattern
given; a second argument: the directory to find them in) and print 'e2e: N passed, N failed, N skipped'.  Before it, every
skip: those test/allowed-skips declares counted per line that declares
them, any other named with its reason; under REQUIRE_ALL=1 such a skip is a
failure (allowed_skips.py)."""

import collections
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import allowed_skips  # noqa: E402


def judge_skips(skipped):
    """Print every skip; the number that fail the run (not declared, under
    REQUIRE_ALL=1)."""
    entries, tags = allowed_skips.load(), allowed_skips.passes()
    by_entry = collections.Counter()
    undeclared = []
    for test, message in skipped:
        e = allowed_skips.declared(entries, tags, test.id(), message)
        if e is None:
            undeclared.append((test.id(), message))
        else:
            by_entry[e] += 1
    if by_entry:
        print("skipped, as declared (pass %s):" % "+".join(sorted(tags)))
        for e in sorted(by_entry, key=lambda e: e.line_no):
            print("  %4d  %s" % (by_entry[e], e))
    strict = allowed_skips.require_all()
    for test_id, message in undeclared:
        if strict:
            print("FAIL (REQUIRE_ALL=1): %s: skipped (%s), and %s does not declare it"
                  % (test_id, message, allowed_skips.NAME))
        else:
            print("skipped, not declared in %s: %s: %s" % (allowed_skips.NAME, test_id, message))
    return len(undeclared) if strict else 0


def main():
    pattern = sys.argv[1] if len(sys.argv) > 1 else "test_*.py"
    where = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else HERE
    suite = unittest.defaultTestLoader.discover(where, pattern=pattern, top_level_dir=where)
    result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    passed = result.testsRun - failed - len(result.skipped)
    skip_failures = judge_skips(result.skipped)
    failed += skip_failures
    skipped = len(result.skipped) - skip_failures
    print("e2e: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 0 if failed == 0 and result.testsRun > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
