"""eft-passwd: without -f it prints NAME:HASH; with -f FILE it keeps the users
file itself, mode 0600: creates it, appends a new user, tightens a file
others can read, and changes a known user's hash in place, keeping the rest
of that line and every other line.  A real eftd then accepts the new
password and refuses the old one."""

import os
import stat
import subprocess
import tempfile
import unittest

import harness

EFT_PASSWD = os.path.join(harness.ROOT, harness.BUILD, "eft-passwd")


def passwd(*args, password="secret", umask=0o022):
    """Run eft-passwd with the password piped in; (exit status, stdout, stderr)."""
    p = subprocess.run([EFT_PASSWD] + list(args), input=(password + "\n").encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30 * harness.SLOW,
                       preexec_fn=lambda: os.umask(umask))
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def login(port, name, password):
    """The command of eftd's answer to a CONNECT with these credentials."""
    c = harness.RawClient(port)
    try:
        c.send_frame("CONNECT", {"accept-version": "1.2", "host": "/", "login": name,
                                 "passcode": password})
        return c.read_frame().command
    finally:
        c.close()


class EftPasswdFile(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="eft-passwd-")
        self.users = os.path.join(self.dir.name, "users")

    def tearDown(self):
        self.dir.cleanup()

    def read(self):
        with open(self.users) as f:
            return f.read()

    def run_ok(self, *args, **kw):
        rc, out, err = passwd(*args, **kw)
        self.assertEqual(rc, 0, "eft-passwd %s: exit %d\n%s%s" % (" ".join(args), rc, out, err))
        self.assertEqual(out, "", "with -f nothing goes to stdout")
        return err

    def test_new_file_is_mode_0600(self):
        err = self.run_ok("-f", self.users, "alice")
        self.assertEqual(mode(self.users), 0o600)
        lines = self.read().splitlines()
        self.assertEqual(len(lines), 1)
        self.assertTrue(lines[0].startswith("alice:$argon2id$"), lines[0])
        self.assertIn("added alice to " + self.users, err)
        self.assertEqual(len(err.splitlines()), 1, err)

    def test_second_user_is_appended(self):
        self.run_ok("--file", self.users, "alice")
        first = self.read()
        err = self.run_ok("--file", self.users, "bob", password="builder")
        text = self.read()
        self.assertTrue(text.startswith(first), text)
        self.assertRegex(text[len(first):], r"^bob:\$argon2id\$[^:\n]+\n$")
        self.assertEqual(mode(self.users), 0o600)
        self.assertEqual(err.strip(), "eft-passwd: added bob to " + self.users)

    def test_file_readable_by_others_is_tightened(self):
        with open(self.users, "w") as f:
            f.write("# users\nalice:$argon2id$v=19$m=16384,t=2,p=1$x$y")    # no final newline
        os.chmod(self.users, 0o644)
        err = self.run_ok("-f", self.users, "bob")
        self.assertEqual(mode(self.users), 0o600)
        lines = err.splitlines()
        self.assertEqual(len(lines), 2, err)
        self.assertIn("0644", lines[0])
        self.assertIn("now 0600", lines[0])
        self.assertIn(self.users, lines[0])
        self.assertEqual(lines[1], "eft-passwd: added bob to " + self.users)
        text = self.read().split("\n")
        self.assertEqual(text[:2], ["# users", "alice:$argon2id$v=19$m=16384,t=2,p=1$x$y"])
        self.assertTrue(text[2].startswith("bob:$argon2id$"), text)
        self.assertEqual(text[3:], [""])

    def test_update_keeps_fields_and_other_lines(self):
        def hash_of(name, password):
            rc, out, err = passwd(name, password=password)
            self.assertEqual(rc, 0, err)
            return out.strip().split(":", 1)[1]
        old_alice, bob = hash_of("alice", "old-secret"), hash_of("bob", "builder")
        before = ["# alice may read queues and topics, and write to queues",
                  "alice:%s:read=/queue/,/topic/:write=/queue/" % old_alice,
                  "",
                  "  # alice:not-this-one",
                  "bob:%s:read=/topic/:write=" % bob]
        with open(self.users, "w") as f:
            f.write("\n".join(before) + "\n")
        os.chmod(self.users, 0o600)
        err = self.run_ok("-f", self.users, "alice", password="new-secret")
        self.assertEqual(err.strip(), "eft-passwd: updated alice in " + self.users)
        self.assertEqual(mode(self.users), 0o600)
        self.assertEqual(os.listdir(self.dir.name), ["users"], "a temporary file was left")
        after = self.read().split("\n")
        self.assertEqual(len(after), len(before) + 1)
        self.assertEqual(after[-1], "")
        for i in (0, 2, 3, 4):
            self.assertEqual(after[i], before[i], "line %d" % (i + 1))
        name, new_alice, fields = after[1].split(":", 2)
        self.assertEqual(name, "alice")
        self.assertTrue(new_alice.startswith("$argon2id$"), new_alice)
        self.assertNotEqual(new_alice, old_alice)
        self.assertEqual(fields, "read=/queue/,/topic/:write=/queue/")

        config = "users-file = %s\nallow-anonymous = no\nauth-delay-ms = 0\n" % self.users
        with harness.Broker(config=config) as broker:
            self.assertEqual(login(broker.port, "alice", "new-secret"), "CONNECTED")
            self.assertEqual(login(broker.port, "alice", "old-secret"), "ERROR")
            self.assertEqual(login(broker.port, "bob", "builder"), "CONNECTED")

    def test_user_twice_is_an_error(self):
        text = "alice:$argon2id$a\nalice:$argon2id$b\n"
        with open(self.users, "w") as f:
            f.write(text)
        rc, out, err = passwd("-f", self.users, "alice")
        self.assertEqual(rc, 1, err)
        self.assertEqual(out, "")
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertEqual(self.read(), text)

    def test_folder_missing_is_an_error(self):
        rc, out, err = passwd("-f", os.path.join(self.dir.name, "no", "users"), "alice")
        self.assertEqual(rc, 1, err)
        self.assertEqual(out, "")
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertIn("No such file or directory", err)


class EftPasswdStdout(unittest.TestCase):
    def test_without_file_the_line_goes_to_stdout(self):
        rc, out, err = passwd("alice")
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"^alice:\$argon2id\$[^:\n]+\n$")
        self.assertEqual(err, "")

    def test_usage_errors_exit_2(self):
        for args in ([], ["a", "b"], ["-f"], ["--bogus", "alice"]):
            rc, out, err = passwd(*args)
            self.assertEqual(rc, 2, args)
            self.assertIn("usage: eft-passwd [-a] [-f FILE] NAME", err)


if __name__ == "__main__":
    unittest.main()
