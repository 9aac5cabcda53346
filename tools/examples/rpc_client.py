#!/usr/bin/python3
"""RPC client over eftd with stomp.py (Debian: python3-stomp).

Sends COUNT requests to /queue/rpc with reply-to:/temp-queue/rpc and a
correlation-id each, then waits for the replies.  It never SUBSCRIBEs: the
first SEND with reply-to:/temp-queue/rpc makes this connection a private
reply queue and subscribes it (as RabbitMQ does), so the listener's
on_message gets the replies, with subscription:/temp-queue/rpc.

    python3 rpc_client.py [HOST] [PORT] [COUNT]   (or EFT_HOST, EFT_PORT; default 127.0.0.1 61613 5)

Exits 0 when every request got its reply within 10 seconds, 1 otherwise
(with one line on stderr when it cannot connect).
"""
import logging
import os
import sys
import threading
import time
import uuid

import stomp

host = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("EFT_HOST", "127.0.0.1")
port = int(sys.argv[2] if len(sys.argv) > 2 else os.environ.get("EFT_PORT", "61613"))
count = int(sys.argv[3]) if len(sys.argv) > 3 else 5
queue = os.environ.get("EFT_RPC_QUEUE", "/queue/rpc")
# stomp.py logs a warning for each failed attempt; the script says it once.
logging.getLogger("stomp.py").setLevel(logging.ERROR)


class Replies(stomp.ConnectionListener):
    def __init__(self):
        self.cond = threading.Condition()
        self.replies = {}  # correlation-id -> reply body
        self.error = None  # the message of the broker's ERROR frame

    def on_error(self, frame):
        self.error = frame.headers.get("message", "(no message)")

    def on_message(self, frame):
        with self.cond:
            self.replies[frame.headers.get("correlation-id")] = frame.body
            self.cond.notify_all()


listener = Replies()
conn = stomp.Connection12([(host, port)], reconnect_attempts_max=1)
conn.set_listener("replies", listener)
try:
    conn.connect("guest", "guest", wait=True)
except stomp.exception.ConnectFailedException:
    if listener.error:      # e.g. a wrong login
        sys.exit("rpc_client.py: %s port %d refused the connection: %s"
                 % (host, port, listener.error))
    sys.exit("rpc_client.py: cannot connect to %s port %d: is eftd running?" % (host, port))

pending = {}  # correlation-id -> request body
for i in range(1, count + 1):
    cid = str(uuid.uuid4())
    pending[cid] = "hello %d" % i
    conn.send(queue, pending[cid],
              headers={"reply-to": "/temp-queue/rpc", "correlation-id": cid})

deadline = time.time() + 10
with listener.cond:
    while not set(pending) <= set(listener.replies) and time.time() < deadline:
        listener.cond.wait(deadline - time.time())
    replies = dict(listener.replies)
for cid, request in pending.items():
    if cid in replies:
        print("%s -> %s" % (request, replies[cid]))
missing = [cid for cid in pending if cid not in replies]
if missing:
    print("rpc_client: no reply to %d of %d requests within 10 s (is rpc_server running?)"
          % (len(missing), count), file=sys.stderr)
conn.disconnect()
sys.exit(1 if missing else 0)
