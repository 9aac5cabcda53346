// stomp.js (@stomp/stompjs) in Node, over WebSocket (the ws package), against
// a STOMP broker's ws:// or wss:// endpoint: eft's proof that a browser-style
// JavaScript client works with eftd.  Used by test/e2e/test_stompjs.py, which
// plays the peer with stomp.py on a TCP listener; runs against RabbitMQ's
// Web-STOMP too.
//
//   node stomp_node.mjs --url ws://127.0.0.1:PORT/ws --in /queue/a --out /queue/b
//        [--ca CA.pem] [--login L --passcode P --vhost H] [--count N] [--big BYTES]
//        [--phases N] [--heartbeat MS] [--idle MS] [--timeout S] [--tag TEXT]
//
// One phase: subscribe to --in (ack client-individual, with a receipt), print
// {"event":"ready","phase":K}, SEND --count messages to --out (each with a
// receipt, all awaited; the last --big bytes long when given), wait for
// --count messages on --in, ACK each (the last with a receipt, awaited), idle
// --idle ms (heart-beats must keep the connection up), print
// {"event":"phase-done","phase":K,...}.  With --phases 2 or more, each later
// phase first waits for the broker to close the connection and for stomp.js
// to reconnect by itself (reconnectDelay).  The peer sends its messages to
// --in after each "ready" line, and reads ours from --out.
//
// Every line on stdout is one JSON object; the last is {"result":"ok",...} or
// {"result":"fail","error":...}.  Exit status 0 only on "ok".  Every wait is
// bounded by --timeout seconds, the whole run by phases x 3 x --timeout.

import fs from 'node:fs';
import { Client } from '@stomp/stompjs';
import WebSocket from 'ws';

function parseArgs(argv) {
  const opts = {
    url: null, ca: null, login: 'guest', passcode: 'guest', vhost: null,
    in: null, out: null, count: 3, big: 0, phases: 1, heartbeat: 0, idle: 0,
    timeout: 10, tag: 'js',
  };
  const numeric = new Set(['count', 'big', 'phases', 'heartbeat', 'idle', 'timeout']);
  for (let i = 2; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in opts) || i + 1 >= argv.length) {
      throw new Error(`bad argument ${argv[i]}`);
    }
    opts[key] = numeric.has(key) ? Number(argv[i + 1]) : argv[i + 1];
  }
  for (const k of ['url', 'in', 'out']) {
    if (!opts[k]) throw new Error(`--${k} is required`);
  }
  return opts;
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// After the timer fired: stop once the fail line is written.
function fail(error) {
  emit({ result: 'fail', error });
  process.stdout.write('', () => process.exit(1));
}

// The body of message i of a phase: UTF-8 beyond ASCII, and the last one
// `big` bytes long when asked (to cross WebSocket frame-size boundaries).
function body(tag, phase, i, count, big) {
  const text = `${tag} phase ${phase} #${i} h\u00e9llo \u2713`;
  if (big > 0 && i === count - 1) {
    return text + ' ' + 'x'.repeat(Math.max(0, big - Buffer.byteLength(text) - 1));
  }
  return text;
}

// A promise that fails after ms with a message saying what was awaited.
function bounded(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(opts) {
  const waitMs = opts.timeout * 1000;
  const tlsOptions = opts.ca ? { ca: fs.readFileSync(opts.ca) } : {};
  const protocols = ['v12.stomp', 'v11.stomp', 'v10.stomp'];

  let socket = null;
  let connects = 0;
  let closes = 0;
  let onConnected = null;   // resolves the wait for the next CONNECTED
  let onClosed = null;      // resolves the wait for the next close
  const errors = [];        // ERROR frames the broker sent (e.g. shutting down)
  let inbox = [];           // messages received in the current phase
  let inboxWaiter = null;

  const headers = { login: opts.login, passcode: opts.passcode };
  if (opts.vhost) headers.host = opts.vhost;
  const client = new Client({
    brokerURL: opts.url,
    webSocketFactory: () => {
      socket = new WebSocket(opts.url, protocols, tlsOptions);
      return socket;
    },
    connectHeaders: headers,
    reconnectDelay: 200,
    connectionTimeout: waitMs,
    heartbeatIncoming: opts.heartbeat,
    heartbeatOutgoing: opts.heartbeat,
    debug: process.env.EFT_CLIENT_DEBUG ? (s) => process.stderr.write(s + '\n') : () => {},
    onConnect: () => {
      connects += 1;
      if (onConnected) onConnected();
    },
    onStompError: (frame) => {
      errors.push(frame.headers.message || frame.body);
    },
    onWebSocketClose: () => {
      closes += 1;
      if (onClosed) onClosed();
    },
  });

  const nextConnect = () => new Promise((resolve) => { onConnected = resolve; });
  const nextClose = () => new Promise((resolve) => { onClosed = resolve; });

  const phases = [];
  let connected = nextConnect();
  client.activate();
  try {
    for (let phase = 1; phase <= opts.phases; phase++) {
      if (phase > 1) {
        // The peer makes the broker drop us; stomp.js must come back by itself.
        const closed = nextClose();
        connected = nextConnect();
        emit({ event: 'await-drop', phase });
        await bounded(closed, waitMs, 'the broker to close the connection');
      }
      await bounded(connected, waitMs, `CONNECTED (connection ${phase})`);

      inbox = [];
      const sub = client.subscribe(opts.in, (msg) => {
        inbox.push(msg);
        if (inboxWaiter) inboxWaiter();
      }, { ack: 'client-individual', receipt: `sub-${phase}` });
      await bounded(new Promise((r) => client.watchForReceipt(`sub-${phase}`, r)),
        waitMs, `the receipt for SUBSCRIBE ${opts.in}`);
      emit({ event: 'ready', phase, subprotocol: socket.protocol,
             version: client.connectedVersion });

      const sent = [];
      const receipts = [];
      for (let i = 0; i < opts.count; i++) {
        const b = body(opts.tag, phase, i, opts.count, opts.big);
        const id = `send-${phase}-${i}`;
        receipts.push(bounded(new Promise((r) => client.watchForReceipt(id, r)),
          waitMs, `the receipt ${id}`));
        client.publish({ destination: opts.out, body: b,
                         headers: { receipt: id, 'content-type': 'text/plain;charset=utf-8' } });
        sent.push(b);
      }
      await Promise.all(receipts);

      await bounded(new Promise((resolve) => {
        const check = () => { if (inbox.length >= opts.count) resolve(); };
        inboxWaiter = check;
        check();
      }), waitMs, `${opts.count} messages on ${opts.in}`);
      inboxWaiter = null;
      const got = inbox.slice(0, opts.count);
      got.forEach((msg, i) => {
        if (i < got.length - 1) {
          msg.ack();
        }
      });
      const ackId = `ack-${phase}`;
      const acked = bounded(new Promise((r) => client.watchForReceipt(ackId, r)),
        waitMs, `the receipt for the last ACK (${ackId})`);
      got[got.length - 1].ack({ receipt: ackId });
      await acked;

      if (opts.idle > 0) {
        const closesBefore = closes;
        await sleep(opts.idle);
        if (closes !== closesBefore || !client.connected) {
          throw new Error(`connection dropped while idle for ${opts.idle} ms`);
        }
      }
      if (inbox.length > opts.count) {
        throw new Error(`${inbox.length - opts.count} more messages than the ${opts.count} expected`);
      }
      sub.unsubscribe();
      const received = got.map((m) => m.body);
      phases.push({ phase, sent, received, subprotocol: socket.protocol,
                    version: client.connectedVersion });
      emit({ event: 'phase-done', phase, received: received.map((b) => b.length) });
    }
    await bounded(client.deactivate(), waitMs, 'DISCONNECT');
    emit({ result: 'ok', connects, closes, errors, phases });
    return 0;
  } catch (err) {
    emit({ result: 'fail', error: String(err && err.message || err), connects, closes,
           errors, phases });
    client.deactivate({ force: true }).catch(() => {});
    return 1;
  }
}

let status = 1;
try {
  const opts = parseArgs(process.argv);
  const limit = opts.phases * 3 * opts.timeout * 1000 + opts.phases * opts.idle;
  setTimeout(() => {
    fail(`the whole run took more than ${limit} ms`);
  }, limit).unref();
  status = await main(opts);
} catch (err) {
  emit({ result: 'fail', error: String(err && err.message || err) });
  status = 1;
}
// Exit once stdout is written out: to a pipe it is asynchronous, and exiting
// at once would cut the last line.
process.stdout.write('', () => process.exit(status));
