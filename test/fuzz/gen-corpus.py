#!/usr/bin/env python3
"""Write the seed corpora test/fuzz/corpus/{parser,proto}/ from the sessions below.

Run it after changing them: test/fuzz/gen-corpus.py.  The files are
committed; the fuzzers only ever read them (make fuzz-run works on a copy).

parser inputs: a seed byte (version after CONNECT, piece sizes, limits; see
parser-fuzzer.c), then one client's byte stream.
proto inputs: a seed byte (piece sizes, flow-control limits; see
proto-fuzzer.c), then segments separated by 0xFF: segment i is what client
i % 3 sends next; an empty segment hangs that client up.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = b"\xff"
# The first two temp-queues of an input get these names (proto-fuzzer.c
# makes getrandom predictable).
REPLY0 = "/reply-queue/eft.gen-" + "A" * 22
REPLY1 = "/reply-queue/eft.gen-" + "A" * 21 + "Q"


def frame(cmd, *headers, body=b"", eol="\n", clen=False):
    """A client frame; headers are 'name:value' strings."""
    if isinstance(body, str):
        body = body.encode()
    hs = list(headers)
    if clen:
        hs.append("content-length:%d" % len(body))
    head = eol.join([cmd] + hs) + eol + eol
    return head.encode() + body + b"\0"


def connect(version="1.2", *extra, cmd="CONNECT"):
    hs = ["accept-version:" + version, "host:/"] if version else []
    return frame(cmd, *(hs + list(extra)))


def session(*steps, seed=0x07):
    """steps: (client, bytes) to send, or (client, None) to hang up.
    Clients skipped in the round get a lone EOL (a heart-beat)."""
    segs = []
    nxt = 0
    for client, data in steps:
        while nxt % 3 != client:
            segs.append(b"\n")
            nxt += 1
        segs.append(b"" if data is None else data)
        nxt += 1
    return bytes([seed]) + SEP.join(segs)


def cat(*frames):
    return b"".join(frames)


def parser_corpus():
    c = {}
    c["connect-1.2"] = b"\x02" + connect("1.2", "heart-beat:1000,1000") + frame(
        "SEND", "destination:/queue/a", body="hello")
    c["connect-1.1-split1"] = b"\x01" + connect("1.1") + frame(
        "SUBSCRIBE", "id:0", "destination:/topic/t", "ack:client")
    c["connect-1.0-whole"] = b"\x1c" + connect(None) + frame("SEND", "destination:/queue/a",
                                                            body="1.0 body")
    c["stomp-cmd"] = b"\x06" + connect("1.0,1.1,1.2", cmd="STOMP") + frame("DISCONNECT",
                                                                         "receipt:77")
    c["crlf"] = b"\x0a" + frame("CONNECT", "accept-version:1.2", "host:/", eol="\r\n") + frame(
        "SEND", "destination:/queue/a", "receipt:1", body="crlf", eol="\r\n")
    c["escapes-1.2"] = b"\x02" + connect("1.2") + frame(
        "SEND", "destination:/queue/a", "k\\cey:v\\nal\\\\ue\\r", "x:a\\cb", body="esc")
    c["escapes-1.1"] = b"\x05" + connect("1.1") + frame(
        "SEND", "destination:/queue/a", "k:v\\n\\c\\\\", "cr:a\\rb", body="1.1 has no \\r")
    c["escape-undefined"] = b"\x02" + connect("1.2") + frame("SEND", "destination:/q",
                                                            "bad:\\t")
    c["escapes-connect-raw"] = b"\x02" + frame("CONNECT", "accept-version:1.2",
                                              "login:a\\cb", "passcode:x\\y")
    c["content-length-nuls"] = b"\x03" + connect("1.2") + frame(
        "SEND", "destination:/queue/a", body=b"a\0b\0\0c", clen=True)
    c["content-length-zero"] = b"\x0e" + connect("1.2") + frame(
        "SEND", "destination:/queue/a", "content-length:0")
    c["content-length-wrong"] = b"\x02" + connect("1.2") + frame(
        "SEND", "destination:/queue/a", "content-length:2", body="abc")
    c["content-length-nan"] = b"\x02" + connect("1.2") + frame(
        "SEND", "destination:/queue/a", "content-length:12x", body="abc")
    c["content-length-huge"] = b"\x42" + connect("1.2") + frame(
        "SEND", "destination:/queue/a", "content-length:99999999999", body="abc")
    c["repeated-headers"] = b"\x02" + connect("1.2") + frame(
        "SEND", "destination:/queue/a", "destination:/queue/b", "content-length:1",
        "content-length:5", body="x")
    c["heartbeats-between"] = b"\x06" + b"\n\r\n\n" + connect("1.2") + b"\n\n\r\n" + frame(
        "SEND", "destination:/queue/a", body="x") + b"\r\n\n"
    c["stray-cr"] = b"\x02" + connect("1.2") + b"\r\rSEND\n\n\0"
    c["no-colon"] = b"\x02" + connect("1.2") + b"SEND\ndestination\n\n\0"
    c["nul-in-headers"] = b"\x02" + b"SEND\ndest\0ination:/q\n\n\0"
    c["no-blank-line"] = b"\x02" + connect("1.2") + b"SEND\ndestination:/queue/a\n\0" + \
        b"ACK\n\0" + frame("NACK", "id:1-1")
    c["many-headers"] = b"\x82" + connect("1.2") + frame(
        "SEND", "destination:/queue/a", *["h%d:%d" % (i, i) for i in range(70)])
    c["long-line"] = b"\xc2" + connect("1.2") + frame("SEND", "destination:/queue/" + "x" * 90)
    c["body-limit"] = b"\xd2" + connect("1.2") + frame("SEND", "destination:/queue/a",
                                                      body="b" * 120)
    c["empty-header-name"] = b"\x02" + connect("1.2") + frame("SEND", ":v", "k:",
                                                             "destination:/queue/a")
    c["all-commands"] = b"\x09" + connect("1.2") + cat(
        frame("SUBSCRIBE", "id:s", "destination:/queue/a", "ack:client-individual",
              "prefetch-count:2"),
        frame("BEGIN", "transaction:t"),
        frame("SEND", "destination:/queue/a", "transaction:t", "reply-to:/temp-queue/r",
              body="x"),
        frame("ACK", "id:1-1", "transaction:t"),
        frame("NACK", "subscription:s", "message-id:1"),
        frame("COMMIT", "transaction:t"),
        frame("ABORT", "transaction:u"),
        frame("UNSUBSCRIBE", "id:s"),
        frame("DISCONNECT", "receipt:bye"))
    c["lowercase-command"] = b"\x02" + b"connect\naccept-version:1.2\n\n\0send\n\n\0"
    return c


def proto_corpus():
    c = {}
    # Queue, client-individual ack, in each version.
    c["queue-ack-1.2"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/a",
                                  "ack:client-individual", "receipt:s")),
        (1, connect("1.2") + frame("SEND", "destination:/queue/a", "receipt:r1", body="one") +
         frame("SEND", "destination:/queue/a", "content-type:text/plain", body="two")),
        (0, frame("ACK", "id:1-1") + frame("NACK", "id:1-2")),
        (0, frame("ACK", "id:1-2", "receipt:a") + frame("DISCONNECT", "receipt:bye")),
        (1, frame("DISCONNECT")))
    c["queue-ack-1.1"] = session(
        (0, connect("1.1") + frame("SUBSCRIBE", "id:x", "destination:/queue/b", "ack:client")),
        (1, connect("1.1") + frame("SEND", "destination:/queue/b", body="m1") +
         frame("SEND", "destination:/queue/b", body="m2") +
         frame("SEND", "destination:/queue/b", body="m3")),
        (0, frame("ACK", "subscription:x", "message-id:2") +
         frame("NACK", "subscription:x", "message-id:3")),
        (0, frame("UNSUBSCRIBE", "id:x", "receipt:u")), seed=0x02)
    c["queue-ack-1.0"] = session(
        (0, connect(None) + frame("SUBSCRIBE", "destination:/queue/c", "ack:client")),
        (1, connect(None) + frame("SEND", "destination:/queue/c", body="hi")),
        (0, frame("ACK", "message-id:1") + frame("UNSUBSCRIBE", "destination:/queue/c")),
        seed=0x00)
    c["topic-fanout-versions"] = session(
        (0, connect("1.0") + frame("SUBSCRIBE", "destination:/topic/t")),
        (1, connect("1.1") + frame("SUBSCRIBE", "id:1", "destination:/topic/t")),
        (2, connect("1.2") + frame("SUBSCRIBE", "id:2", "destination:/topic/t", "ack:client") +
         frame("SEND", "destination:/topic/t", "custom:x", body="all")),
        (2, frame("ACK", "id:3-1")), seed=0x05)
    c["transactions"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/tx",
                                  "ack:client")),
        (1, connect("1.2") + frame("BEGIN", "transaction:t1") +
         frame("SEND", "destination:/queue/tx", "transaction:t1", body="a") +
         frame("SEND", "destination:/topic/tx", "transaction:t1", body="b") +
         frame("COMMIT", "transaction:t1", "receipt:c")),
        (0, frame("BEGIN", "transaction:t2") + frame("ACK", "id:1-1", "transaction:t2") +
         frame("ABORT", "transaction:t2") + frame("BEGIN", "transaction:t3") +
         frame("NACK", "id:1-1", "transaction:t3") + frame("COMMIT", "transaction:t3")),
        (1, frame("BEGIN", "transaction:t4") +
         frame("SEND", "destination:/queue/tx", "transaction:t4", body="left open")),
        (1, None), seed=0x03)
    c["tx-errors"] = session(
        (0, connect("1.2") + frame("BEGIN", "transaction:t") + frame("BEGIN", "transaction:t",
                                                                     "receipt:dup")),
        (1, connect("1.2") + frame("COMMIT", "transaction:nope")),
        (2, connect("1.2") + frame("BEGIN")), seed=0x04)
    c["rpc-temp-queue"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/rpc")),
        (1, connect("1.2") + frame("SEND", "destination:/queue/rpc",
                                  "reply-to:/temp-queue/r", "correlation-id:1", body="req")),
        (0, frame("SEND", "destination:" + REPLY0, "correlation-id:1", body="resp")),
        (1, frame("SEND", "destination:/queue/rpc", "reply-to:/temp-queue/r",
                  "correlation-id:2", body="req2")),
        (1, None),
        (0, frame("SEND", "destination:" + REPLY0, "correlation-id:2", body="dropped")),
        seed=0x07)
    c["rpc-own-subscription"] = session(
        (0, connect("1.1") + frame("SUBSCRIBE", "id:mine", "destination:/temp-queue/q",
                                  "ack:client-individual") +
         frame("SEND", "destination:/queue/svc", "reply-to:/temp-queue/q", body="req") +
         frame("SEND", "destination:/temp-queue/q", body="to self")),
        (1, connect("1.0") + frame("SUBSCRIBE", "destination:/queue/svc")),
        (1, frame("SEND", "destination:" + REPLY0, body="reply")),
        (0, frame("ACK", "subscription:mine", "message-id:3")), seed=0x06)
    c["rpc-two-temps"] = session(
        (0, connect("1.2") + frame("SEND", "destination:/queue/s", "reply-to:/temp-queue/a") +
         frame("SEND", "destination:/queue/s", "reply-to:/temp-queue/b")),
        (1, connect("1.2") + frame("SEND", "destination:" + REPLY1, body="to b") +
         frame("SEND", "destination:" + REPLY0, body="to a") +
         frame("SUBSCRIBE", "id:r", "destination:" + REPLY0)), seed=0x07)
    c["rpc-id-clash"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:/temp-queue/r", "destination:/queue/x") +
         frame("SEND", "destination:/queue/s", "reply-to:/temp-queue/r", "receipt:9")),
        seed=0x07)
    c["escapes-cross-version"] = session(
        (0, connect("1.0") + frame("SUBSCRIBE", "destination:/queue/e")),
        (1, connect("1.2") + frame("SUBSCRIBE", "id:a\\cb", "destination:/topic/e")),
        (2, connect("1.2") + frame("SEND", "destination:/queue/e", "k\\cey:v\\na\\\\l\\r",
                                  body="1.2 to 1.0") +
         frame("SEND", "destination:/topic/e", "plain:x", "colon:a:b", body="t")),
        (0, frame("SEND", "destination:/topic/e", "raw:a:b\\c", body="1.0 to 1.2")),
        seed=0x07)
    c["escape-1.1-cr"] = session(
        (0, connect("1.1") + frame("SUBSCRIBE", "id:0", "destination:/queue/r")),
        (1, connect("1.2") + frame("SEND", "destination:/queue/r", "cr:a\\rb", body="x")),
        (2, connect("1.1") + frame("SEND", "destination:/queue/r", "bad:\\r")))
    c["crlf-session"] = session(
        (0, frame("CONNECT", "accept-version:1.2", "host:/", eol="\r\n") +
         frame("SUBSCRIBE", "id:0", "destination:/queue/crlf", eol="\r\n")),
        (1, frame("STOMP", "accept-version:1.1", eol="\r\n") +
         frame("SEND", "destination:/queue/crlf", "receipt:r", body="x", eol="\r\n")),
        seed=0x01)
    c["content-length-nuls"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/topic/bin")),
        (1, connect("1.1") + frame("SEND", "destination:/topic/bin", body=b"\0\x01\0\xfe",
                                  clen=True) +
         frame("SEND", "destination:/topic/bin", "content-length:0")), seed=0x07)
    c["flow-control-queue"] = session(
        (0, connect("1.2") + cat(*[frame("SEND", "destination:/queue/f", body="m%d" % i)
                                   for i in range(6)]) + frame("DISCONNECT", "receipt:d")),
        (1, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/f",
                                  "ack:client-individual", "prefetch-count:2")),
        (1, frame("ACK", "id:1-1") + frame("ACK", "id:1-2")),
        (1, frame("ACK", "id:1-3") + frame("ACK", "id:1-4") + frame("UNSUBSCRIBE", "id:0")),
        seed=0x0f)
    c["flow-control-memory"] = session(
        (0, connect("1.2") + cat(*[frame("SEND", "destination:/queue/m%d" % (i % 3),
                                         body="y" * 100) for i in range(5)])),
        (1, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/m0")),
        (2, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/m1")),
        seed=0x17)
    c["prefetch-client-ack"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:p", "destination:/queue/p", "ack:client",
                                  "prefetch-count:1")),
        (1, connect("1.2") + cat(*[frame("SEND", "destination:/queue/p", body=str(i))
                                   for i in range(3)])),
        (0, frame("ACK", "id:1-1")),
        (0, frame("NACK", "id:1-2")),
        (0, frame("ACK", "id:1-3")), seed=0x07)
    c["hangup-unacked"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/h",
                                  "ack:client")),
        (1, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/h") +
         frame("SEND", "destination:/queue/h", body="1") +
         frame("SEND", "destination:/queue/h", body="2") +
         frame("SEND", "destination:/queue/h", body="3")),
        (0, None),
        (0, connect("1.1") + frame("SUBSCRIBE", "id:0", "destination:/queue/h")),
        seed=0x87)
    c["heartbeats"] = session(
        (0, connect("1.2", "heart-beat:100,20000") + b"\n\n\r\n"),
        (1, connect("1.1", "heart-beat: 0 , 0 ")),
        (2, connect("1.2", "heart-beat:abc")), seed=0x07)
    c["version-negotiation"] = session(
        (0, connect("2.0,3.1")),
        (1, connect("1.0, 1.1 ,1.9")),
        (2, connect("")), seed=0x07)
    c["not-connected"] = session(
        (0, frame("SEND", "destination:/queue/a", "receipt:early")),
        (1, connect("1.2") + connect("1.2")),
        (2, frame("FOO", "receipt:r")), seed=0x07)
    c["subscribe-errors"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/a") +
         frame("SUBSCRIBE", "id:0", "destination:/queue/b", "receipt:dup")),
        (1, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/a",
                                  "ack:sometimes")),
        (2, connect("1.1") + frame("SUBSCRIBE", "destination:/queue/a")), seed=0x07)
    c["subscribe-errors-2"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/elsewhere")),
        (1, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:" + REPLY0)),
        (2, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/a",
                                  "prefetch-count:-1")), seed=0x07)
    c["too-many-subscriptions"] = session(
        (0, connect("1.2") + cat(*[frame("SUBSCRIBE", "id:%d" % i,
                                         "destination:/topic/%d" % i) for i in range(9)])),
        seed=0x07)
    c["missing-headers"] = session(
        (0, connect("1.2") + frame("SEND", "receipt:r")),
        (1, connect("1.2") + frame("UNSUBSCRIBE")),
        (2, connect("1.2") + frame("ACK") + frame("UNSUBSCRIBE", "id:none")), seed=0x07)
    c["malformed"] = session(
        (0, connect("1.2") + b"SEND\ndestination\n\n\0"),
        (1, connect("1.2") + b"SEND\ndestination:/queue/a\ncontent-length:1\n\nxy\0"),
        (2, connect("1.2") + b"\r\rSEND\n\n\0"), seed=0x07)
    c["limits"] = session(
        (0, connect("1.2") + frame("SEND", "destination:/queue/a",
                                  *["h%d:v" % i for i in range(66)])),
        (1, connect("1.2") + frame("SEND", "destination:/queue/a", "receipt:big",
                                  "content-length:40000")),
        (2, connect("1.2") + frame("SEND", "destination:/queue/a", "content-length:x")),
        seed=0x07)
    c["disconnect-then-more"] = session(
        (0, connect("1.2") + frame("DISCONNECT", "receipt:r") +
         frame("SEND", "destination:/queue/a", body="after")),
        (1, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/a")),
        seed=0x07)
    c["nack-redeliver"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/n",
                                  "ack:client-individual")),
        (1, connect("1.2") + frame("SEND", "destination:/queue/n", "redelivered:x",
                                  "message-id:9", "subscription:z", body="n")),
        (0, frame("NACK", "id:1-1") + frame("NACK", "id:1-1") + frame("ACK", "id:1-1") +
         frame("ACK", "message-id:1")), seed=0x02)
    c["round-robin"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/rr")),
        (1, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/rr")),
        (2, connect("1.2") + cat(*[frame("SEND", "destination:/queue/rr", body=str(i))
                                   for i in range(5)]) + frame("DISCONNECT")),
        (0, frame("UNSUBSCRIBE", "id:0", "receipt:u")), seed=0x27)
    c["pipelined-whole"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/w") +
         frame("SEND", "destination:/queue/w", "receipt:1", body="self") +
         frame("SEND", "destination:/topic/w", body="nobody") +
         frame("UNSUBSCRIBE", "id:0") + frame("DISCONNECT", "receipt:2")), seed=0x47)
    c["login-ignored"] = session(
        (0, connect("1.2", "login:guest", "passcode:guest") +
         frame("SEND", "destination:/queue/l", "content-type:application/json",
               body='{"a":1}')), seed=0x07)
    c["slow-consumer"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/s")),
        (1, connect("1.2") + cat(*[frame("SEND", "destination:/queue/s", body="z" * 150)
                                   for i in range(4)])),
        (0, frame("SUBSCRIBE", "id:1", "destination:/topic/s")), seed=0x27)
    # Exclusive consumers, priorities and RabbitMQ's exclusive queues: the
    # active one leaves (UNSUBSCRIBE, hang-up) with messages unacked.
    c["consumers-exclusive"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/x",
                                  "activemq.exclusive:true", "ack:client-individual")),
        (1, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/x",
                                  "x-single-active-consumer:true", "x-priority:-2") +
         frame("SUBSCRIBE", "id:1", "destination:/queue/x", "activemq.priority:5")),
        (2, connect("1.2") + cat(*[frame("SEND", "destination:/queue/x", body=str(i))
                                   for i in range(4)])),
        (0, frame("ACK", "id:1-1") + frame("UNSUBSCRIBE", "id:0")),
        (1, frame("UNSUBSCRIBE", "id:0")), seed=0x07)
    c["consumers-priority-lock"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/p",
                                  "x-priority:9", "ack:client", "prefetch-count:1") +
         frame("SUBSCRIBE", "id:1", "destination:/queue/l", "exclusive:true")),
        (1, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/queue/p",
                                  "activemq.priority:3") +
         frame("SUBSCRIBE", "id:1", "destination:/queue/l")),
        (2, connect("1.2") + cat(*[frame("SEND", "destination:/queue/p", body=str(i))
                                   for i in range(3)]) +
         frame("SUBSCRIBE", "id:0", "destination:/queue/p", "activemq.priority:200")),
        (0, None), seed=0x07)
    # Seed bit 7: client 2 never reads; its queued output goes with conn_free.
    c["slow-reader-hangs-up"] = session(
        (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/topic/slow")),
        (1, connect("1.2") + frame("SEND", "destination:/topic/slow", body="x" * 200)),
        (2, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/topic/slow") +
         frame("SUBSCRIBE", "id:1", "destination:/queue/slow", "ack:client")),
        (0, frame("SEND", "destination:/queue/slow", body="q" * 200) +
         frame("SEND", "destination:/topic/slow", body="t" * 200)),
        (2, None), seed=0xa7)
    return c


# Bodies of WIRE_REFERENCE_MIN (2048) bytes or more go to the output by
# reference; no mutation of a small seed grows one in a short run, so this
# one is the exception to "under 1 KiB".
LARGE = {"proto": {}, "parser": {}}
LARGE["proto"]["large-body-by-reference"] = session(
    (0, connect("1.2") + frame("SUBSCRIBE", "id:0", "destination:/topic/big")),
    (1, connect("1.1") + frame("SUBSCRIBE", "id:q", "destination:/topic/big")),
    (2, connect("1.0") + frame("SUBSCRIBE", "destination:/topic/big") +
     frame("SEND", "destination:/topic/big", body=b"\0" + b"b" * 2100, clen=True)),
    (1, None), seed=0x87)


def write(name, files):
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        os.unlink(os.path.join(d, old))
    for fname, data in sorted(files.items()):
        if len(data) >= 1024 and fname not in LARGE[name]:
            sys.exit("%s/%s is %d bytes: keep seeds under 1 KiB" % (name, fname, len(data)))
        with open(os.path.join(d, fname), "wb") as f:
            f.write(data)
    print("%s: %d files" % (d, len(files)))


if __name__ == "__main__":
    write("parser", {**parser_corpus(), **LARGE["parser"]})
    write("proto", {**proto_corpus(), **LARGE["proto"]})
