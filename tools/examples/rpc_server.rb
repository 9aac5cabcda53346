#!/usr/bin/env ruby
# RPC service over eftd with the Ruby stomp gem (Debian: ruby-stomp).
#
# Takes requests from /queue/rpc and answers each one to the queue named in
# its reply-to header, copying its correlation-id.  The "work" is upcasing
# the body.  Code written this way for RabbitMQ runs unchanged on eftd.
#
#   ruby rpc_server.rb [HOST] [PORT]     (or EFT_HOST, EFT_PORT; default 127.0.0.1 61613)
#
# Stop it with Ctrl-C.  When it cannot connect it says why in one line on
# stderr and exits 1.
require 'stomp'

host  = ARGV[0] || ENV['EFT_HOST'] || '127.0.0.1'
port  = Integer(ARGV[1] || ENV['EFT_PORT'] || 61613)
queue = ENV['EFT_RPC_QUEUE'] || '/queue/rpc'

# Connection.open(login, passcode, host, port) speaks STOMP 1.0; guest/guest
# gets in unless eftd has allow-anonymous = no.
begin
  conn = Stomp::Connection.open('guest', 'guest', host, port)
rescue SystemCallError, SocketError => e # "Connection refused - connect(2) for ..."
  abort "rpc_server.rb: cannot connect to #{host} port #{port}: " \
        "#{e.message.split(' - ').first} (is eftd running?)"
end
# An ERROR frame instead of CONNECTED (e.g. a wrong login) raises nothing.
reply = conn.connection_frame
unless reply&.command == 'CONNECTED'
  abort "rpc_server.rb: #{host} port #{port} refused the connection: " \
        "#{reply ? reply.headers['message'] : 'no answer'}"
end
conn.subscribe(queue)
$stdout.sync = true
puts "rpc_server: serving #{queue} on #{host}:#{port}"

%w[INT TERM].each { |sig| trap(sig) { raise Interrupt } }
begin
  loop do
    msg = conn.receive                  # the next request (nil: the broker went away)
    break if msg.nil?
    next unless msg.command == 'MESSAGE'

    # reply-to is the private /reply-queue/... name eftd made for the caller.
    reply_to = msg.headers['reply-to']
    next unless reply_to

    headers = {}
    headers['correlation-id'] = msg.headers['correlation-id'] if msg.headers['correlation-id']
    conn.publish(reply_to, msg.body.upcase, headers)
  end
rescue Interrupt
  conn.disconnect
end
puts 'rpc_server: stopped'
