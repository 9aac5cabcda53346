#!/usr/bin/env python3
"""Write store-fuzzer seeds (test/fuzz/corpus/store/sched-*) from real
journals that hold scheduled messages: SCHED records (waiting, with a
delay, x-delay, a cron entry, repeats), SCHED written again at a firing and
UNSCHED at the last, in BATCH records, beside MSG, DELIVERED and CONSUMED.

Each scenario runs eftd (build/eftd, or $EFTD) on a data-dir of its own
with fsync = always, stops it (cleanly, or with kill -9), and turns its
segments, oldest first, into the fuzzer's input: per record 1 byte type,
2 bytes payload length (little-endian), the payload (store-fuzzer.c).
The due times are the wall clock's at the run, so each run writes
different bytes: run it when the scenarios change, and commit the files.

    /usr/bin/python3 test/fuzz/gen-store-seeds.py [OUTDIR]
"""
import glob
import os
import shutil
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from harness import Broker, RawClient, send, subscribe, expect_receipt  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus", "store")
P = [("persistent", "true")]

def convert(data, name):
    """data's segments as one input, named name in OUT."""
    out = bytearray()
    for path in sorted(glob.glob(os.path.join(data, "journal-*.log"))):
        b = open(path, "rb").read()
        assert b[:8] == b"EFTJRNL1", path
        pos = 24
        while pos + 12 <= len(b):
            n, crc, typ = struct.unpack_from("<IIB", b, pos)
            if pos + 12 + n > len(b):
                break
            assert n < 65536
            out += bytes([typ]) + struct.pack("<H", n) + b[pos + 12:pos + 12 + n]
            pos += 12 + n
    types = sorted(set(out[i] for i in walk(out)))
    open(os.path.join(OUT, name), "wb").write(out)
    print(name, len(out), "bytes, types", types)

def walk(out):
    """The offsets of an input's records."""
    i = 0
    while i < len(out):
        yield i
        n = struct.unpack_from("<H", out, i + 1)[0]
        i += 3 + n

def run(name, scenario, clean=True):
    """eftd on a new data-dir, scenario(conn), then stop (or kill -9) it."""
    d = tempfile.mkdtemp(prefix="storefz-")
    data = os.path.join(d, "data")
    b = Broker(config="fsync = always\n", args=["--data-dir", data]).start()
    clients = []
    def conn():
        c = RawClient(b.port)
        clients.append(c)
        c.connect("1.2")
        return c
    try:
        scenario(conn)
    finally:
        for c in clients:
            c.close()
        if clean:
            b.stop()
        else:
            b.crash()
    convert(data, name)
    shutil.rmtree(d, True)

def waiting(conn):
    """Waiting: a delay, a cron entry with repeats, x-delay with priority and
    expiry; and a queued message beside them."""
    p = conn()
    send(p, "/queue/later", "in an hour", P + [("AMQ_SCHEDULED_DELAY", "3600000")], receipt="a")
    send(p, "/topic/t", "cron", P + [("AMQ_SCHEDULED_CRON", "0 0 1 1 *"),
         ("AMQ_SCHEDULED_REPEAT", "2"), ("AMQ_SCHEDULED_PERIOD", "1000")], receipt="b")
    send(p, "/queue/x", "rabbit", P + [("x-delay", "7200000"), ("priority", "7"),
         ("expires", str(int(time.time() * 1000) + 86400000))], receipt="c")
    send(p, "/queue/plain", "queued", P, receipt="d")

def fired(conn):
    """Fired: once (UNSCHED), three times, and the first of six (SCHED
    again); one delivery acknowledged, the rest not; kill -9."""
    c = conn()
    subscribe(c, "/queue/f", ack="client-individual")
    p = conn()
    send(p, "/queue/f", "once", P + [("AMQ_SCHEDULED_DELAY", "50")], receipt="a")
    send(p, "/queue/f", "thrice", P + [("AMQ_SCHEDULED_DELAY", "50"),
         ("AMQ_SCHEDULED_PERIOD", "100"), ("AMQ_SCHEDULED_REPEAT", "2")], receipt="b")
    send(p, "/queue/f", "long", P + [("AMQ_SCHEDULED_DELAY", "50"),
         ("AMQ_SCHEDULED_PERIOD", "3600000"), ("AMQ_SCHEDULED_REPEAT", "5")], receipt="c")
    got = c.read_frames(5)
    # ack one, leave the others unacknowledged (DELIVERED)
    c.send_frame("ACK", [("id", got[0]["ack"]), ("receipt", "k")])
    expect_receipt(c, "k")

def tx(conn):
    """Scheduled SENDs in a transaction (one BATCH), one firing twice."""
    p = conn()
    p.send_frame("BEGIN", [("transaction", "t")])
    send(p, "/queue/tx", "a", P + [("transaction", "t"), ("AMQ_SCHEDULED_DELAY", "3600000")])
    send(p, "/queue/tx", "b", P + [("transaction", "t")])
    send(p, "/queue/tx", "c", P + [("transaction", "t"), ("AMQ_SCHEDULED_DELAY", "60"),
         ("AMQ_SCHEDULED_PERIOD", "60"), ("AMQ_SCHEDULED_REPEAT", "1")])
    p.send_frame("COMMIT", [("transaction", "t"), ("receipt", "done")])
    expect_receipt(p, "done")
    time.sleep(0.5)

os.makedirs(OUT, exist_ok=True)
run("sched-waiting", waiting)
run("sched-fired", fired, clean=False)
run("sched-tx", tx)
