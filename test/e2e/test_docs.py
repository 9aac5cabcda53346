"""The documents a new user follows agree with the code: the README's package
list and CI install what tools/install-deps does, every setting is documented
in etc/eftd.conf and the README, and the links the README gives exist."""

import os
import re
import unittest

import harness

ROOT = harness.ROOT


def read(*path):
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


def install_deps_packages():
    """{kind: [packages]} from tools/install-deps' pkgs= lines."""
    text = read("tools", "install-deps")
    base = re.search(r'^pkgs="([^"$]*)"', text, re.M).group(1).split()
    kinds = {"build": base}
    for kind, extra in re.findall(r'= (\w+) \]; then\n\s*pkgs="\$pkgs ([^"]*)"', text):
        kinds[kind] = base + extra.split()
    return kinds


def setting_names():
    """Every key of eftd's config table (src/config.c)."""
    return sorted(set(re.findall(r'KEY\(CFG_[A-Z_]+, "([a-z-]+)"', read("src", "config.c"))))


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
        ci = read(".ci", "run")
        for p in install_deps_packages()["test"]:
            self.assertRegex(ci, r"\b%s\b" % re.escape(p), ".ci/run does not install " + p)
        self.assertIn("make test", ci)

    def test_every_setting_is_documented(self):
        names = setting_names()
        self.assertGreater(len(names), 25)
        conf, readme = read("etc", "eftd.conf"), read("README.md")
        for n in names:
            self.assertTrue(re.search(r"(?m)^#? ?%s = " % re.escape(n), conf),
                            "etc/eftd.conf lacks " + n)
            self.assertTrue("`%s`" % n in readme, "README lacks " + n)

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
