"""Headless Chromium for the end-to-end tests, driven over the DevTools
protocol with python3-websocket: open a page, evaluate JavaScript in it,
wait for a value, save a screenshot.  NEED_CHROMIUM says why a browser test
cannot run here (None when it can); tests skip with it."""

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

import harness
from harness import SLOW

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))),
                None)
WAIT = 15 * SLOW  # seconds for any one step

try:
    import websocket  # python3-websocket: to drive Chromium over the DevTools protocol
except ImportError:
    websocket = None

NEED_CHROMIUM = ("no chromium (tools/install-deps test; Ubuntu has it only as a snap)"
                 if not CHROMIUM else
                 "no python3-websocket for the DevTools protocol" if not websocket else None)


class JsError(AssertionError):
    """A JavaScript expression threw in the page."""


class Chromium:
    """Headless Chromium on one page, driven over the DevTools protocol
    (the remote-debugging port on 127.0.0.1), in a throwaway profile.
    size: (width, height) of the window, else Chromium's default."""

    def __init__(self, url, size=None):
        self.profile = tempfile.mkdtemp(prefix="eft-chromium-")
        self.ws = None
        self.next_id = 0
        self.log = open(os.path.join(self.profile, "stderr.log"), "w+")
        args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update",
                "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                "--user-data-dir=" + self.profile]
        if size:
            args.append("--window-size=%d,%d" % size)
        self.proc = subprocess.Popen(
            args + [url],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)  # its helper processes in a group of their own
        try:
            self._attach()
        except BaseException:
            self.close()
            raise

    def _attach(self):
        port_file = os.path.join(self.profile, "DevToolsActivePort")

        def read_port():  # the file's first line, once it is written out
            try:
                with open(port_file) as f:
                    text = f.read()
            except FileNotFoundError:
                return None
            return int(text.split()[0]) if "\n" in text else None
        harness.wait_for(read_port, 30, "Chromium's DevToolsActivePort")
        port = read_port()
        pages = []

        def page_listed():
            with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=5) as r:
                pages[:] = [t for t in json.load(r) if t.get("type") == "page"]
            return bool(pages)
        harness.wait_for(page_listed, 30, "Chromium's page target")
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=WAIT,
                                              suppress_origin=True)

    def call(self, method, **params):
        """Call a DevTools method on the page; returns its result (events
        that come meanwhile are dropped).  A protocol error raises."""
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise AssertionError("DevTools %s: %r" % (method, reply["error"]))
                return reply.get("result", {})

    def evaluate(self, expression, throw=False):
        """The value of a JavaScript expression in the page (by value: JSON
        types; None for undefined).  If it throws: None, or with throw=True
        a JsError saying what it threw."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if throw and "exceptionDetails" in result:
            d = result["exceptionDetails"]
            raise JsError("%s threw: %s" % (expression, d.get("exception", {}).get(
                "description", d.get("text"))))
        return result.get("result", {}).get("value")

    def wait_value(self, expression, pred, what, timeout=WAIT, every=0.1):
        """Poll expression in the page every `every` seconds until
        pred(value); returns the value, or fails after timeout seconds."""
        deadline = time.time() + timeout
        value = None
        while time.time() < deadline:
            value = self.evaluate(expression)
            if pred(value):
                return value
            time.sleep(every)
        raise AssertionError("timed out waiting for %s: %s is %r" % (what, expression, value))

    def screenshot(self, path):
        """Save the whole page (not only the window) as a PNG at path."""
        size = self.call("Page.getLayoutMetrics")["cssContentSize"]
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": size["width"],
                               "height": size["height"], "scale": 1})
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
        return path

    def stderr(self):
        self.log.seek(0)
        return self.log.read()[-3000:]

    def close(self):
        if self.ws:
            self.ws.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        # Helpers that outlive the browser (the network service, crashpad)
        # would write into the profile after it is removed: end them too
        # (the group is the browser's, made for it at start).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
