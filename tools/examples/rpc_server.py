#!/usr/bin/python3
"""RPC service over eftd with stomp.py (Debian: python3-stomp).

Takes requests from /queue/rpc and answers each one to the queue named in
its reply-to header, copying its correlation-id.  The "work" is upper-casing
the body.  Code written this way for RabbitMQ runs unchanged on eftd.

    python3 rpc_server.py [HOST] [PORT]    (or EFT_HOST, EFT_PORT; default 127.0.0.1 61613)

Stop it with Ctrl-C.  When it cannot connect it says why in one line on
stderr and exits 1.
"""
import logging
import os
import signal
import sys
import threading

import stomp

host = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("EFT_HOST", "127.0.0.1")
port = int(sys.argv[2] if len(sys.argv) > 2 else os.environ.get("EFT_PORT", "61613"))
queue = os.environ.get("EFT_RPC_QUEUE", "/queue/rpc")
stop = threading.Event()
# stomp.py logs a warning for each failed attempt; the script says it once.
logging.getLogger("stomp.py").setLevel(logging.ERROR)


class Server(stomp.ConnectionListener):
    def __init__(self, conn):
        self.conn = conn
        self.error = None  # the message of the broker's ERROR frame

    def on_message(self, frame):
        # reply-to is the private /reply-queue/... name eftd made for the caller.
        reply_to = frame.headers.get("reply-to")
        if not reply_to:
            return
        headers = {}
        if "correlation-id" in frame.headers:
            headers["correlation-id"] = frame.headers["correlation-id"]
        self.conn.send(reply_to, frame.body.upper(), headers=headers)

    def on_error(self, frame):
        self.error = frame.headers.get("message", "(no message)")
        if self.conn.is_connected():    # an ERROR for CONNECT is reported below
            print("rpc_server: ERROR from the broker: %s" % self.error, file=sys.stderr)

    def on_disconnected(self):
        stop.set()


conn = stomp.Connection12([(host, port)], reconnect_attempts_max=1)
server = Server(conn)
conn.set_listener("server", server)
try:
    conn.connect("guest", "guest", wait=True)  # let in unless allow-anonymous = no
except stomp.exception.ConnectFailedException:
    if server.error:        # e.g. a wrong login
        sys.exit("rpc_server.py: %s port %d refused the connection: %s"
                 % (host, port, server.error))
    sys.exit("rpc_server.py: cannot connect to %s port %d: is eftd running?" % (host, port))
conn.subscribe(queue, id="rpc-server", ack="auto")
print("rpc_server: serving %s on %s:%d" % (queue, host, port), flush=True)

for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, lambda *_: stop.set())
while not stop.wait(1):
    pass
if conn.is_connected():
    conn.disconnect()
print("rpc_server: stopped", flush=True)
