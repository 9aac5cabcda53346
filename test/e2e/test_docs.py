"""The documents a new user follows agree with the code: the README's package
list and CI install what tools/install-deps does, every setting is documented
in etc/eftd.conf and the README, and the links the README gives exist.  The
README's flag and settings tables, eftctl's synopsis, etc/eftd.conf's list of
overriding flags and docs/admin-api.md's version are checked against what the
binaries say (eftd -h, eftctl -h) and the code (config.c, version.h), so that
they cannot drift apart again."""

import os
import re
import subprocess
import unittest

import harness

ROOT = harness.ROOT
EFTCTL = os.path.join(ROOT, harness.BUILD, "eftctl")


def read(*path):
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


def install_deps_packages():
    """{kind: [packages]} from tools/install-deps: the first pkgs= line, and
    for each kind every pkgs="$pkgs ..." inside its if block (those added
    only when a command is missing, too)."""
    text = read("tools", "install-deps")
    base = re.search(r'^pkgs="([^"$]*)"', text, re.M).group(1).split()
    kinds = {"build": base}
    for kind, block in re.findall(r'^if \[ "\$\{1:-build\}" = (\w+) \]; then\n(.*?)^fi$', text,
                                  re.M | re.S):
        kinds[kind] = base + " ".join(re.findall(r'pkgs="\$pkgs ([^"]*)"', block)).split()
    return kinds


def ci_packages():
    """The packages .ci/run's apt-get install names (its lines joined)."""
    ci = read(".ci", "run").replace("\\\n", " ")
    m = re.search(r"apt-get install ([^\n>]*)", ci)
    assert m, ".ci/run has no apt-get install line"
    return [w for w in m.group(1).split() if not w.startswith("-")]


def setting_names():
    """Every key of eftd's config table (src/config.c)."""
    return sorted(set(re.findall(r'KEY\(CFG_[A-Z_]+, "([a-z-]+)"', read("src", "config.c"))))


def run_help(program):
    """What program -h prints (it exits 0)."""
    p = subprocess.run([program, "-h"], capture_output=True, text=True, timeout=10,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    return p.stdout


def help_options(text):
    """The options of a -h text, one set of names each, from its option
    lines ("  -L, --listen URL   ...", "      --recover   ...")."""
    options = []
    for line in text.splitlines():
        m = re.match(r"^\s+(-\w)?(?:, )?(--[\w-]+)?(?:\s|$)", line)
        if m and (m.group(1) or m.group(2)):
            options.append({f for f in m.groups() if f})
    return options


def help_flags(text):
    """Every name of every option of a -h text: {"-L", "--listen", ...}."""
    return set().union(*help_options(text))


def flags_in(text):
    """Every -x and --long-name in text (a table cell, a synopsis)."""
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))


def readme_section(title):
    """The README's section under '## title' or '### title', to the next heading."""
    readme = read("README.md")
    m = re.search(r"^#{2,3} %s\n(.*?)(?=^#{2,3} )" % re.escape(title), readme, re.M | re.S)
    assert m, "README has no section " + title
    return m.group(1)


def tables(section):
    """The tables of a section, in order: each a list of its rows (not the
    header), a row as (first cell, the other cells joined by " | ")."""
    found = []
    lines = section.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("|") or line.startswith("|---"):
            continue
        if i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            found.append([])   # a header row starts a table
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        found[-1].append((cells[0], " | ".join(cells[1:])))
    return found


class DocsTest(unittest.TestCase):
    def test_readme_names_every_package(self):
        kinds = install_deps_packages()
        self.assertIn("test", kinds)
        readme = read("README.md")
        para = readme[readme.index("Packages:"):]
        para = para[:para.index("\n\n")]
        for kind, pkgs in kinds.items():
            for p in pkgs:
                self.assertTrue("`%s`" % p in para,
                                "README's package list lacks %s (%s)" % (p, kind))

    def test_ci_installs_what_the_tests_need(self):
        test = install_deps_packages()["test"]
        # the kind's every line, those it adds only when a command is missing too
        for p in ("libcmocka-dev", "strace", "nats-server", "valgrind", "nodejs", "npm",
                  "systemd", "chromium"):
            self.assertIn(p, test, "tools/install-deps test as read here")
        # Node, npm, systemd and Chromium are asked of apt only where missing
        # (NodeSource's nodejs bundles npm; Debian's npm conflicts with it):
        # .ci/run has tools/install-deps test do that, before make test does.
        ci, ci_text = ci_packages(), read(".ci", "run")
        self.assertRegex(ci_text, r"(?m)^\s*tools/install-deps test\s*$")
        for p in test:
            if p not in ("nodejs", "npm", "systemd", "chromium"):
                self.assertIn(p, ci, ".ci/run does not install " + p)
        self.assertIn("make test", ci_text)

    def test_every_setting_is_documented(self):
        names = setting_names()
        self.assertGreater(len(names), 25)
        conf, readme = read("etc", "eftd.conf"), read("README.md")
        for n in names:
            self.assertTrue(re.search(r"(?m)^#? ?%s = " % re.escape(n), conf),
                            "etc/eftd.conf lacks " + n)
            self.assertTrue("`%s`" % n in readme, "README lacks " + n)

    def test_readme_flag_table_is_eftd_help(self):
        """Every flag of eftd -h is in the README's table and synopsis, every
        flag there is in eftd -h, and eftd accepts each (main.c's table)."""
        helped = help_flags(run_help(harness.EFTD))
        self.assertGreater(len(helped), 15)
        section = readme_section("Running eftd")
        table = set()
        for first, _ in tables(section)[0]:
            table |= flags_in(first)
        self.assertEqual(table, helped, "README's flag table vs eftd -h")
        self.assert_synopsis(section, "eftd", help_options(run_help(harness.EFTD)))
        main = read("src", "main.c")
        longs = set("--" + n for n in re.findall(r'\{ "([a-z-]+)", (?:required|no)_argument', main))
        shorts = set("-" + c for c in re.search(r'getopt_long\(argc, argv, "([^"]*)"', main)
                     .group(1).replace(":", ""))
        self.assertEqual(longs | shorts, helped, "eftd -h vs the options main.c accepts")

    def test_readme_names_every_listener_scheme(self):
        """-L and listen: each scheme eftd takes (config.c) is in eftd -h, in
        the README's -L and listen rows, and in etc/eftd.conf."""
        schemes = re.search(r"schemes\[\] = \{([^}]*)\}", read("src", "config.c")).group(1)
        schemes = re.findall(r'"(\w+)"', schemes)
        self.assertEqual(sorted(schemes), ["http", "tcp", "tls", "ws", "wss"])
        helped = run_help(harness.EFTD)
        flag_rows, setting_rows = tables(readme_section("Running eftd"))
        flag_row = [v for k, v in flag_rows if "--listen" in k][0]
        rows = dict(setting_rows)
        conf = read("etc", "eftd.conf")
        for sch in schemes:
            url = sch + "://"
            self.assertIn(url, helped, "eftd -h")
            self.assertIn(url, flag_row, "README's -L row")
            self.assertIn(url, rows["`listen`"], "README's listen row")
            self.assertIn(url, conf, "etc/eftd.conf")

    def test_readme_settings_table_is_every_setting(self):
        """The README's settings table has a row for every key of config.c,
        and no other; etc/eftd.conf shows each (set or commented out) and
        no other."""
        names = set(setting_names())
        table = set()
        for first, _ in tables(readme_section("Running eftd"))[1]:
            table |= set(re.findall(r"`([a-z][a-z-]*)`", first))
        self.assertEqual(table, names, "README's settings table vs src/config.c")
        conf = set(re.findall(r"(?m)^(?:# )?([a-z][a-z-]*) = ", read("etc", "eftd.conf")))
        self.assertEqual(conf, names, "etc/eftd.conf vs src/config.c")

    def assert_shows(self, text, options, what):
        """text shows every option (by one of its names) and no other flag."""
        shown = flags_in(text)
        for names in options:
            self.assertTrue(names & shown, "%s lacks %s" % (what, "/".join(sorted(names))))
        self.assertEqual(shown - set().union(*options), set(), "%s shows other flags" % what)

    def assert_synopsis(self, section, program, options):
        """The synopsis of a README section (the indented block that starts
        "    PROGRAM ") shows every option and no other flag."""
        m = re.search(r"(?m)^    %s .*\n(?:    .*\n)*" % program, section)
        self.assertIsNotNone(m, "README has no %s synopsis" % program)
        self.assert_shows(m.group(0), options, "README's %s synopsis" % program)
        return m.group(0)

    def test_eftd_conf_names_every_overriding_flag(self):
        """The header of etc/eftd.conf lists every flag that overrides a
        setting: all of eftd -h's but -c (the file itself), -V and -h."""
        conf = read("etc", "eftd.conf")
        header = conf[:conf.index("\n\n")]
        self.assertRegex(header, r"flags[^.]*override")
        helped = run_help(harness.EFTD)
        overriding = [names for names in help_options(helped) if not {"-c", "-V", "-h"} & names]
        self.assertGreater(len(overriding), 5)
        self.assert_shows(header, overriding, "etc/eftd.conf's header")

    def test_eftctl_synopsis_is_eftctl_help(self):
        """The README's eftctl synopsis shows every option of eftctl -h (by
        one of its names) and nothing else."""
        helped = run_help(EFTCTL)
        options = help_options(helped[helped.index("Options:"):])
        self.assertGreater(len(options), 5)
        synopsis = self.assert_synopsis(readme_section("eftctl"), "eftctl", options)
        commands = re.findall(r"(?m)^  ([a-z]+)\b", helped[:helped.index("Options:")])
        self.assertGreater(len(commands), 5)
        for c in commands:
            self.assertIn(c, synopsis, "README's eftctl synopsis lacks " + c)

    def test_admin_api_doc_shows_this_version(self):
        version = re.search(r'EFT_VERSION "([^"]+)"', read("include", "eft", "version.h")).group(1)
        doc = read("docs", "admin-api.md")
        shown = re.findall(r'"version": "(\d+\.\d+\.\d+)"', doc)
        self.assertTrue(shown, "docs/admin-api.md shows no version")
        self.assertEqual(set(shown), {version}, "docs/admin-api.md's version")

    def test_shipped_files_name_tools_that_exist(self):
        """A tools/ path that etc/ names exists (eft-passwd's source is
        tools/eft-passwd.c; the program is build/eft-passwd)."""
        for name in sorted(os.listdir(os.path.join(ROOT, "etc"))):
            text = read("etc", name)
            for path in re.findall(r"\btools/[\w./-]*\w", text):
                self.assertTrue(os.path.exists(os.path.join(ROOT, path)),
                                "etc/%s names %s" % (name, path))

    def test_shipped_config_does_not_say_there_is_no_authentication(self):
        self.assertFalse(re.search(r"(?i)no authentication", read("etc", "eftd.conf")),
                         "etc/eftd.conf says eftd has no authentication")

    def test_readme_links_exist(self):
        readme = read("README.md")
        self.assertTrue("(tools/examples/README.md)" in readme, "README does not link the examples")
        for target in re.findall(r"\]\(([^)#:]+)\)", readme):
            self.assertTrue(os.path.exists(os.path.join(ROOT, target)), "broken link " + target)


if __name__ == "__main__":
    unittest.main()
