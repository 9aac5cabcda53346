# The one helper of the Ruby real-client scripts (ruby_client.rb, ruby_rpc.rb):
# connections with the `stomp` gem (1.4.x) to an eftd on 127.0.0.1, bounded
# waits for frames, failure checks, and the scenario runner that prints
# "PASS name" / "FAIL name: why" per scenario and "LABEL: N passed, N failed".
# Frames are read by the gem; every wait here is bounded.
$stdout.sync = true
$stderr.sync = true

require 'stomp'
require 'timeout'

HOST = '127.0.0.1'
# EFT_TLS_CA=FILE: eftd listens with TLS; its certificate is checked against FILE.
TLS_CA = ENV['EFT_TLS_CA']
WAIT = 10           # seconds for any single expected frame
SCENARIO_LIMIT = 40 # seconds for a whole scenario
# Destination names end in this, so reruns against one long-lived eftd do not meet leftovers.
RUN = "#{Process.pid}-#{rand(1_000_000)}"

class Failure < StandardError; end

# A callback logger for the gem (EFT_CLIENT_DEBUG=1): prints what goes over the wire.
class DebugLogger
  def on_publish(_p, body, headers)
    puts "  >> SEND #{headers.inspect} #{body.to_s[0, 60].inspect}"
  end

  %i[on_subscribe on_unsubscribe on_ack on_nack on_begin on_commit on_abort].each do |m|
    define_method(m) { |_p, headers| puts "  >> #{m.to_s.sub('on_', '').upcase} #{headers.inspect}" }
  end

  def on_receive(_p, msg)
    if msg
      puts "  << #{msg.command} #{msg.headers.inspect} #{msg.body.to_s[0, 60].inspect}"
    else
      puts '  << nil (EOF)'
    end
  end

  def on_connected(p)
    puts "  connected #{p.inspect[0, 200]}"
  end

  def on_connectfail(p)
    puts "  connect failed #{p.inspect[0, 200]}"
  end

  def on_miscerr(_p, err)
    puts "  misc error #{err}"
  end

  def method_missing(*_args); end

  def respond_to_missing?(*_args)
    true
  end
end

DEBUG = !ENV['EFT_CLIENT_DEBUG'].to_s.empty?

def check(cond, what)
  raise Failure, what unless cond
end

def eq(actual, expected, what)
  return if actual == expected

  raise Failure, "#{what}: expected #{expected.inspect}, got #{actual.inspect}"
end

# Connection parameters as a hash (the form that can speak 1.1/1.2).
# reliable: false so a broken connection raises instead of reconnecting.
# The gem's ssl host parameter: false, or TLS checked against EFT_TLS_CA.
def ssl_param
  TLS_CA ? Stomp::SSLParams.new(ts_files: TLS_CA) : false
end

def hash_params(port, version, extra_headers = {})
  p = {
    hosts: [{ login: 'guest', passcode: 'guest', host: HOST, port: port, ssl: ssl_param }],
    reliable: false,
    connect_timeout: 5,
    connread_timeout: 5,
    parse_timeout: 5,
    start_timeout: 0,
    connect_headers: { 'accept-version' => version, 'host' => '/' }.merge(extra_headers)
  }
  p[:logger] = DebugLogger.new if DEBUG
  p
end

$open_conns = [] # connections and clients close_all ends
$threads = []    # threads close_all joins

def track(conn)
  $open_conns << conn
  conn
end

# STOMP 1.0 the way RabbitMQ examples connect: Connection.open, positional.
def conn10(port)
  c = Timeout.timeout(WAIT, Failure, "no CONNECTED (1.0) within #{WAIT}s") do
    if DEBUG || TLS_CA
      # The positional form (open) has no TLS; the hash form without
      # accept-version is the same 1.0 CONNECT.
      Stomp::Connection.new(hosts: [{ login: 'guest', passcode: 'guest', host: HOST, port: port,
                                      ssl: ssl_param }],
                            reliable: false, logger: DEBUG ? DebugLogger.new : nil)
    else
      Stomp::Connection.open('guest', 'guest', HOST, port)
    end
  end
  track(c)
  eq(c.protocol, Stomp::SPL_10, 'protocol of a CONNECT without accept-version')
  c
end

# STOMP 1.1 or 1.2 with the hash form; the CONNECTED frame is checked.
def conn_v(port, version, extra_headers = {})
  c = Timeout.timeout(WAIT, Failure, "no CONNECTED (#{version}) within #{WAIT}s") do
    Stomp::Connection.new(hash_params(port, version, extra_headers))
  end
  track(c)
  check(c.open?, "connection (#{version}) is not open")
  eq(c.protocol, version, 'negotiated protocol')
  eq(c.connection_frame.command, 'CONNECTED', 'CONNECT answer')
  eq(c.connection_frame.headers['version'], version, 'CONNECTED version header')
  c
end

# " waiting for WHAT", or nothing: the end of a failure message.
def waiting_for(what)
  what ? " waiting for #{what}" : ''
end

# The next frame from a Stomp::Connection, whatever it is; bounded.
def next_frame(conn, secs = WAIT, what: nil)
  waiting = waiting_for(what)
  f = Timeout.timeout(secs, Failure, "no frame within #{secs}s#{waiting}") { conn.receive }
  raise Failure, "connection closed by the broker (receive returned nil)#{waiting}" if f.nil?

  f
end

def next_message(conn, secs = WAIT, what: nil)
  f = next_frame(conn, secs, what: what)
  if f.command == 'ERROR'
    raise Failure, "ERROR frame#{waiting_for(what)}: #{f.headers.inspect} #{f.body.inspect}"
  end

  eq(f.command, 'MESSAGE', what ? "frame while waiting for #{what}" : 'frame command')
  f
end

def expect_receipt(conn, id, secs = WAIT)
  f = next_frame(conn, secs)
  if f.command == 'ERROR'
    raise Failure, "ERROR instead of RECEIPT #{id}: #{f.headers.inspect} #{f.body.inspect}"
  end

  eq(f.command, 'RECEIPT', "frame answering receipt #{id}")
  eq(f.headers['receipt-id'], id, 'receipt-id')
  f
end

# Nothing arrives on conn for secs seconds.
def quiet(conn, secs = 0.3)
  f = nil
  begin
    Timeout.timeout(secs) { f = conn.receive }
  rescue Timeout::Error
    return
  end
  raise Failure, "unexpected frame: #{f&.command} #{f&.headers.inspect} #{f&.body.inspect}"
end

def close_all
  $open_conns.each do |c|
    begin
      Timeout.timeout(3) { c.disconnect if c.respond_to?(:open?) && c.open? }
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

def quiet_disconnect(conn)
  Timeout.timeout(5, Failure, 'DISCONNECT took too long') { conn.disconnect }
  $open_conns.delete(conn)
end

# The script's main: `script PORT [SCENARIO]` runs every scenario of
# scenarios (name => method symbol, each taking the port and returning a
# note), or just SCENARIO, each within SCENARIO_LIMIT; prints
# "LABEL: N passed, N failed" and exits 1 if any failed, 2 on bad arguments.
def run_scenarios(label, scenarios)
  port = Integer(ARGV[0] || '')
  names = ARGV[1] ? [ARGV[1]] : scenarios.keys
  passed = failed = 0
  names.each do |name|
    meth = scenarios[name]
    unless meth
      puts "FAIL #{name}: no such scenario (have #{scenarios.keys.join(', ')})"
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
  puts "#{label}: #{passed} passed, #{failed} failed"
  exit(failed.zero? ? 0 : 1)
rescue ArgumentError, TypeError
  warn "usage: #{File.basename($PROGRAM_NAME)} PORT [SCENARIO]"
  puts "#{label}: 0 passed, 1 failed"
  exit 2
end
