#!/usr/bin/ruby
# RPC over eftd's temp-queues with the Ruby `stomp` gem (1.4.x), both sides Ruby:
# the pattern RabbitMQ users already have.
#
#   ruby test/clients/ruby_rpc.rb PORT [SCENARIO]
#
#   conn = Stomp::Connection.open('guest', 'guest', '127.0.0.1', port)
#   1.upto(n) { |i| conn.publish('/queue/rpc', i.to_s, 'reply-to' => '/temp-queue/rpc') }
#   n.times { replies << conn.receive.body.to_i }   # never subscribes
#   # the service, on its own connection (thread):
#   srv.subscribe('/queue/rpc'); loop { m = srv.receive; srv.publish(m.headers['reply-to'], ...) }
#
# Runs every scenario (or just SCENARIO) against an eftd on 127.0.0.1:PORT,
# prints "PASS name" / "FAIL name: why" per scenario and ends with
# "ruby-rpc: N passed, N failed"; exits 1 if any failed.  Every wait is bounded.
require_relative 'stomp_helper'

N = 200             # requests per client
REPLY_RE = %r{\A/reply-queue/eft\.gen-[A-Za-z0-9_-]{22}\z}.freeze

# The service: its own connection, in a thread; answers each request to its
# reply-to with body + 1, copying correlation-id when there is one.
def start_service(srv, queue, version)
  if version == '1.0'
    srv.subscribe(queue)
  else
    srv.subscribe(queue, { 'ack' => 'auto' }, 'rpc-service')
  end
  stats = { answered: 0, reply_tos: [], error: nil }
  t = Thread.new do
    loop do
      m = srv.receive
      break if m.nil?
      next unless m.command == 'MESSAGE'

      rt = m.headers['reply-to']
      stats[:reply_tos] << rt
      h = {}
      h['correlation-id'] = m.headers['correlation-id'] if m.headers['correlation-id']
      srv.publish(rt, (m.body.to_i + 1).to_s, h)
      stats[:answered] += 1
    end
  rescue StandardError => e
    stats[:error] = e unless srv.closed?
  end
  t.report_on_exception = false
  $threads << t
  stats
end

# Waits (bounded) for n replies on a connection that never subscribed.
def collect(conn, n, tag)
  replies = []
  subs = Hash.new(0)
  dests = Hash.new(0)
  n.times do |k|
    m = next_message(conn, what: "#{tag} reply #{k + 1} of #{n}")
    replies << m
    subs[m.headers['subscription']] += 1
    dests[m.headers['destination']] += 1
  end
  [replies, subs, dests]
end

def check_replies(replies, subs, dests, n, tag)
  eq(replies.map { |m| m.body.to_i }.sort, (2..n + 1).to_a, "#{tag}: reply bodies")
  eq(subs, { '/temp-queue/rpc' => n }, "#{tag}: subscription headers of the replies")
  eq(dests.size, 1, "#{tag}: replies from one reply queue")
  check(dests.keys.first =~ REPLY_RE, "#{tag}: reply destination #{dests.keys.first.inspect}")
  dests.keys.first
end

# ---------------------------------------------------------------- scenarios

# (1) Exactly the RabbitMQ pattern: STOMP 1.0, Connection.open, no subscribe.
def sc_rpc10(port)
  srv = conn10(port)
  stats = start_service(srv, '/queue/rpc', '1.0')
  conn = conn10(port)
  1.upto(N) { |i| conn.publish('/queue/rpc', i.to_s, 'reply-to' => '/temp-queue/rpc') }
  replies, subs, dests = collect(conn, N, 'client')
  dest = check_replies(replies, subs, dests, N, 'client')
  quiet(conn)
  check(stats[:error].nil?, "service failed: #{stats[:error].inspect}")
  eq(stats[:answered], N, 'requests the service answered')
  eq(stats[:reply_tos].uniq, [dest], 'reply-to the service saw (rewritten, one queue)')
  "#{N} requests, replies 2..#{N + 1} on subscription /temp-queue/rpc via #{dest[0, 26]}..."
end

# (2) The same with the hash config speaking STOMP 1.2, correlation-ids checked.
def sc_rpc12(port)
  q = "/queue/rpc12-#{RUN}"
  srv = conn_v(port, '1.2')
  stats = start_service(srv, q, '1.2')
  conn = conn_v(port, '1.2')
  1.upto(N) do |i|
    conn.publish(q, i.to_s, 'reply-to' => '/temp-queue/rpc', 'correlation-id' => "cid-#{i}")
  end
  replies, subs, dests = collect(conn, N, 'client')
  check_replies(replies, subs, dests, N, 'client')
  replies.each do |m|
    eq(m.headers['correlation-id'], "cid-#{m.body.to_i - 1}", 'correlation-id of a reply')
  end
  quiet(conn)
  check(stats[:error].nil?, "service failed: #{stats[:error].inspect}")
  eq(stats[:answered], N, 'requests the service answered')
  "#{N} requests over STOMP 1.2, correlation-ids intact"
end

# (3) Two clients (1.0 and 1.2) with the same temp-queue name at once, one
# service (1.2): each gets exactly its own replies.
def sc_rpc_two_clients(port)
  q = "/queue/rpc-two-#{RUN}"
  srv = conn_v(port, '1.2')
  stats = start_service(srv, q, '1.2')
  a = conn10(port)
  b = conn_v(port, '1.2')
  1.upto(N) do |i|
    a.publish(q, i.to_s, 'reply-to' => '/temp-queue/rpc', 'correlation-id' => "a-#{i}")
    b.publish(q, (1000 + i).to_s, 'reply-to' => '/temp-queue/rpc', 'correlation-id' => "b-#{i}")
  end
  ra, sa, da = collect(a, N, 'client a')
  rb, sb, db = collect(b, N, 'client b')
  dest_a = check_replies(ra, sa, da, N, 'client a')
  eq(rb.map { |m| m.body.to_i }.sort, (1002..1001 + N).to_a, 'client b: reply bodies')
  eq(sb, { '/temp-queue/rpc' => N }, 'client b: subscription headers')
  check(ra.all? { |m| m.headers['correlation-id'].start_with?('a-') }, 'client a got b replies')
  check(rb.all? { |m| m.headers['correlation-id'].start_with?('b-') }, 'client b got a replies')
  check(db.size == 1 && db.keys.first != dest_a, "b's reply queue #{db.inspect} vs a's #{dest_a}")
  quiet(a)
  quiet(b, 0.1)
  eq(stats[:answered], 2 * N, 'requests the service answered')
  'same temp-queue name on two connections, replies kept apart'
end

SCENARIOS = {
  'rpc10' => :sc_rpc10,
  'rpc12' => :sc_rpc12,
  'rpc_two_clients' => :sc_rpc_two_clients
}.freeze

run_scenarios('ruby-rpc', SCENARIOS)
