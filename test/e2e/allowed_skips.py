"""The skips a test run may show: test/allowed-skips, a short declared list,
each with its reason.  A skip not on it is shown as not declared; under
REQUIRE_ALL=1 (CI) it is a failure, so that a client library that stopped
importing, a tool that is missing or a test that quietly stopped running
fails the run instead of being counted as a skip.

Used by test/e2e/run.py for the end-to-end tests and by test/run, through
the command line, for the cmocka tests:
    allowed_skips.py TEST [MESSAGE]
prints the line that declares the skip and exits 0, or exits 1."""

import fnmatch
import os
import sys

LIST = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                                     "allowed-skips"))
NAME = "test/allowed-skips"


def require_all(env=os.environ):
    return env.get("REQUIRE_ALL", "") == "1"


def passes(env=os.environ):
    """The tags of this run that a line's PASS may name: its transport (tcp
    or tls), asan for an ASan build, and the program eftd runs under
    (valgrind)."""
    tags = {env.get("EFT_TRANSPORT", "tcp")}
    if "asan" in env.get("BUILD", "build"):
        tags.add("asan")
    wrapper = env.get("EFTD_WRAPPER", "").split()
    if wrapper:
        tags.add(os.path.basename(wrapper[0]))
    return tags


class Entry:
    def __init__(self, line_no, pass_tag, test, reason):
        self.line_no, self.pass_tag, self.test, self.reason = line_no, pass_tag, test, reason

    def __str__(self):
        return "%s:%d: %s %s %s" % (NAME, self.line_no, self.pass_tag, self.test, self.reason)

    def allows(self, tags, test_id, message):
        """message None: the test gives none (cmocka's skip())."""
        return (self.pass_tag in tags and fnmatch.fnmatchcase(test_id, self.test)
                and (message is None or fnmatch.fnmatchcase(message, self.reason)))


def load(path=LIST):
    """The entries of the list: 'PASS TEST REASON' lines, # comments."""
    entries = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 3:
                raise ValueError("%s:%d: not 'PASS TEST REASON': %r" % (NAME, n, line))
            entries.append(Entry(n, *parts))
    return entries


def declared(entries, tags, test_id, message):
    """The entry that allows this skip, or None."""
    for e in entries:
        if e.allows(tags, test_id, message):
            return e
    return None


def main(argv):
    if len(argv) not in (2, 3):
        print("usage: allowed_skips.py TEST [MESSAGE]", file=sys.stderr)
        return 2
    e = declared(load(), passes(), argv[1], argv[2] if len(argv) == 3 else None)
    if e is None:
        return 1
    print(e)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
