#!/usr/bin/ruby
# Real-client checks of eftd with the Ruby `stomp` gem (1.4.x).
#
#   ruby test/clients/ruby_client.rb PORT [SCENARIO]
#
# Runs every scenario (or just SCENARIO) against an eftd already listening on
# 127.0.0.1:PORT, prints "PASS name" / "FAIL name: why" per scenario and ends
# with "ruby: N passed, N failed"; exits 1 if any failed.  Every wait is
# bounded.  EFT_CLIENT_DEBUG=1 prints each frame the gem sends and receives.
require_relative 'stomp_helper'

# Proves a queue holds nothing for this connection: subscribes (auto), sends
# a sentinel, and the sentinel must be the next (only) message.
def expect_queue_empty(conn, dest, sub_id)
  conn.subscribe(dest, { ack: 'auto' }, sub_id)
  conn.publish(dest, 'sentinel', { 'x-sentinel' => 'yes' })
  m = next_message(conn)
  unless m.body == 'sentinel'
    raise Failure, "#{dest} was expected to be empty, but got #{m.headers.inspect} #{m.body.inspect}"
  end
end

# ---------------------------------------------------------------- scenarios

# (1) STOMP 1.0 via Connection.open: 100 messages, in order, headers intact.
def sc_stomp10(port)
  c = conn10(port)
  dest = "/queue/rb-stomp10-#{RUN}"
  n = 100
  n.times do |i|
    c.publish(dest, "message #{i}", 'x-custom' => "value:#{i}:with:colons", 'x-seq' => i.to_s)
  end
  c.subscribe(dest, ack: 'auto')
  ids = {}
  n.times do |i|
    m = next_message(c)
    eq(m.body, "message #{i}", "body of message #{i}")
    eq(m.headers['destination'], dest, "destination of message #{i}")
    eq(m.headers['x-custom'], "value:#{i}:with:colons", "x-custom of message #{i}")
    eq(m.headers['x-seq'], i.to_s, "x-seq of message #{i}")
    if m.headers['content-length']
      eq(m.headers['content-length'], "message #{i}".bytesize.to_s, "content-length of message #{i}")
    end
    mid = m.headers['message-id']
    check(mid && !mid.empty?, "message #{i} has no message-id: #{m.headers.inspect}")
    check(!ids.key?(mid), "message-id #{mid} repeated")
    ids[mid] = true
  end
  # A 1.0 UNSUBSCRIBE names the destination only; after it nothing more arrives.
  c.unsubscribe(dest, receipt: 'unsub-1')
  expect_receipt(c, 'unsub-1')
  c.publish(dest, 'after unsubscribe', receipt: 'send-after')
  expect_receipt(c, 'send-after')
  sleep 0.3
  extra = c.poll
  check(extra.nil?, "got a frame after UNSUBSCRIBE: #{extra && [extra.command, extra.headers, extra.body].inspect}")
  c.disconnect(receipt: 'bye-10')
  $open_conns.delete(c)
  r = c.disconnect_receipt
  check(r, 'no RECEIPT for DISCONNECT')
  eq(r.command, 'RECEIPT', 'DISCONNECT answer')
  eq(r.headers['receipt-id'], 'bye-10', 'DISCONNECT receipt-id')
  # The message published after UNSUBSCRIBE is still queued for the next consumer.
  c2 = conn10(port)
  c2.subscribe(dest)
  m = next_message(c2)
  eq(m.body, 'after unsubscribe', 'message left on the queue')
  quiet_disconnect(c2)
  "#{n} messages in order, unsubscribe by destination, disconnect receipt"
end

# (2a) STOMP 1.2, client-individual: ack only the even messages; after a
# reconnect exactly the odd ones come back, marked redelivered.
def sc_ack12_individual(port)
  dest = "/queue/rb-ack12-individual-#{RUN}"
  n = 10
  c = conn_v(port, '1.2')
  n.times { |i| c.publish(dest, "ind #{i}", 'x-i' => i.to_s) }
  c.subscribe(dest, { ack: 'client-individual' }, 'sub-ind')
  msgs = n.times.map do |i|
    m = next_message(c)
    eq(m.body, "ind #{i}", "body #{i}")
    eq(m.headers['subscription'], 'sub-ind', "subscription header of message #{i}")
    check(m.headers['ack'] && !m.headers['ack'].empty?, "1.2 MESSAGE #{i} in client-individual mode has no ack header: #{m.headers.inspect}")
    check(m.headers['redelivered'].nil?, "first delivery of #{i} marked redelivered")
    m
  end
  # Ack the even ones, newest first: with client-individual each ACK covers one message.
  msgs.select.with_index { |_m, i| i.even? }.reverse_each { |m| c.ack(m.headers['ack']) }
  c.publish("/topic/rb-sync-#{RUN}", 'x', receipt: 'acks-done')
  expect_receipt(c, 'acks-done')
  quiet_disconnect(c)

  c2 = conn_v(port, '1.2')
  c2.subscribe(dest, { ack: 'client-individual' }, 'sub-ind2')
  odd = (0...n).select(&:odd?).map { |i| "ind #{i}" }
  got = odd.map do
    m = next_message(c2)
    eq(m.headers['redelivered'], 'true', "redelivered header on #{m.body}")
    eq(m.headers['subscription'], 'sub-ind2', 'subscription header on redelivery')
    c2.ack(m.headers['ack'])
    m.body
  end
  eq(got.sort, odd.sort, 'redelivered set (only the unacked odd messages)')
  eq(got, odd, 'redelivery order')
  c2.unsubscribe(dest, {}, 'sub-ind2')
  expect_queue_empty(c2, dest, 'sub-check')
  quiet_disconnect(c2)

  # And a fully acked queue stays empty across a reconnect.
  c3 = conn_v(port, '1.2')
  expect_queue_empty(c3, dest, 'sub-check3')
  quiet_disconnect(c3)
  'evens acked individually; only odds redelivered with redelivered:true'
end

# (2b) STOMP 1.2, client (cumulative) mode: receive 5, ACK the third (which
# covers 1..3), disconnect: 4 and 5 come back redelivered; nothing else.
def sc_ack12_client(port)
  dest = "/queue/rb-ack12-client-#{RUN}"
  c = conn_v(port, '1.2')
  5.times { |i| c.publish(dest, "cl #{i}") }
  c.subscribe(dest, { ack: 'client' }, 'sub-cl')
  msgs = 5.times.map do |i|
    m = next_message(c)
    eq(m.body, "cl #{i}", "body #{i}")
    check(m.headers['ack'], "client-mode MESSAGE without ack header: #{m.headers.inspect}")
    m
  end
  c.ack(msgs[2].headers['ack'], receipt: 'ack-3')
  expect_receipt(c, 'ack-3')
  quiet_disconnect(c)

  c2 = conn_v(port, '1.2')
  c2.subscribe(dest, { ack: 'client' }, 'sub-cl2')
  got = 2.times.map do
    m = next_message(c2)
    eq(m.headers['redelivered'], 'true', "redelivered header on #{m.body}")
    m
  end
  eq(got.map(&:body), ['cl 3', 'cl 4'], 'messages after the cumulative ACK')
  # Nothing acked this time either: a third connection gets them again.
  quiet_disconnect(c2)

  c3 = conn_v(port, '1.2')
  c3.subscribe(dest, { ack: 'client' }, 'sub-cl3')
  got = 2.times.map { next_message(c3) }
  eq(got.map(&:body), ['cl 3', 'cl 4'], 'unacked messages redelivered again')
  got.each { |m| eq(m.headers['redelivered'], 'true', "redelivered on second redelivery of #{m.body}") }
  c3.ack(got[1].headers['ack'])
  c3.unsubscribe(dest, {}, 'sub-cl3')
  expect_queue_empty(c3, dest, 'sub-check')
  quiet_disconnect(c3)
  'cumulative ACK; unacked redelivered with redelivered:true to new connections'
end

# (2c) STOMP 1.0 client ack by message-id; unacked → redelivered.
def sc_ack10_client(port)
  dest = "/queue/rb-ack10-#{RUN}"
  c = conn10(port)
  3.times { |i| c.publish(dest, "a10 #{i}") }
  c.subscribe(dest, ack: 'client')
  msgs = 3.times.map { |i| m = next_message(c); eq(m.body, "a10 #{i}", "body #{i}"); m }
  c.ack(msgs[0].headers['message-id'], receipt: 'ack10')
  expect_receipt(c, 'ack10')
  quiet_disconnect(c)
  c2 = conn10(port)
  c2.subscribe(dest, ack: 'auto')
  got = 2.times.map { next_message(c2) }
  eq(got.map(&:body), ['a10 1', 'a10 2'], '1.0 redelivery after ACK of the first')
  got.each { |m| eq(m.headers['redelivered'], 'true', "redelivered on #{m.body}") }
  c2.unsubscribe(dest)
  expect_queue_empty(c2, dest, nil)
  quiet_disconnect(c2)
  '1.0 ACK by message-id, rest redelivered'
end

# (2d) STOMP 1.1 NACK, ACK with message-id + subscription.
def sc_nack11(port)
  dest = "/queue/rb-nack11-#{RUN}"
  c = conn_v(port, '1.1')
  c.subscribe(dest, { ack: 'client-individual' }, 'sub-n')
  c.publish(dest, 'nack me')
  m = next_message(c)
  eq(m.body, 'nack me', 'body')
  eq(m.headers['subscription'], 'sub-n', 'subscription')
  c.nack(m.headers['message-id'], subscription: 'sub-n')
  m2 = next_message(c)
  eq(m2.body, 'nack me', 'body after NACK')
  eq(m2.headers['redelivered'], 'true', 'redelivered after NACK')
  c.ack(m2.headers['message-id'], subscription: 'sub-n', receipt: 'ack11')
  expect_receipt(c, 'ack11')
  c.unsubscribe(dest, {}, 'sub-n')
  expect_queue_empty(c, dest, 'sub-e')
  quiet_disconnect(c)
  'NACK redelivers, ACK by message-id+subscription'
end

# (3) transactions: abort drops, commit delivers (and not before).
def sc_transactions(port)
  dest = "/queue/rb-tx-#{RUN}"
  c = conn_v(port, '1.2')
  c.subscribe(dest, { ack: 'auto' }, 'sub-tx')
  c.begin('tx-abort')
  3.times { |i| c.publish(dest, "aborted #{i}", transaction: 'tx-abort') }
  c.abort('tx-abort')
  c.publish(dest, 'marker 1')
  m = next_message(c)
  eq(m.body, 'marker 1', 'first message after an aborted transaction')

  c.begin('tx-commit')
  3.times { |i| c.publish(dest, "committed #{i}", transaction: 'tx-commit', 'x-i' => i.to_s) }
  c.publish(dest, 'marker 2')
  m = next_message(c)
  eq(m.body, 'marker 2', 'first message while a transaction is open (its SENDs must wait for COMMIT)')
  c.commit('tx-commit')
  3.times do |i|
    m = next_message(c)
    eq(m.body, "committed #{i}", "committed message #{i}")
    eq(m.headers['x-i'], i.to_s, "header of committed message #{i}")
    check(m.headers['transaction'].nil?, "MESSAGE carries the SEND's transaction header: #{m.headers.inspect}")
  end
  c.publish(dest, 'marker 3')
  eq(next_message(c).body, 'marker 3', 'nothing extra after the commit')

  # An ACK inside an aborted transaction is undone: the message comes back.
  dest2 = "/queue/rb-tx-ack-#{RUN}"
  c.publish(dest2, 'tx-acked')
  c.subscribe(dest2, { ack: 'client-individual' }, 'sub-txack')
  m = next_message(c)
  eq(m.body, 'tx-acked', 'body')
  c.begin('tx-ack')
  c.ack(m.headers['ack'], transaction: 'tx-ack')
  c.abort('tx-ack', receipt: 'abort-ack')
  expect_receipt(c, 'abort-ack')
  quiet_disconnect(c)
  c2 = conn_v(port, '1.2')
  c2.subscribe(dest2, { ack: 'client-individual' }, 'sub-txack2')
  m = next_message(c2)
  eq(m.body, 'tx-acked', 'message whose ACK was aborted')
  eq(m.headers['redelivered'], 'true', 'redelivered')
  c2.begin('tx-ack2')
  c2.ack(m.headers['ack'], transaction: 'tx-ack2')
  c2.commit('tx-ack2', receipt: 'commit-ack')
  expect_receipt(c2, 'commit-ack')
  quiet_disconnect(c2)
  c3 = conn_v(port, '1.2')
  expect_queue_empty(c3, dest2, 'sub-e')
  quiet_disconnect(c3)
  'abort drops, commit delivers in order, transactional ACK abort/commit'
end

# (4) receipts on many frames, in 1.0 and 1.2.
def sc_receipts(port)
  c = conn_v(port, '1.2')
  dest = "/queue/rb-receipts-#{RUN}"
  c.publish(dest, 'r', receipt: 'r-send')
  expect_receipt(c, 'r-send')
  c.subscribe(dest, { receipt: 'r-sub', ack: 'client-individual' }, 's1')
  # The MESSAGE and the SUBSCRIBE's RECEIPT may come in either order.
  frames = 2.times.map { next_frame(c) }
  cmds = frames.map(&:command).sort
  eq(cmds, %w[MESSAGE RECEIPT], 'frames after SUBSCRIBE with receipt')
  r = frames.find { |f| f.command == 'RECEIPT' }
  eq(r.headers['receipt-id'], 'r-sub', 'SUBSCRIBE receipt-id')
  m = frames.find { |f| f.command == 'MESSAGE' }
  c.ack(m.headers['ack'], receipt: 'r-ack')
  expect_receipt(c, 'r-ack')
  c.begin('t1', receipt: 'r-begin')
  expect_receipt(c, 'r-begin')
  c.commit('t1', receipt: 'r-commit')
  expect_receipt(c, 'r-commit')
  c.unsubscribe(dest, { receipt: 'r-unsub' }, 's1')
  expect_receipt(c, 'r-unsub')
  # a receipt id with characters that 1.2 escapes
  c.publish(dest, 'odd', receipt: 'r:odd\\id')
  expect_receipt(c, 'r:odd\\id')
  c.disconnect(receipt: 'r-bye')
  $open_conns.delete(c)
  r = c.disconnect_receipt
  check(r, 'no RECEIPT for DISCONNECT')
  eq(r.headers['receipt-id'], 'r-bye', 'DISCONNECT receipt-id')

  c10 = conn10(port)
  c10.publish(dest, 'r10', receipt: 'r10-send')
  expect_receipt(c10, 'r10-send')
  c10.disconnect(receipt: 'r10-bye')
  $open_conns.delete(c10)
  eq(c10.disconnect_receipt && c10.disconnect_receipt.headers['receipt-id'], 'r10-bye', '1.0 DISCONNECT receipt')
  'SEND/SUBSCRIBE/ACK/BEGIN/COMMIT/UNSUBSCRIBE/DISCONNECT receipts (1.2 and 1.0)'
end

# Headers sent by a 1.0 client (no escaping) reach a 1.2 client correctly
# escaped on the wire (the gem unescapes them), and the other way round.
def sc_cross_version(port)
  dest = "/queue/rb-cross-#{RUN}"
  p10 = conn10(port)
  v10 = 'a:b:c'
  p10.publish(dest, 'from 1.0', 'x-colon' => v10, receipt: 'x1')
  expect_receipt(p10, 'x1')
  c12 = conn_v(port, '1.2')
  c12.subscribe(dest, { ack: 'auto' }, 'cx')
  m = next_message(c12)
  eq(m.body, 'from 1.0', 'body')
  eq(m.headers['x-colon'], v10, '1.0 header value seen by a 1.2 client')
  c12.publish(dest + '-back', 'from 1.2', 'x-colon' => 'd:e', 'x-nl' => "line1\nline2")
  c12.publish("/topic/rb-sync-#{RUN}", 'x', receipt: 'x2')
  expect_receipt(c12, 'x2')
  quiet_disconnect(c12)
  p10.subscribe(dest + '-back')
  m = next_message(p10)
  eq(m.body, 'from 1.2', 'body')
  eq(m.headers['x-colon'], 'd:e', '1.2 escaped colon seen by a 1.0 client')
  quiet_disconnect(p10)
  'header values survive 1.0 <-> 1.2'
end

def pop_within(queue, secs, what)
  Timeout.timeout(secs, Failure, "timed out waiting for #{what}") { queue.pop }
end

def new_client(port, version)
  cl = Timeout.timeout(WAIT, Failure, "Stomp::Client did not connect within #{WAIT}s") do
    Stomp::Client.new(hash_params(port, version))
  end
  track(cl)
  check(cl.open?, 'client not open')
  eq(cl.protocol, version, 'client protocol')
  cl
end

def sync_client(client, tag)
  done = Queue.new
  client.publish("/topic/rb-sync-ignore-#{RUN}", 'sync') { |r| done << r }
  r = pop_within(done, WAIT, "receipt #{tag}")
  eq(r.command, 'RECEIPT', "sync #{tag}")
end

# (5a) Stomp::Client: threaded listener, client ack mode, 50 messages.
def sc_client_ack(port)
  dest = "/queue/rb-client-#{RUN}"
  client = new_client(port, '1.2')
  got = Queue.new
  errors = Queue.new
  client.subscribe(dest, ack: 'client', id: 'cl-sub') do |msg|
    begin
      client.acknowledge(msg) # before handing it over: the main thread then syncs
      got << msg
    rescue Exception => e # rubocop:disable Lint/RescueException
      errors << e
    end
  end
  n = 50
  n.times { |i| client.publish(dest, "client msg #{i}", 'x-n' => i.to_s) }
  n.times do |i|
    m = pop_within(got, WAIT, "message #{i}")
    eq(m.command, 'MESSAGE', 'command')
    eq(m.body, "client msg #{i}", "body #{i}")
    eq(m.headers['x-n'], i.to_s, "x-n #{i}")
    eq(m.headers['subscription'], 'cl-sub', 'subscription')
  end
  raise Failure, "listener raised: #{errors.pop.inspect}" unless errors.empty?
  sync_client(client, 'after acks')
  check(got.empty?, "extra messages: #{got.size}")
  Timeout.timeout(5, Failure, 'client close took too long') { client.close }
  $open_conns.delete(client)

  c = conn_v(port, '1.2')
  expect_queue_empty(c, dest, 'after-client')
  quiet_disconnect(c)
  "#{n} messages to a Stomp::Client listener, all acked"
end

# (5b) Topic fan-out to two Stomp::Client subscribers.
def sc_client_topic(port)
  topic = "/topic/rb-fanout-#{RUN}"
  subs = 2.times.map do |k|
    cl = new_client(port, '1.2')
    q = Queue.new
    cl.subscribe(topic, id: "fan-#{k}") { |m| q << m }
    sync_client(cl, "subscriber #{k}") # its SUBSCRIBE has been processed
    [cl, q]
  end
  pub = conn_v(port, '1.2')
  n = 20
  n.times { |i| pub.publish(topic, "fan #{i}", 'x-i' => i.to_s) }
  pub.publish(topic, 'fan end')
  subs.each_with_index do |(_cl, q), k|
    n.times do |i|
      m = pop_within(q, WAIT, "subscriber #{k} message #{i}")
      eq(m.body, "fan #{i}", "subscriber #{k} body #{i}")
      eq(m.headers['x-i'], i.to_s, "subscriber #{k} header #{i}")
      eq(m.headers['subscription'], "fan-#{k}", "subscriber #{k} subscription")
      eq(m.headers['destination'], topic, 'destination')
    end
    eq(pop_within(q, WAIT, "subscriber #{k} end").body, 'fan end', "subscriber #{k}: message after the #{n}")
  end
  quiet_disconnect(pub)
  subs.each do |cl, _q|
    Timeout.timeout(5, Failure, 'client close took too long') { cl.close }
    $open_conns.delete(cl)
  end
  "#{n} topic messages to each of 2 Stomp::Client subscribers"
end

# (6) STOMP 1.1 with heart-beats 1000,1000: idle ~3.5 s, still connected and working.
def sc_heartbeats(port)
  c = conn_v(port, '1.1', 'heart-beat' => '1000,1000')
  hb = c.connection_frame.headers['heart-beat']
  check(hb =~ /\A\d+,\d+\z/, "CONNECTED heart-beat header: #{hb.inspect}")
  sx, sy = hb.split(',').map(&:to_i)
  check(sx.positive? && sx <= 1000, "server send interval #{sx} (client asked to receive every 1000 ms)")
  check(sy.positive? && sy <= 1000, "server receive interval #{sy} (client offered 1000 ms)")
  sleep 3.5
  check(c.open?, 'connection closed while idle')
  check(c.hbrecv_count >= 1, "no heart-beats received from eftd in 3.5 s (count #{c.hbrecv_count})")
  check(c.hbsend_count >= 2, "gem sent only #{c.hbsend_count} heart-beats")
  dest = "/queue/rb-hb-#{RUN}"
  c.subscribe(dest, { ack: 'auto' }, 'hb-sub')
  c.publish(dest, 'still alive', receipt: 'hb-r')
  frames = 2.times.map { next_frame(c) }
  eq(frames.map(&:command).sort, %w[MESSAGE RECEIPT], 'frames after idle')
  eq(frames.find { |f| f.command == 'MESSAGE' }.body, 'still alive', 'body after idle')
  quiet_disconnect(c)
  "heart-beat #{hb}; idle 3.5 s; received #{c.hbrecv_count}, sent #{c.hbsend_count} beats"
end

# STOMP 1.2 with CRLF line endings (the gem's usecrlf option).
def sc_crlf12(port)
  dest = "/queue/rb-crlf-#{RUN}"
  c = track(Timeout.timeout(WAIT, Failure, 'no CONNECTED (1.2, CRLF)') do
    Stomp::Connection.new(hash_params(port, '1.2').merge(usecrlf: true))
  end)
  eq(c.protocol, '1.2', 'protocol')
  c.subscribe(dest, { ack: 'client-individual', receipt: 'crlf-sub' }, 'crlf')
  expect_receipt(c, 'crlf-sub')
  5.times { |i| c.publish(dest, "crlf #{i}", 'x-i' => i.to_s, 'x-c' => 'a:b') }
  5.times do |i|
    m = next_message(c)
    eq(m.body, "crlf #{i}", "body #{i}")
    eq(m.headers['x-i'], i.to_s, "x-i #{i}")
    eq(m.headers['x-c'], 'a:b', 'escaped colon')
    c.ack(m.headers['ack'])
  end
  c.disconnect(receipt: 'crlf-bye')
  $open_conns.delete(c)
  eq(c.disconnect_receipt && c.disconnect_receipt.headers['receipt-id'], 'crlf-bye', 'DISCONNECT receipt')
  c2 = conn_v(port, '1.2')
  expect_queue_empty(c2, dest, 'e')
  quiet_disconnect(c2)
  'CRLF frames: subscribe, 5 messages, acks, disconnect receipt'
end

# Binary bodies (every byte value, NULs included) and UTF-8 headers, 1.0 and 1.2.
def sc_binary(port)
  bin = (0..255).map(&:chr).join.b * 4
  c10 = conn10(port)
  c12 = conn_v(port, '1.2')
  # each connection reads the message the other one sent
  c10.publish("/queue/rb-binary-12-#{RUN}", bin, 'x-utf8' => 'héllo ✓', receipt: 'bin10')
  expect_receipt(c10, 'bin10')
  c12.publish("/queue/rb-binary-10-#{RUN}", bin, 'x-utf8' => 'wörld ✓', receipt: 'bin12')
  expect_receipt(c12, 'bin12')
  [[c10, nil, "/queue/rb-binary-10-#{RUN}", 'wörld ✓'], [c12, 'b12', "/queue/rb-binary-12-#{RUN}", 'héllo ✓']].each do |c, id, dest, want|
    c.subscribe(dest, { ack: 'auto' }, id)
    m = next_message(c)
    eq(m.headers['destination'], dest, 'destination')
    eq(m.body.b.bytesize, bin.bytesize, 'binary body length')
    check(m.body.b == bin, 'binary body bytes differ')
    eq(m.headers['content-length'], bin.bytesize.to_s, 'content-length of a binary body')
    eq(m.headers['x-utf8'].dup.force_encoding('UTF-8'), want, 'UTF-8 header')
  end
  quiet_disconnect(c10)
  quiet_disconnect(c12)
  '1 KB of all byte values 1.0 -> 1.2 and 1.2 -> 1.0, UTF-8 headers'
end

# The classic 1.0 Stomp::Client (positional arguments), client ack mode.
def sc_client10(port)
  dest = "/queue/rb-client10-#{RUN}"
  client = track(Timeout.timeout(WAIT, Failure, 'Stomp::Client (1.0) did not connect') do
    if TLS_CA # the positional form has no TLS: the hash form, 1.0 all the same
      Stomp::Client.new(hosts: [{ login: 'guest', passcode: 'guest', host: HOST, port: port,
                                  ssl: ssl_param }], reliable: false)
    else
      Stomp::Client.new('guest', 'guest', HOST, port)
    end
  end)
  eq(client.protocol, Stomp::SPL_10, 'client protocol')
  got = Queue.new
  client.subscribe(dest, ack: 'client') do |msg|
    client.acknowledge(msg)
    got << msg
  end
  n = 50
  n.times { |i| client.publish(dest, "c10 #{i}") }
  n.times { |i| eq(pop_within(got, WAIT, "message #{i}").body, "c10 #{i}", "body #{i}") }
  sync_client(client, 'after acks')
  Timeout.timeout(5, Failure, 'client close took too long') { client.close }
  $open_conns.delete(client)
  c = conn10(port)
  expect_queue_empty(c, dest, nil)
  quiet_disconnect(c)
  "#{n} messages to a 1.0 Stomp::Client, all acked"
end

# Two Stomp::Client consumers on one queue: each message to exactly one.
def sc_client_queue_share(port)
  dest = "/queue/rb-share-#{RUN}"
  got = Queue.new
  clients = 2.times.map do |k|
    cl = new_client(port, '1.2')
    cl.subscribe(dest, id: "share-#{k}", ack: 'client-individual') do |m|
      cl.acknowledge(m)
      got << [k, m.body]
    end
    sync_client(cl, "consumer #{k}")
    cl
  end
  pub = conn_v(port, '1.2')
  n = 40
  n.times { |i| pub.publish(dest, "share #{i}") }
  seen = n.times.map { |i| pop_within(got, WAIT, "message #{i} of #{n}") }
  eq(seen.map(&:last).sort, n.times.map { |i| "share #{i}" }.sort, 'each message delivered once')
  per = seen.group_by(&:first).transform_values(&:size)
  check(per.size == 2, "all #{n} messages went to one consumer: #{per.inspect}")
  [0, 1].each do |k|
    mine = seen.select { |kk, _| kk == k }.map { |_, b| b.split.last.to_i }
    eq(mine, mine.sort, "consumer #{k} got its messages in queue order")
  end
  clients.each { |cl| sync_client(cl, 'after acks') }
  check(got.empty?, "duplicate deliveries: #{got.size} extra")
  clients.each do |cl|
    Timeout.timeout(5, Failure, 'client close took too long') { cl.close }
    $open_conns.delete(cl)
  end
  expect_queue_empty(pub, dest, 'e')
  quiet_disconnect(pub)
  "#{n} messages shared #{per.values.join('/')} between 2 consumers, none twice"
end

# A consumer that falls behind: 1000 x 8 KB (8 MB, well past eftd's 512 KB
# per-connection output high-water mark) sent while it is not reading; then
# it must get every message, in order, with client-individual acks.
def sc_bulk(port)
  dest = "/queue/rb-bulk-#{RUN}"
  n = 1000
  cons = conn_v(port, '1.2')
  cons.subscribe(dest, { ack: 'client-individual', receipt: 'bulk-sub' }, 'bulk')
  expect_receipt(cons, 'bulk-sub')
  pub = conn_v(port, '1.2')
  pad = 'x' * 8000
  n.times { |i| pub.publish(dest, "#{i} #{pad}", 'x-i' => i.to_s) }
  pub.publish("/topic/rb-sync-#{RUN}", 'x', receipt: 'bulk-pub')
  expect_receipt(pub, 'bulk-pub')
  n.times do |i|
    m = next_message(cons)
    eq(m.headers['x-i'], i.to_s, "message #{i} of #{n}")
    eq(m.body, "#{i} #{pad}", "body #{i}")
    cons.ack(m.headers['ack'])
  end
  cons.publish("/topic/rb-sync-#{RUN}", 'x', receipt: 'bulk-acked')
  expect_receipt(cons, 'bulk-acked')
  quiet_disconnect(cons)
  expect_queue_empty(pub, dest, 'e')
  quiet_disconnect(pub)
  "#{n} x 8 KB to a consumer that was not reading, all in order"
end

# Wildcard subscriptions through Stomp::Client: ActiveMQ's * and >, and
# RabbitMQ's #, each subscription getting what matches, once, with the
# name it was sent to.
def sc_wildcards(port)
  base = "rb-wild-#{RUN}"
  cl = new_client(port, '1.2')
  q = Queue.new
  pats = { 'star' => "#{base}.price.*", 'amq' => "#{base}.price.>", 'rmq' => "#{base}.#" }
  pats.each { |sid, pat| cl.subscribe("/topic/#{pat}", id: sid) { |m| q << m } }
  sync_client(cl, 'wildcard subscriber')
  pub = conn_v(port, '1.2')
  names = ["#{base}.price.ACME", "#{base}.price.ACME.ny", base, "#{base}.bond", "x.#{base}"]
  names.each { |n| pub.publish("/topic/#{n}", n) }
  want = [['star', names[0]], ['amq', names[0]], ['rmq', names[0]], ['amq', names[1]],
          ['rmq', names[1]], ['rmq', names[2]], ['rmq', names[3]]].sort
  got = want.size.times.map do |i|
    m = pop_within(q, WAIT, "wildcard delivery #{i + 1} of #{want.size}")
    eq(m.headers['destination'], "/topic/#{m.body}", 'destination is the name sent to')
    [m.headers['subscription'], m.body]
  end
  eq(got.sort, want, 'deliveries (subscription, name)')
  pub.publish("/topic/#{base}.end", 'end')
  eq(pop_within(q, WAIT, 'the end marker').body, 'end', 'nothing more came before the end marker')
  quiet_disconnect(pub)
  Timeout.timeout(5, Failure, 'client close took too long') { cl.close }
  $open_conns.delete(cl)
  "#{want.size} deliveries to *, > and # subscriptions on one Stomp::Client"
end

SCENARIOS = {
  'stomp10' => :sc_stomp10,
  'ack12_individual' => :sc_ack12_individual,
  'ack12_client' => :sc_ack12_client,
  'ack10_client' => :sc_ack10_client,
  'nack11' => :sc_nack11,
  'transactions' => :sc_transactions,
  'receipts' => :sc_receipts,
  'cross_version' => :sc_cross_version,
  'client_ack' => :sc_client_ack,
  'client_topic' => :sc_client_topic,
  'heartbeats' => :sc_heartbeats,
  'crlf12' => :sc_crlf12,
  'binary' => :sc_binary,
  'client10' => :sc_client10,
  'client_queue_share' => :sc_client_queue_share,
  'bulk' => :sc_bulk,
  'wildcards' => :sc_wildcards
}.freeze

run_scenarios('ruby', SCENARIOS)
