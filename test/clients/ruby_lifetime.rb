#!/usr/bin/ruby
# Message lifetimes with the Ruby `stomp` gem (1.4.x): the headers real
# ActiveMQ and RabbitMQ clients send (expires, expiration, priority,
# selector, NACK requeue:false) and what eftd does with them.
#
#   ruby test/clients/ruby_lifetime.rb PORT [SCENARIO]
#
# Expects the eftd that test/e2e/test_lifetime.py starts for it, with these
# policies (the dead-letter queues are fixed names, the queues end in RUN):
#   policy = /queue/dl.> dead-letter-queue=/queue/dl-dead
#   policy = /queue/mr.> max-redeliveries=2 dead-letter-queue=/queue/mr-dead
# Prints "PASS name" / "FAIL name: why" per scenario and "ruby-lifetime: N
# passed, N failed"; exits 1 if any failed.  Every wait is bounded.
require_relative 'stomp_helper'

# eftd's clock (libevent's cached time) may be a few ms off ours.
CLOCK_SLACK_MS = 50

def now_ms
  (Time.now.to_f * 1000).to_i
end

# The next frame is an ERROR whose message header is want; then the broker
# closes the connection (receive gives nil or raises).
def expect_error_and_close(conn, want)
  f = next_frame(conn, what: "ERROR #{want}")
  eq(f.command, 'ERROR', "answer (#{f.headers.inspect} #{f.body.inspect})")
  eq(f.headers['message'], want, 'ERROR message header')
  closed = begin
    Timeout.timeout(5) { conn.receive }.nil?
  rescue Timeout::Error
    false
  rescue StandardError
    true
  end
  check(closed, 'the connection stayed open after the ERROR')
  $open_conns.delete(conn)
  f
end

# Messages on conn until the sentinel body arrives (sent by the caller after
# the messages it expects); the sentinel itself is left out.
def until_sentinel(conn, sentinel = 'sentinel')
  got = []
  20.times do
    m = next_message(conn, what: "messages up to #{sentinel}")
    return got if m.body == sentinel

    got << m
  end
  raise Failure, "no #{sentinel} among 20 messages: #{got.map(&:body).inspect}"
end

# ---------------------------------------------------------------- scenarios

# expires (ActiveMQ, absolute) and expiration (RabbitMQ, relative): only the
# ones still alive after 500 ms are delivered, in order.
def sc_expiry(port)
  c = conn_v(port, '1.2')
  dest = "/queue/rb-exp-#{RUN}"
  now = now_ms
  c.publish(dest, 'stale-abs', 'expires' => (now + 200).to_s)
  c.publish(dest, 'stale-rel', 'expiration' => '200')
  c.publish(dest, 'doa-abs', 'expires' => (now - 1000).to_s)
  c.publish(dest, 'doa-rel', 'expiration' => '0')
  c.publish(dest, 'forever', 'expires' => '0')
  c.publish(dest, 'fresh-abs', 'expires' => (now + 60_000).to_s)
  c.publish(dest, 'fresh-rel', 'expiration' => '60000')
  c.publish(dest, 'both-sooner', 'expires' => (now + 60_000).to_s, 'expiration' => '200')
  c.publish(dest, 'both-later', 'expires' => (now + 60_000).to_s, 'expiration' => '120000',
                                'x-custom' => 'kept', receipt: 'sent')
  expect_receipt(c, 'sent')
  sleep 0.5
  c.subscribe(dest, { ack: 'auto' }, 's1')
  c.publish(dest, 'sentinel')
  got = until_sentinel(c)
  eq(got.map(&:body), %w[forever fresh-abs fresh-rel both-later], 'messages still alive')
  eq(got.last.headers['x-custom'], 'kept', 'custom header')
  eq(got.last.headers['expiration'], '120000', 'expiration header as sent')
  quiet_disconnect(c)
  '4 of 9 alive after 500 ms (5 expired: at SEND, while waiting, the sooner of both)'
end

# Bad priority / expires / expiration values: ERROR, then the close.
def sc_bad_headers(port)
  dest = "/queue/rb-bad-#{RUN}"
  [%w[priority high], %w[expires x], %w[expiration -1]].each do |name, value|
    c = conn_v(port, '1.2')
    c.publish(dest, 'never', name => value)
    expect_error_and_close(c, "bad #{name} header")
  end
  c = conn_v(port, '1.2')
  c.subscribe(dest, { ack: 'auto' }, 'check')
  c.publish(dest, 'sentinel')
  eq(until_sentinel(c).map(&:body), [], 'messages queued by refused SENDs')
  quiet_disconnect(c)
  'priority:high, expires:x, expiration:-1 each got ERROR and a close'
end

# Priorities published over STOMP 1.0; consumed over 1.2 with prefetch 1:
# higher first, FIFO within one, default 4, 12 counts as 9, and a NACKed
# message goes back to the head of its priority.
def sc_priority(port)
  dest = "/queue/rb-prio-#{RUN}"
  p = conn10(port)
  [['n-def', nil], ['n-0', 0], ['n-9a', 9], ['n-5', 5], ['n-12', 12], ['n-4', 4], ['n-9b', 9],
   ['n-1', 1]].each do |body, prio|
    p.publish(dest, body, prio.nil? ? {} : { 'priority' => prio.to_s })
  end
  p.publish(dest, 'n-last', 'priority' => '0', receipt: 'sent')
  expect_receipt(p, 'sent')
  c = conn_v(port, '1.2')
  c.subscribe(dest, { ack: 'client-individual', 'prefetch-count' => '1' }, 'p')
  first = next_message(c)
  eq(first.body, 'n-9a', 'first message')
  c.nack(first.headers['ack'])
  again = next_message(c)
  eq(again.body, 'n-9a', 'after NACK: back at the head of priority 9')
  eq(again.headers['redelivered'], 'true', 'redelivered header')
  c.ack(again.headers['ack'])
  got = %w[n-12 n-9b n-5 n-def n-4 n-1 n-0 n-last].map do
    m = next_message(c)
    c.ack(m.headers['ack'])
    m.body
  end
  eq(got, %w[n-12 n-9b n-5 n-def n-4 n-1 n-0 n-last], 'priority order')
  quiet(c)
  quiet_disconnect(c)
  quiet_disconnect(p)
  'priority order 9,9(12),9,5,4(default),4,1,0,0; NACKed one first again'
end

def check_dead_letter(m, reason, from, t0, t1)
  eq(m.headers['x-death-reason'], reason, 'x-death-reason')
  eq(m.headers['x-original-destination'], from, 'x-original-destination')
  at = Integer(m.headers['x-death-time'] || 'none')
  check(at >= t0 - CLOCK_SLACK_MS && at <= t1 + CLOCK_SLACK_MS,
        "x-death-time #{at} not between #{t0} and #{t1}")
  check(m.headers['expires'].nil?, "dead letter has expires: #{m.headers.inspect}")
  check(m.headers['expiration'].nil?, "dead letter has expiration: #{m.headers.inspect}")
end

# NACK requeue:false (RabbitMQ's reject) over 1.2 (by ack id) and 1.1 (by
# message-id): both go to the policy's dead-letter queue as new messages
# with the x-death headers; one rejected again from there is dropped.
def sc_dead_letter(port)
  dlq = '/queue/dl-dead'
  dest = "/queue/dl.rb-#{RUN}"
  seen = {}
  [['1.2', 'poison-12'], ['1.1', 'poison-11']].each do |ver, body|
    c = conn_v(port, ver)
    c.subscribe(dest, { ack: 'client-individual' }, 'w')
    c.publish(dest, body, 'x-order' => '42', 'expiration' => '600000', 'expires' => '0')
    m = next_message(c)
    eq(m.body, body, 'body before the reject')
    t0 = now_ms
    if ver == '1.2'
      c.nack(m.headers['ack'], requeue: 'false')
    else
      c.nack(m.headers['message-id'], subscription: 'w', requeue: 'false')
    end
    c.publish("/topic/rb-sync-#{RUN}", 'x', receipt: 'nacked')
    expect_receipt(c, 'nacked')
    seen[body] = [m.headers['message-id'], t0, now_ms]
    quiet(c)
    quiet_disconnect(c)
  end
  d = conn_v(port, '1.2')
  d.subscribe(dlq, { ack: 'client-individual' }, 'dead')
  got = %w[poison-12 poison-11].map do |body|
    m = next_message(d, what: "dead letter #{body}")
    eq(m.body, body, 'dead letter body (in order)')
    id, t0, t1 = seen[body]
    check_dead_letter(m, 'rejected', dest, t0, t1)
    eq(m.headers['x-order'], '42', 'custom header kept')
    eq(m.headers['destination'], dlq, 'destination')
    check(m.headers['message-id'] && m.headers['message-id'] != id,
          "dead letter message-id #{m.headers['message-id'].inspect} (was #{id})")
    m
  end
  # Rejected again from the dead-letter queue: dropped, not dead-lettered again.
  d.nack(got[0].headers['ack'], requeue: 'false')
  d.ack(got[1].headers['ack'])
  quiet(d)
  d.unsubscribe(dlq, {}, 'dead')
  d.subscribe(dlq, { ack: 'auto' }, 'dead2')
  d.publish(dlq, 'sentinel')
  eq(until_sentinel(d).map(&:body), [], 'dead-letter queue after reject and ack')
  d.subscribe(dest, { ack: 'auto' }, 'orig')
  d.publish(dest, 'sentinel')
  eq(until_sentinel(d).map(&:body), [], 'original queue after the rejects')
  quiet_disconnect(d)
  'two rejects (1.2 ack id, 1.1 message-id) dead-lettered with x-death-*; reject from DLQ dropped'
end

# max-redeliveries = 2 (policy): NACKed three times, or handed to three
# connections that leave without acknowledging, a message dies.
def sc_max_redeliveries(port)
  dlq = '/queue/mr-dead'
  dest = "/queue/mr.rb-nack-#{RUN}"
  c = conn_v(port, '1.2')
  c.subscribe(dest, { ack: 'client-individual' }, 'n')
  c.publish(dest, 'again', 'x-k' => 'v')
  t0 = now_ms
  3.times do |i|
    m = next_message(c, what: "delivery #{i + 1}")
    eq(m.body, 'again', "delivery #{i + 1}")
    eq(m.headers['redelivered'], i.zero? ? nil : 'true', "redelivered on delivery #{i + 1}")
    c.nack(m.headers['ack'])
  end
  quiet(c)
  t1 = now_ms
  quiet_disconnect(c)
  gone = "/queue/mr.rb-gone-#{RUN}"
  p = conn_v(port, '1.2')
  p.publish(gone, 'gone', receipt: 'sent')
  expect_receipt(p, 'sent')
  t2 = now_ms
  3.times do |i|
    k = conn_v(port, i.odd? ? '1.1' : '1.2')
    k.subscribe(gone, { ack: 'client' }, 'g')
    m = next_message(k, what: "delivery #{i + 1} to a leaving consumer")
    eq(m.body, 'gone', 'body')
    quiet_disconnect(k)
  end
  k = conn_v(port, '1.2')
  k.subscribe(gone, { ack: 'auto' }, 'g')
  k.publish(gone, 'sentinel')
  eq(until_sentinel(k).map(&:body), [], 'the queue after three consumers left')
  t3 = now_ms
  quiet_disconnect(k)
  d = conn_v(port, '1.2')
  d.subscribe(dlq, { ack: 'auto' }, 'dead')
  m = next_message(d)
  eq(m.body, 'again', 'first dead letter')
  check_dead_letter(m, 'max-redeliveries', dest, t0, t1)
  eq(m.headers['x-k'], 'v', 'custom header')
  m = next_message(d)
  eq(m.body, 'gone', 'second dead letter')
  check_dead_letter(m, 'max-redeliveries', gone, t2, t3)
  quiet(d)
  quiet_disconnect(d)
  'three NACKs, and three consumers leaving unacked: dead-lettered as max-redeliveries'
end

# Selectors (ActiveMQ's header) on a topic and a queue; a malformed one and
# one on a durable subscription get an ERROR.
def sc_selectors(port)
  topic = "/topic/rb-sel-#{RUN}"
  s = conn_v(port, '1.2')
  sels = {
    'cheap' => "price < 10 AND region IN ('eu', 'us')",
    'likes' => "code LIKE 'A\\_%' ESCAPE '\\'",
    'prio' => 'JMSPriority > 5',
    'nullv' => 'vip IS NULL AND NOT (qty BETWEEN 1 AND 5)'
  }
  sels.each { |id, sel| s.subscribe(topic, { 'selector' => sel }, id) }
  s.publish("/topic/rb-sync-#{RUN}", 'x', receipt: 'subscribed')
  expect_receipt(s, 'subscribed')
  p = conn_v(port, '1.2')
  p.publish(topic, 't1', 'price' => '5', 'region' => 'eu', 'code' => 'A_1', 'priority' => '9',
                         'qty' => '7')
  p.publish(topic, 't2', 'price' => '5', 'region' => 'asia', 'code' => 'AB', 'qty' => '3',
                         'vip' => 'yes')
  p.publish(topic, 't3', 'price' => '50', 'region' => 'us', 'code' => 'A_2', 'priority' => '2')
  p.publish(topic, 't4', 'price' => '8', 'region' => 'us', 'code' => 'X', 'qty' => '0')
  got = Hash.new { |h, k| h[k] = [] }
  7.times do |i|
    m = next_message(s, what: "topic message #{i + 1} of 7")
    got[m.headers['subscription']] << m.body
  end
  quiet(s)
  eq(got, { 'cheap' => %w[t1 t4], 'likes' => %w[t1 t3], 'prio' => %w[t1], 'nullv' => %w[t1 t4] },
     'messages per selector')

  queue = "/queue/rb-sel-#{RUN}"
  red = conn_v(port, '1.2')
  red.subscribe(queue, { 'selector' => "color = 'red'", receipt: 'r' }, 'red')
  expect_receipt(red, 'r')
  heavy = conn_v(port, '1.1')
  heavy.subscribe(queue, { 'selector' => 'weight > 100', receipt: 'h' }, 'heavy')
  expect_receipt(heavy, 'h')
  [%w[a red 50], %w[b blue 500], %w[c green 10], %w[d red 20], %w[e yellow 101]].each do |b, col, w|
    p.publish(queue, b, 'color' => col, 'weight' => w)
  end
  eq(2.times.map { next_message(red).body }, %w[a d], 'red consumer')
  eq(2.times.map { next_message(heavy).body }, %w[b e], 'heavy consumer')
  any = conn_v(port, '1.2')
  any.subscribe(queue, { ack: 'auto' }, 'any')
  eq(next_message(any).body, 'c', 'what no selector took')
  quiet(red, 0.1)
  quiet(heavy, 0.1)
  quiet(any, 0.1)

  bad = conn_v(port, '1.2')
  bad.subscribe(queue, { 'selector' => "color = 'red' AND (" }, 'bad')
  expect_error_and_close(bad, 'invalid selector: position 20: unexpected end')
  dur = conn_v(port, '1.2', 'client-id' => "rb-#{RUN}")
  dur.subscribe(topic, { 'activemq.subscriptionName' => 'news', 'selector' => 'qty = 1' }, 'dur')
  expect_error_and_close(dur, 'selectors on durable subscriptions are not supported')
  'topic: IN, LIKE ESCAPE, JMSPriority, IS NULL, BETWEEN; queue: two selective + one plain; errors'
end

SCENARIOS = {
  'expiry' => :sc_expiry,
  'bad_headers' => :sc_bad_headers,
  'priority' => :sc_priority,
  'dead_letter' => :sc_dead_letter,
  'max_redeliveries' => :sc_max_redeliveries,
  'selectors' => :sc_selectors
}.freeze

run_scenarios('ruby-lifetime', SCENARIOS)
