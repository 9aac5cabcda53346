/* main.c - eftd: flags, config, signals, and the event loop. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <event2/event.h>
#include <openssl/crypto.h>

#include "eft/auth.h"
#include "eft/broker.h"
#include "eft/cluster.h"
#include "eft/config.h"
#include "eft/http.h"
#include "eft/listener.h"
#include "eft/log.h"
#include "eft/proto.h"
#include "eft/server.h"
#include "eft/tls.h"
#include "eft/trim.h"
#include "eft/version.h"

static void
usage(FILE *out)
{
	fprintf(out,
	    "usage: eftd [options]\n"
	    "\n"
	    "eft %s - a small, fast STOMP 1.0/1.1/1.2 broker.\n"
	    "\n"
	    "  -L, --listen URL       listen on tcp://HOST:PORT, tls://HOST:PORT, or for STOMP\n"
	    "                         over WebSocket ws://HOST:PORT/PATH, wss://HOST:PORT/PATH\n"
	    "                         (IPv6 as tcp://[::1]:PORT); repeat for several listeners;\n"
	    "                         http://HOST:PORT is the admin listener (metrics, API,\n"
	    "                         dashboard, eftctl)\n"
	    "  -b, --bind ADDR        shorthand for one tcp listener's address (default 127.0.0.1)\n"
	    "  -p, --port PORT        ... and its port (default 61613; 0 picks a free port);\n"
	    "                         -b and -p replace the config file's STOMP listen lines\n"
	    "                         (its http:// admin listener stays)\n"
	    "  -c, --config FILE      read settings from FILE (key = value lines; see etc/eftd.conf)\n"
	    "  -d, --data-dir DIR     keep persistent messages in a journal in DIR, so that\n"
	    "                         they survive a restart or a crash (default: none,\n"
	    "                         everything in memory)\n"
	    "      --recover          start even if the journal is damaged, going on\n"
	    "                         without what is lost (the log names each file and\n"
	    "                         counts the messages and bytes lost)\n"
	    "  -l, --log-level LEVEL  error, warn, info (default) or debug\n"
	    "      --policy 'PATTERN KEY=VALUE ...'\n"
	    "                         queue limits, overflow, message TTL and dead letters for\n"
	    "                         the destinations matching PATTERN (see etc/eftd.conf);\n"
	    "                         repeat for several, the first match wins; replaces the\n"
	    "                         config file's policy lines\n"
	    "  -V, --version          print the version and exit\n"
	    "  -h, --help             print this help and exit\n"
	    "\n"
	    "Flags override the config file.  SIGINT or SIGTERM stops eftd cleanly;\n"
	    "SIGHUP reloads the users file and the TLS certificate and key, and reopens\n"
	    "log-file.\n",
	    EFT_VERSION);
}

/* Raise the open-file limit as far as allowed; returns how many connections
 * that leaves room for (a few descriptors are kept for the listener,
 * epoll, the log and the like). */
static size_t
raise_fd_limit(void)
{
	enum { RESERVED_FDS = 32 };
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 1024 - RESERVED_FDS;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t old = rl.rlim_cur;
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
			log_warn("cannot raise the open-file limit from %llu: %s",
			    (unsigned long long)old, strerror(errno));
			getrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (rlim_t)1 << 24)
		return (size_t)1 << 24;
	return rl.rlim_cur > RESERVED_FDS ? (size_t)rl.rlim_cur - RESERVED_FDS : 1;
}

/* Time the clients get, at shutdown, to read their ERROR and close. */
#define SHUTDOWN_GRACE_MS 3000

/* SIGINT, SIGTERM: tell the clients and close their connections, then end
 * the loop.  A second signal ends it at once. */
static void
stop_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	struct broker *b = arg;
	if (b->set->stopping) {
		log_warn("signal %d again: stopping now", (int)sig);
		event_base_loopexit(b->base, NULL);
		return;
	}
	log_info("signal %d: shutting down (%zu connections to close)", (int)sig, b->set->nconns);
	http_server_free(b->server->http); /* the admin listener too */
	b->server->http = NULL;
	server_shutdown(b, SHUTDOWN_GRACE_MS);
}

/* SIGHUP, first: a log rotation moved log-file away; write to a new one. */
static bool
reopen_log(const struct config *cfg)
{
	char err[512];
	if (cfg->log_file[0] == '\0')
		return false;
	if (log_open_file(cfg->log_file, err, sizeof(err)) != 0)
		log_error("SIGHUP: %s; logging on to the file open before", err);
	else
		log_info("SIGHUP: log-file %s reopened", cfg->log_file);
	return true;
}

/* SIGHUP: read the users file again.  Connections stay; a broken file
 * changes nothing. */
static bool
reload_users(struct broker *b)
{
	const char *path = b->cfg->users_file;
	struct auth *users;
	char err[512], changes[512];
	if (path[0] == '\0')
		return false;
	if (auth_load(&users, path, err, sizeof(err)) != 0) {
		log_error("SIGHUP: users file not reloaded, keeping the %zu user%s loaded before: %s",
		    auth_count(b->auth), auth_count(b->auth) == 1 ? "" : "s", err);
		return true;
	}
	auth_diff(b->auth, users, changes, sizeof(changes));
	size_t n = auth_count(users);
	size_t closed = proto_replace_users(b, users);
	if (closed > 0)
		log_info("SIGHUP: reloaded %s: %zu user%s (%s); closed %zu connection%s of "
		    "removed users", path, n, n == 1 ? "" : "s", changes, closed,
		    closed == 1 ? "" : "s");
	else
		log_info("SIGHUP: reloaded %s: %zu user%s (%s)", path, n, n == 1 ? "" : "s", changes);
	return true;
}

/* SIGHUP: certificate rotation.  New TLS connections get the new
 * certificate and key; open ones keep theirs. */
static bool
reload_tls(struct broker *b)
{
	char err[512];
	if (b->server->tls == NULL)
		return false;
	if (tls_server_reload(b->server->tls, b->cfg, err, sizeof(err)) != 0)
		log_error("SIGHUP: TLS certificate not reloaded, keeping the one loaded before: %s",
		    err);
	else
		log_info("SIGHUP: reloaded the TLS certificate and key (%s, %s) for new connections",
		    b->cfg->tls_cert_file, b->cfg->tls_key_file);
	return true;
}

static void
reload_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	struct broker *b = arg;
	bool log = reopen_log(b->cfg);
	bool users = reload_users(b);
	bool tls = reload_tls(b);
	if (!log && !users && !tls)
		log_warn("SIGHUP: no users-file, TLS listener or log-file is set, so there is "
		    "nothing to reload (other settings take effect at a restart)");
}

/* The command line: flags into flag_key/flag_val (applied after the file,
 * in order), --config into *config_path.  Returns -1 to go on, or the exit
 * status (--help, --version, a bad argument). */
enum { MAX_FLAGS = 8 + CONFIG_MAX_LISTENERS + CONFIG_MAX_POLICIES };
struct flags {
	const char *config_path;
	const char *key[MAX_FLAGS];
	const char *val[MAX_FLAGS];
	int n;
};

static int
parse_args(int argc, char **argv, struct flags *fl)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'L' },
		{ "bind", required_argument, NULL, 'b' },
		{ "port", required_argument, NULL, 'p' },
		{ "config", required_argument, NULL, 'c' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "data-dir", required_argument, NULL, 'd' },
		{ "recover", no_argument, NULL, 'R' },
		{ "policy", required_argument, NULL, 'P' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;
	opterr = 0; /* one line of our own instead of getopt's */
	while ((opt = getopt_long(argc, argv, ":L:b:p:c:l:d:Vh", opts, NULL)) != -1) {
		switch (opt) {
		case 'L': case 'b': case 'p': case 'l': case 'd': case 'R': case 'P':
			if (fl->n == MAX_FLAGS) {
				fprintf(stderr, "eftd: too many flags\n");
				return 1;
			}
			fl->key[fl->n] = opt == 'L' ? "listen" : opt == 'b' ? "bind" :
			    opt == 'p' ? "port" : opt == 'd' ? "data-dir" : opt == 'R' ? "recover" :
			    opt == 'P' ? "policy" : "log-level";
			fl->val[fl->n++] = opt == 'R' ? "yes" : optarg;
			break;
		case 'c':
			fl->config_path = optarg;
			break;
		case 'V':
			printf("eftd %s\n", EFT_VERSION);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		case ':':
			fprintf(stderr, "eftd: %s needs a value; try 'eftd --help'\n", argv[optind - 1]);
			return 1;
		default:
			if (optopt != 0)
				fprintf(stderr, "eftd: unknown option '-%c'; try 'eftd --help'\n", optopt);
			else
				fprintf(stderr, "eftd: unknown option '%s'; try 'eftd --help'\n",
				    argv[optind - 1]);
			return 1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "eftd: unexpected argument '%s'; try 'eftd --help'\n", argv[optind]);
		return 1;
	}
	return -1;
}

/* The settings: defaults, the file, then the flags; checked.  -1 with one
 * line on stderr. */
static int
load_config(struct config *cfg, const struct flags *fl)
{
	char err[512];
	config_defaults(cfg);
	if (fl->config_path != NULL && config_load(cfg, fl->config_path, err, sizeof(err)) != 0) {
		fprintf(stderr, "eftd: %s\n", err);
		return -1;
	}
	for (int i = 0; i < fl->n; i++) {
		if (config_set(cfg, fl->key[i], fl->val[i], err, sizeof(err)) != 0) {
			fprintf(stderr, "eftd: --%s\n", err);
			return -1;
		}
	}
	if (config_check(cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "eftd: %s\n", err);
		return -1;
	}
	log_set_level(cfg->log_level);
	if (cfg->log_file[0] != '\0' && log_open_file(cfg->log_file, err, sizeof(err)) != 0) {
		fprintf(stderr, "eftd: %s\n", err);
		return -1;
	}
	return 0;
}

/* The admin listeners (http://): dashboard, metrics, the API. */
static int
open_admin(struct broker *b, char *err, size_t errlen)
{
	const struct config *cfg = b->cfg;
	for (size_t i = 0; i < cfg->nlisten; i++) {
		if (!config_listen_is_http(&cfg->listen[i]))
			continue;
		if (b->server->http == NULL && (b->server->http = http_server_new(b)) == NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		if (http_server_bind(b->server->http, &cfg->listen[i], err, errlen) != 0)
			return -1;
	}
	return 0;
}

/* Users, the journal, the connection limit, the cluster and the listeners,
 * in that order (a client never finds the node without its cluster).  -1
 * with one line in err. */
static int
start_broker(struct broker *b, char *err, size_t errlen)
{
	const struct config *cfg = b->cfg;
	if (cfg->users_file[0] != '\0') {
		if (auth_load(&b->auth, cfg->users_file, err, errlen) != 0)
			return -1;
		size_t n = auth_count(b->auth);
		log_info("%zu user%s from %s; anonymous connections %s", n, n == 1 ? "" : "s",
		    cfg->users_file, cfg->allow_anonymous ? "allowed" : "refused");
	}
	if (cfg->data_dir[0] != '\0' && broker_open_store(b, err, errlen) != 0)
		return -1;
	size_t fit = raise_fd_limit();
	b->server->max_conns = cfg->max_connections && cfg->max_connections < fit ? cfg->max_connections :
	    fit;
	if (cfg->max_connections > fit)
		log_warn("max-connections %zu is more than the open-file limit allows: using %zu",
		    cfg->max_connections, fit);
	if (cfg->cluster[0] != '\0' && broker_start_cluster(b, err, errlen) != 0)
		return -1;
	if (server_listen(b, err, errlen) != 0 || open_admin(b, err, errlen) != 0)
		return -1;
	/* An HTTP client on a STOMP listener is told where eftd speaks HTTP. */
	if (server_set_http_answer(b, http_server_url(b->server->http)) != 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static void
log_started(const struct broker *b)
{
	log_info("eft %s (libevent %s, %s, %s)", EFT_VERSION, event_get_version(),
	    event_base_get_method(b->base), OpenSSL_version(OPENSSL_VERSION));
	for (const struct listener *l = b->server->listeners; l != NULL; l = l->next)
		log_info("listening on %s://%s%s%s:%u%s", l->where.scheme,
		    strchr(l->where.host, ':') ? "[" : "", l->where.host,
		    strchr(l->where.host, ':') ? "]" : "", l->port, l->where.path);
	log_info("up to %zu connection%s; messages may hold %zu MB (max-memory)", b->server->max_conns,
	    b->server->max_conns == 1 ? "" : "s", b->max_memory >> 20);
	if (b->cluster != NULL)
		log_info("cluster node %s: queues in JetStream streams EFT_Q_0..EFT_Q_%u "
		    "(cluster-queue-streams %u, replicas %u), topics and replies over NATS",
		    cluster_node(b->cluster), b->cfg->cluster_queue_streams - 1,
		    b->cfg->cluster_queue_streams, b->cfg->cluster_replicas);
	else if (b->backend == NULL)
		log_warn("no data-dir: messages are kept in memory only, and persistent messages "
		    "will not survive a restart");
}

/* What is left after a clean stop; the last line logged. */
static void
log_stopped(const struct broker *b)
{
	size_t ndests, queued = dests_queued(&b->dests, &ndests);
	struct backend_stats bs;
	bool journal = broker_backend_stats(b, &bs);
	/* The journal holds every queued persistent message (and nothing else):
	 * the rest of what is queued is lost now. */
	size_t lost = journal && bs.messages < queued ? queued - (size_t)bs.messages : 0;
	if (lost > 0)
		log_warn("discarding %zu queued message%s that %s not persistent (of %zu queued on "
		    "%zu destination%s; the other %llu, persistent, stay in the journal)", lost,
		    lost == 1 ? "" : "s", lost == 1 ? "is" : "are", queued, ndests,
		    ndests == 1 ? "" : "s", (unsigned long long)bs.messages);
	else if (queued > 0 && journal)
		log_info("%zu message%s queued on %zu destination%s; %llu persistent in the journal",
		    queued, queued == 1 ? "" : "s", ndests, ndests == 1 ? "" : "s",
		    (unsigned long long)bs.messages);
	else if (queued > 0)
		log_warn("discarding %zu queued message%s on %zu destination%s (no data-dir: eftd "
		    "keeps messages in memory only)", queued, queued == 1 ? "" : "s", ndests,
		    ndests == 1 ? "" : "s");
	if (journal && bs.syncs > 0)
		log_info("journal: %llu fsyncs, mean %.2f ms, max %.2f ms",
		    (unsigned long long)bs.syncs, (double)bs.sync_total_us / bs.syncs / 1000.0,
		    (double)bs.sync_max_us / 1000.0);
	log_info("stopped: %llu connections, %llu messages in, %llu deliveries, "
	    "%llu replies dropped (temp-queue owner gone)",
	    (unsigned long long)b->stats.connections, (unsigned long long)b->stats.msgs_in,
	    (unsigned long long)b->stats.subs.deliveries,
	    (unsigned long long)b->stats.dropped[STAT_DROP_REPLY_OWNER_GONE]);
}

int
main(int argc, char **argv)
{
	struct flags fl = { 0 };
	int rc = parse_args(argc, argv, &fl);
	if (rc >= 0)
		return rc;
	struct config cfg;
	if (load_config(&cfg, &fl) != 0)
		return 1;
	/* A peer that vanishes must not kill the broker; write() reports EPIPE. */
	signal(SIGPIPE, SIG_IGN);
	/* libnats's own threads (reconnects, pings) touch the loop: only then
	 * does libevent need its locks. */
	if (cfg.cluster[0] != '\0' && cluster_prepare_libevent() != 0) {
		fprintf(stderr, "eftd: cannot make libevent thread-aware for the cluster\n");
		return 1;
	}
	/* Before anything is allocated in earnest (trim.h). */
	if (trim_configure_malloc() != 0)
		log_debug("malloc keeps its own trim and mmap thresholds (mallopt refused)");
	struct event_base *base = event_base_new();
	if (base == NULL) {
		fprintf(stderr, "eftd: cannot create the event loop\n");
		return 1;
	}
	rc = 1;
	char err[512];
	struct event *sigint = NULL, *sigterm = NULL, *sighup = NULL;
	struct broker *b = server_new(base, &cfg);
	if (b == NULL) {
		fprintf(stderr, "eftd: out of memory\n");
		goto out;
	}
	if (start_broker(b, err, sizeof(err)) != 0) {
		fprintf(stderr, "eftd: %s\n", err);
		goto out;
	}
	sigint = evsignal_new(base, SIGINT, stop_cb, b);
	sigterm = evsignal_new(base, SIGTERM, stop_cb, b);
	sighup = evsignal_new(base, SIGHUP, reload_cb, b);
	if (sigint == NULL || sigterm == NULL || sighup == NULL || event_add(sigint, NULL) != 0 ||
	    event_add(sigterm, NULL) != 0 || event_add(sighup, NULL) != 0) {
		fprintf(stderr, "eftd: cannot install signal handlers\n");
		goto out;
	}
	log_started(b);
	if (event_base_dispatch(base) < 0) {
		fprintf(stderr, "eftd: event loop failed\n");
		goto out;
	}
	server_close_all(b);
	broker_stop_cluster(b); /* gives back what this node held */
	log_stopped(b);
	rc = 0;
out:
	if (b != NULL) {
		http_server_free(b->server->http);
		broker_stop_cluster(b);
	}
	server_free(b);
	if (sigint)
		event_free(sigint);
	if (sigterm)
		event_free(sigterm);
	if (sighup)
		event_free(sighup);
	event_base_free(base);
	libevent_global_shutdown();
	return rc;
}
