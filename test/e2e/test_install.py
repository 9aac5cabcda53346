"""make install and make uninstall: into DESTDIR, with PREFIX=/usr and with
the default /usr/local, the exact set of files with their modes; the unit
names the installed eftd and config, and that command line starts eftd; an
edited config survives a second install; systemd-analyze verify accepts
the installed unit and systemd-sysusers makes its user.

make runs with the run's BUILD: `install` depends on `all`, which does
nothing when that build is current (it is: the tests run after it)."""

import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import unittest

import harness
from harness import ROOT, SLOW, open_socket

TCP_ONLY = unittest.skipIf(harness.TRANSPORT == "tls", "about installing, not the transport")
ANALYZE = shutil.which("systemd-analyze")

# What make install installs, as the Makefile's PROGRAMS decides it.
PROGRAMS = ["eftd", "eft-passwd"]
if glob.glob(os.path.join(ROOT, "tools", "eft-bench", "*.c")):
    PROGRAMS.append("eft-bench")
if glob.glob(os.path.join(ROOT, "tools", "eftctl*")):
    PROGRAMS.append("eftctl")


def layout(prefix):
    """{path below DESTDIR: mode} that make install PREFIX=prefix writes."""
    etc = "/etc" if prefix == "/usr" else prefix + "/etc"
    files = {"%s/bin/%s" % (prefix, p): 0o755 for p in PROGRAMS}
    files.update({
        etc + "/eft/eftd.conf": 0o644,
        etc + "/eft/users.example": 0o644,
        prefix + "/lib/systemd/system/eftd.service": 0o644,
        prefix + "/lib/sysusers.d/eft.conf": 0o644,
    })
    return {p.lstrip("/"): m for p, m in files.items()}


def tree(root):
    """{path below root: mode} of every file (and symlink) under root."""
    found = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            found[os.path.relpath(p, root)] = os.lstat(p).st_mode & 0o7777
    return found


def read(path):
    with open(path) as f:
        return f.read()


def make(*args, check=True):
    """make -C ROOT args, with the run's BUILD and none of the caller's
    install variables or make's own (a jobserver of an outer make)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PREFIX", "DESTDIR", "BINDIR", "SYSCONFDIR", "UNITDIR",
                        "SYSUSERSDIR", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    r = subprocess.run(["make", "--no-print-directory", "-C", ROOT, "BUILD=" + harness.BUILD]
                       + list(args), capture_output=True, text=True, env=env, timeout=300,
                       stdin=subprocess.DEVNULL)
    if not check:
        return r
    if r.returncode != 0:
        raise AssertionError("make %s: exit %d\n%s%s" % (" ".join(args), r.returncode,
                                                         r.stdout, r.stderr))
    return r.stdout + r.stderr


@TCP_ONLY
class InstallTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        # make install would build what is out of date, into the BUILD the
        # other tests use (and with plain flags, in build-asan): refuse.
        progs = ["%s/%s" % (harness.BUILD, p) for p in PROGRAMS]
        cls.stale = make("-q", "all", *progs, check=False).returncode != 0

    def setUp(self):
        if self.stale:
            self.fail("%s is not current (make -q all fails): make install would rebuild it "
                      "under the other tests; build it first" % harness.BUILD)

    def destdir(self):
        d = tempfile.mkdtemp(prefix="eft-install-")
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def install(self, prefix=None):
        """A fresh DESTDIR with make install in it (PREFIX as given, or the
        Makefile's default); returns (DESTDIR, the expected layout)."""
        d = self.destdir()
        make("install", "DESTDIR=" + d, *(["PREFIX=" + prefix] if prefix else []))
        return d, layout(prefix or "/usr/local")

    def exec_start(self, d, prefix):
        """The installed unit's ExecStart= line, split into words."""
        unit = read(os.path.join(d, prefix.lstrip("/"), "lib/systemd/system/eftd.service"))
        self.assertNotRegex(unit, r"@[A-Z]+@", "a placeholder left in the installed unit")
        lines = re.findall(r"(?m)^ExecStart=(.*)$", unit)
        self.assertEqual(len(lines), 1, unit)
        return shlex.split(lines[0])

    def test_layout_usr(self):
        d, want = self.install("/usr")
        self.assertEqual(tree(d), want)
        self.assertEqual(self.exec_start(d, "/usr"),
                         ["/usr/bin/eftd", "-c", "/etc/eft/eftd.conf", "--data-dir", "%S/eft"])
        self.assertEqual(read(os.path.join(d, "etc/eft/eftd.conf")),
                         read(os.path.join(ROOT, "etc/eftd.conf")))
        self.assertEqual(read(os.path.join(d, "usr/lib/sysusers.d/eft.conf")),
                         read(os.path.join(ROOT, "etc/eft.sysusers")))
        r = subprocess.run([os.path.join(d, "usr/bin/eftd"), "--version"], capture_output=True,
                           text=True, timeout=10 * SLOW, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\d+\.\d+")

    def test_layout_default_prefix(self):
        d, want = self.install()
        self.assertEqual(tree(d), want)
        self.assertEqual(self.exec_start(d, "/usr/local"),
                         ["/usr/local/bin/eftd", "-c", "/usr/local/etc/eft/eftd.conf",
                          "--data-dir", "%S/eft"])

    def test_unit_command_starts_eftd(self):
        """The unit's ExecStart, its paths taken into DESTDIR and %S to a
        temporary folder, plus a free port, starts eftd with the installed
        config and its journal; SIGTERM stops it cleanly."""
        d, _ = self.install("/usr")
        state = self.destdir()
        os.mkdir(os.path.join(state, "eft"), 0o750)  # as StateDirectory=eft does
        argv = [os.path.join(d, w.lstrip("/")) if w.startswith("/") else w.replace("%S", state)
                for w in self.exec_start(d, "/usr")]
        port = harness.free_port()
        proc = subprocess.Popen(argv + ["-b", "127.0.0.1", "-p", str(port)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True)
        try:
            def listening():
                if proc.poll() is not None:
                    raise AssertionError("the installed eftd exited early:\n" +
                                         proc.communicate()[0])
                try:
                    open_socket(port, timeout=1, tls=False).close()
                    return True
                except OSError:
                    return False
            harness.wait_for(listening, 10, "the installed eftd to listen")
            self.assertTrue(glob.glob(os.path.join(state, "eft", "journal-*")),
                            "no journal in the data dir: %r" % os.listdir(os.path.join(state, "eft")))
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=10 * SLOW)
            harness.check_exit(proc.returncode, out)  # exit 0, no sanitizer report
            self.assertIn("stopped", out)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    def test_second_install_keeps_an_edited_config(self):
        d, want = self.install("/usr")
        conf = os.path.join(d, "etc/eft/eftd.conf")
        shipped = read(os.path.join(ROOT, "etc/eftd.conf"))
        # Unchanged: installed again as it is, nothing beside it.
        make("install", "DESTDIR=" + d, "PREFIX=/usr")
        self.assertEqual(tree(d), want)
        with open(conf, "a") as f:
            f.write("log-level = debug\n")
        out = make("install", "DESTDIR=" + d, "PREFIX=/usr")
        self.assertIn("kept the edited /etc/eft/eftd.conf", out)
        self.assertEqual(read(conf), shipped + "log-level = debug\n")
        self.assertEqual(read(conf + ".new"), shipped)
        self.assertEqual(tree(d), dict(want, **{"etc/eft/eftd.conf.new": 0o644}))

        # make uninstall takes all but the edited config.
        out = make("uninstall", "DESTDIR=" + d, "PREFIX=/usr")
        self.assertIn("kept the edited /etc/eft/eftd.conf", out)
        self.assertEqual(tree(d), {"etc/eft/eftd.conf": 0o644})

    def test_uninstall_removes_everything(self):
        d, _ = self.install()
        make("uninstall", "DESTDIR=" + d)
        self.assertEqual(tree(d), {})
        self.assertFalse(os.path.exists(os.path.join(d, "usr/local/etc/eft")))

    def analysis_root(self, prefix):
        """make install PREFIX=prefix into a fresh folder, plus what
        systemd-analyze --root looks for beyond the unit: a stand-in
        /bin/kill (ExecReload; only its being executable is checked) and this
        machine's *.target units (sysinit.target and the rest the unit is
        ordered against)."""
        root, _ = self.install(prefix)
        os.makedirs(os.path.join(root, "bin"), exist_ok=True)
        with open(os.path.join(root, "bin/kill"), "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(os.path.join(root, "bin/kill"), 0o755)
        host = next(p for p in ("/usr/lib/systemd/system", "/lib/systemd/system")
                    if os.path.isdir(p))
        units = os.path.join(root, "usr/lib/systemd/system")
        os.makedirs(units, exist_ok=True)
        for t in glob.glob(os.path.join(host, "*.target")):
            shutil.copy(t, units)
        return root

    @unittest.skipIf(ANALYZE is None, "systemd-analyze is not installed (Debian package systemd)")
    def test_systemd_analyze_verify(self):
        """systemd-analyze verify --root=DIR reads the unit in DIR and looks
        for ExecStart's eftd there: the installed unit is verified as it is,
        not with its paths rewritten."""
        for prefix in ("/usr", "/usr/local"):
            with self.subTest(prefix=prefix):
                root = self.analysis_root(prefix)
                unit = prefix + "/lib/systemd/system/eftd.service"

                def analyze(*args):
                    return subprocess.run([ANALYZE] + list(args), capture_output=True, text=True,
                                          timeout=60, stdin=subprocess.DEVNULL, cwd="/")

                r = analyze("verify", "--root=" + root, unit)
                # Unknown keys and bad values are only warnings: no output at all.
                self.assertEqual((r.returncode, r.stdout + r.stderr), (0, ""))

                # The hardening, scored as systemd sees it: below 2.0 (threshold 0-100).
                r = analyze("security", "--offline=true", "--root=" + root,
                            "--threshold=19", unit)
                self.assertEqual(r.returncode, 0, r.stdout[-600:] + r.stderr)
                self.assertRegex(r.stdout, r"Overall exposure level for eftd.service: [01]\.\d")

                # verify really looks for eftd in the root: without it, it fails.
                os.rename(os.path.join(root, prefix.lstrip("/"), "bin/eftd"),
                          os.path.join(root, "eftd.moved"))
                r = analyze("verify", "--root=" + root, unit)
                self.assertNotEqual(r.returncode, 0, r.stderr)
                self.assertIn("%s/bin/eftd is not executable" % prefix, r.stderr)

    @unittest.skipIf(shutil.which("systemd-sysusers") is None,
                     "systemd-sysusers is not installed (Debian package systemd)")
    def test_sysusers_makes_the_user(self):
        """systemd-sysusers finds the installed sysusers.d file (also under
        /usr/local) and makes the user and group eft the unit runs as."""
        for prefix in ("/usr", "/usr/local"):
            with self.subTest(prefix=prefix):
                root, _ = self.install(prefix)
                os.makedirs(os.path.join(root, "etc"), exist_ok=True)
                r = subprocess.run(["systemd-sysusers", "--root=" + root], capture_output=True,
                                   text=True, timeout=60, stdin=subprocess.DEVNULL)
                self.assertEqual(r.returncode, 0, r.stderr)
                passwd = read(os.path.join(root, "etc/passwd"))
                self.assertRegex(passwd, r"(?m)^eft:x:\d+:\d+:eft STOMP broker:/var/lib/eft:")
                self.assertRegex(read(os.path.join(root, "etc/group")), r"(?m)^eft:x:\d+:")


if __name__ == "__main__":
    unittest.main()
