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
$stdout.sync = true
$stderr.sync = true

require 'stomp'
require 'timeout'

HOST = '127.0.0.1'
WAIT = 10           # seconds for any single expected frame
SCENARIO_LIMIT = 40 # seconds for a whole scenario
N = 200             # requests per client
REPLY_RE = %r{\A/reply-queue/eft\.gen-[A-Za-z0-9_-]{22}\z}.freeze
RUN = "#{Process.pid}-#{rand(1_000_000)}"

class Failure < StandardError; end

def check(cond, what)
  raise Failure, what unless cond
end

def eq(actual, expected, what)
  return if actual == expected

  raise Failure, "#{what}: expected #{expected.inspect}, got #{actual.inspect}"
end

$open_conns = []
$threads = []

def track(conn)
  $open_conns << conn
  conn
end

# The positional form RabbitMQ examples use: STOMP 1.0, not reliable.
def open10(port)
  c = Timeout.timeout(WAIT, Failure, "no CONNECTED (1.0) within #{WAIT}s") do
    Stomp::Connection.open('guest', 'guest', HOST, port)
  end
  track(c)
  eq(c.protocol, Stomp::SPL_10, 'protocol')
  c
end

# The hash form, for STOMP 1.2.
def open12(port)
  params = {
    hosts: [{ login: 'guest', passcode: 'guest', host: HOST, port: port, ssl: false }],
    reliable: false, connect_timeout: 5, connread_timeout: 5, parse_timeout: 5,
    connect_headers: { 'accept-version' => '1.2', 'host' => '/' }
  }
  c = Timeout.timeout(WAIT, Failure, "no CONNECTED (1.2) within #{WAIT}s") { Stomp::Connection.new(params) }
  track(c)
  eq(c.protocol, Stomp::SPL_12, 'protocol')
  c
end

def next_message(conn, what, secs = WAIT)
  f = Timeout.timeout(secs, Failure, "no frame within #{secs}s waiting for #{what}") { conn.receive }
  raise Failure, "connection closed waiting for #{what}" if f.nil?
  raise Failure, "ERROR frame waiting for #{what}: #{f.headers.inspect} #{f.body.inspect}" if f.command == 'ERROR'

  eq(f.command, 'MESSAGE', "frame while waiting for #{what}")
  f
end

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
    m = next_message(conn, "#{tag} reply #{k + 1} of #{n}")
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

def quiet(conn, secs = 0.3)
  f = nil
  begin
    Timeout.timeout(secs) { f = conn.receive }
  rescue Timeout::Error
    return
  end
  raise Failure, "unexpected frame: #{f&.command} #{f&.headers.inspect} #{f&.body.inspect}"
end

# ---------------------------------------------------------------- scenarios

# (1) Exactly the RabbitMQ pattern: STOMP 1.0, Connection.open, no subscribe.
def sc_rpc10(port)
  srv = open10(port)
  stats = start_service(srv, '/queue/rpc', '1.0')
  conn = open10(port)
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
  srv = open12(port)
  stats = start_service(srv, q, '1.2')
  conn = open12(port)
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
  srv = open12(port)
  stats = start_service(srv, q, '1.2')
  a = open10(port)
  b = open12(port)
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

def close_all
  $open_conns.each do |c|
    begin
      Timeout.timeout(3) { c.disconnect if c.open? }
    rescue Exception # rubocop:disable Lint/RescueException
      nil
    end
  end
  $open_conns.clear
  $threads.each do |t|
    t.join(3) || t.kill
  end
  $threads.clear
end

def main
  port = Integer(ARGV[0] || '')
  names = ARGV[1] ? [ARGV[1]] : SCENARIOS.keys
  passed = failed = 0
  names.each do |name|
    meth = SCENARIOS[name]
    unless meth
      puts "FAIL #{name}: no such scenario (have #{SCENARIOS.keys.join(', ')})"
      failed += 1
      next
    end
    t0 = Time.now
    begin
      note = Timeout.timeout(SCENARIO_LIMIT, Failure, "scenario took over #{SCENARIO_LIMIT}s") do
        send(meth, port)
      end
      puts format('PASS %s (%.2fs): %s', name, Time.now - t0, note)
      passed += 1
    rescue Exception => e # rubocop:disable Lint/RescueException
      raise if e.is_a?(Interrupt)

      puts format('FAIL %s (%.2fs): %s: %s', name, Time.now - t0, e.class, e.message)
      e.backtrace.first(8).each { |l| puts "    #{l}" }
      failed += 1
    ensure
      close_all
    end
  end
  puts "ruby-rpc: #{passed} passed, #{failed} failed"
  exit(failed.zero? ? 0 : 1)
rescue ArgumentError, TypeError
  warn 'usage: ruby_rpc.rb PORT [SCENARIO]'
  puts 'ruby-rpc: 0 passed, 1 failed'
  exit 2
end

main
