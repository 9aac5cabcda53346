#!/usr/bin/env ruby
# RPC client over eftd with the Ruby stomp gem (Debian: ruby-stomp).
#
# Sends COUNT requests to /queue/rpc with reply-to:/temp-queue/rpc and a
# correlation-id each, then waits for the replies.  It never SUBSCRIBEs:
# the first SEND with reply-to:/temp-queue/rpc makes this connection a
# private reply queue and subscribes it, exactly as RabbitMQ does.
#
#   ruby rpc_client.rb [HOST] [PORT] [COUNT]   (or EFT_HOST, EFT_PORT; default 127.0.0.1 61613 5)
#
# Exits 0 when every request got its reply within 10 seconds, 1 otherwise
# (with one line on stderr when it cannot connect).
require 'securerandom'
require 'stomp'
require 'timeout'

host  = ARGV[0] || ENV['EFT_HOST'] || '127.0.0.1'
port  = Integer(ARGV[1] || ENV['EFT_PORT'] || 61613)
count = Integer(ARGV[2] || 5)
queue = ENV['EFT_RPC_QUEUE'] || '/queue/rpc'

begin
  conn = Stomp::Connection.open('guest', 'guest', host, port)
rescue SystemCallError, SocketError => e # "Connection refused - connect(2) for ..."
  abort "rpc_client.rb: cannot connect to #{host} port #{port}: " \
        "#{e.message.split(' - ').first} (is eftd running?)"
end
# An ERROR frame instead of CONNECTED (e.g. a wrong login) raises nothing.
reply = conn.connection_frame
unless reply&.command == 'CONNECTED'
  abort "rpc_client.rb: #{host} port #{port} refused the connection: " \
        "#{reply ? reply.headers['message'] : 'no answer'}"
end

pending = {} # correlation-id => request body
1.upto(count) do |i|
  cid = SecureRandom.uuid
  pending[cid] = "hello #{i}"
  conn.publish(queue, pending[cid], 'reply-to' => '/temp-queue/rpc', 'correlation-id' => cid)
end

begin
  Timeout.timeout(10) do
    until pending.empty?
      msg = conn.receive
      raise 'the broker closed the connection' if msg.nil?
      next unless msg.command == 'MESSAGE'

      # Replies carry subscription:/temp-queue/rpc and our correlation-id.
      request = pending.delete(msg.headers['correlation-id'])
      puts "#{request} -> #{msg.body}" if request
    end
  end
rescue Timeout::Error
  warn "rpc_client: no reply to #{pending.size} of #{count} requests within 10 s (is rpc_server running?)"
end
conn.disconnect
exit(pending.empty? ? 0 : 1)
