/* config.h - eftd settings: defaults, the key = value config file, overrides,
 * and the checks that settings agree with each other. */
#ifndef EFT_CONFIG_H
#define EFT_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eft/log.h"
#include "eft/policy.h"

/* Every setting, in the order etc/eftd.conf lists them. */
enum config_key {
	CFG_BIND,
	CFG_PORT,
	CFG_LOG_LEVEL,
	CFG_MAX_FRAME_SIZE,
	CFG_MAX_HEADERS,
	CFG_MAX_HEADER_LINE,
	CFG_HEARTBEAT_MIN_MS,
	CFG_OUTPUT_HIGH_WATER,
	CFG_MAX_OUTPUT,
	CFG_MESSAGE_CACHE,
	CFG_MAX_QUEUE_MESSAGES,
	CFG_MAX_QUEUE_BYTES,
	CFG_QUEUE_OVERFLOW,
	CFG_MESSAGE_TTL,
	CFG_MAX_REDELIVERIES,
	CFG_DEAD_LETTER_QUEUE,
	CFG_POLICY,
	CFG_MAX_MEMORY,
	CFG_MAX_BODY_SIZE,
	CFG_MAX_SUBSCRIPTIONS,
	CFG_MAX_CONNECTIONS,
	CFG_MAX_SCHEDULED_MESSAGES,
	CFG_CONNECT_TIMEOUT_MS,
	CFG_FRAME_TIMEOUT_MS,
	CFG_USERS_FILE,
	CFG_ALLOW_ANONYMOUS,
	CFG_AUTH_DELAY_MS,
	CFG_LISTEN,
	CFG_TLS_CERT_FILE,
	CFG_TLS_KEY_FILE,
	CFG_TLS_CA_FILE,
	CFG_TLS_VERIFY_CLIENT,
	CFG_TLS_MIN_VERSION,
	CFG_TLS_CIPHERS,
	CFG_WS_ALLOWED_ORIGINS,
	CFG_WS_FRAME,
	CFG_DATA_DIR,
	CFG_FSYNC,
	CFG_PERSISTENT_DEFAULT,
	CFG_MAX_DISK,
	CFG_JOURNAL_SEGMENT_SIZE,
	CFG_RECOVER,
	CFG_CLUSTER,
	CFG_CLUSTER_USER,
	CFG_CLUSTER_PASSWORD,
	CFG_CLUSTER_CREDS_FILE,
	CFG_NODE_NAME,
	CFG_CLUSTER_REPLICAS,
	CFG_CLUSTER_ACK_WAIT_MS,
	CFG_CLUSTER_QUEUE_STREAMS,
	CFG_CLUSTER_STATS_MS,
	CFG_LOG_FILE,
	CFG_REDELIVERED_ALWAYS,
	CFG_NKEYS
};

#define CONFIG_MAX_LISTENERS 16
#define CONFIG_MAX_POLICIES 64

/* The keys a policy line may give: the global ones from max-queue-messages
 * to dead-letter-queue, one bit each in config_policy's set. */
#define CONFIG_POLICY_FIRST CFG_MAX_QUEUE_MESSAGES
#define CONFIG_POLICY_LAST CFG_DEAD_LETTER_QUEUE
#define CONFIG_POLICY_BIT(k) (1u << ((k) - CONFIG_POLICY_FIRST))

/* One `policy = PATTERN key=value ...` line. */
struct config_policy {
	char pattern[POLICY_NAME_MAX];
	unsigned set;              /* CONFIG_POLICY_BIT of each key the line gives */
	struct dest_policy values; /* after config_check, the globals where set has no bit */
	struct dest_policy for_dlq; /* the same without message-ttl (config_policy) */
};

/* One `listen = URL`: scheme://HOST:PORT, HOST an IPv6 address in brackets. */
struct config_listen {
	char scheme[8];            /* "tcp", "tls", "ws", "wss", or "http" (the admin listener) */
	char host[256];            /* without the brackets */
	uint16_t port;             /* 0: the system picks one */
	char path[256];            /* ws, wss: the request path (default /ws); else "" */
	char url[300];             /* as written */
	int origin;                /* the file's line, CONFIG_FLAG, or CONFIG_DEFAULT for
	                              the tcp://bind:port shorthand */
};

/* Where a setting's value came from. */
#define CONFIG_DEFAULT 0  /* never set */
#define CONFIG_FLAG (-1)  /* config_set: a command-line flag */
/* > 0: that line of the config file */

struct config {
	char bind[64];             /* listen address */
	uint16_t port;             /* listen port */
	enum log_level log_level;
	size_t max_frame_size;     /* bytes in one frame, headers and body */
	size_t max_headers;        /* header lines in one frame */
	size_t max_header_line;    /* bytes in one header line */
	unsigned heartbeat_min_ms; /* shortest heart-beat interval agreed to, both ways */
	size_t output_high_water;  /* pending output that pauses queue deliveries */
	size_t message_cache;      /* freed message memory kept for reuse */
	size_t max_body_size;      /* bytes in one frame body; 0: only max_frame_size applies */
	size_t max_subscriptions;  /* per connection */
	size_t max_scheduled_messages; /* SENDs waiting for their time (schedule.h) */
	size_t max_connections;    /* in total; 0: as many as the open-file limit allows */
	size_t max_output;         /* pending output before a connection is cut off as too slow */
	struct dest_policy policy; /* queue limits, overflow, TTL, dead letters: where no policy
	                              line matches, and what a line does not give */
	struct dest_policy policy_for_dlq; /* the same without message-ttl (config_policy) */
	struct config_policy policies[CONFIG_MAX_POLICIES]; /* as given; the first match wins */
	size_t npolicies;
	size_t max_memory;         /* all messages held; producers wait above it; 0: 40% of RAM */
	unsigned connect_timeout_ms; /* from accept to CONNECT */
	unsigned frame_timeout_ms;   /* from a frame's first byte to its last */
	unsigned auth_delay_ms;      /* before answering a failed login */
	char users_file[PATH_MAX]; /* "" for none; relative to the config file's folder */
	bool allow_anonymous;      /* CONNECT without a known login is accepted */
	struct config_listen listen[CONFIG_MAX_LISTENERS]; /* none: tcp://bind:port */
	size_t nlisten;
	char tls_cert_file[PATH_MAX]; /* PEM, the chain may follow the certificate */
	char tls_key_file[PATH_MAX];
	char tls_ca_file[PATH_MAX];   /* CAs client certificates are checked against */
	bool tls_verify_client;       /* refuse clients without a certificate from tls_ca_file */
	char tls_min_version[8];      /* "1.2" or "1.3" */
	char tls_ciphers[512];        /* OpenSSL cipher list for TLS 1.2 */
	char ws_allowed_origins[2048]; /* Origin values accepted, comma or space separated; "": any */
	char ws_frame[8];             /* "text" or "binary": the kind of WebSocket message sent */
	char data_dir[PATH_MAX];      /* the journal's folder; "": everything in memory */
	char fsync[16];               /* "always", "everysec" or "no" */
	bool persistent_default;      /* every queue message is persistent, as if persistent:true */
	bool redelivered_always;      /* MESSAGE carries redelivered:false too (RabbitMQ's way) */
	size_t max_disk;              /* journal bytes above which producers wait; 0: 80% of free space */
	size_t journal_segment_size;  /* a new journal file is begun past this size */
	bool recover;                 /* skip damaged journal records instead of refusing to start */
	char cluster[1024];           /* NATS servers, nats://HOST:PORT,...; "": one node alone */
	char cluster_user[256];       /* NATS login, with cluster_password */
	char cluster_password[256];
	char cluster_creds_file[PATH_MAX]; /* a NATS .creds file (JWT and NKey seed) instead */
	char node_name[128];          /* this node's name in the cluster; "": host name and port */
	unsigned cluster_replicas;    /* JetStream replicas of the queue stream */
	unsigned cluster_ack_wait_ms; /* JetStream ack wait: renewed by a live node (+WPI) */
	unsigned cluster_queue_streams; /* queues spread over streams EFT_Q_0.. by a hash of the name */
	unsigned cluster_stats_ms;     /* how often JetStream is asked what waits per queue; 0 never */
	char log_file[PATH_MAX];      /* log lines go here (reopened at SIGHUP); "": stderr */
	int origin[CFG_NKEYS];     /* CONFIG_DEFAULT, CONFIG_FLAG or the file's line */
	char path[PATH_MAX];       /* the config file read, or "" */
};

void config_defaults(struct config *cfg);
/* Is l the admin HTTP listener? */
bool config_listen_is_http(const struct config_listen *l);
/* 127.0.0.0/8, ::1 or localhost (a literal, nothing resolved): only this
 * machine reaches it. */
bool config_host_is_loopback(const char *host);
/* Set one key, as a command-line flag does; 0 on success, -1 with a reason
 * in err, cfg unchanged.  The first `listen` flag replaces the file's
 * listeners, the first `policy` flag its policy lines; later ones add to
 * them. */
int config_set(struct config *cfg, const char *key, const char *value, char *err, size_t errlen);
/* Read a key = value file ('#' comments, blank lines).  A key given twice is
 * an error (but `listen` and `policy` may repeat); a relative file setting
 * (users-file, tls-*-file) is taken relative to the file's folder.  -1 with
 * "path:line: reason" in err. */
int config_load(struct config *cfg, const char *path, char *err, size_t errlen);
/* After the file and the flags: settings that contradict each other are an
 * error naming both (-1, reason in err).  Defaults that depend on another
 * setting (max-body-size, max-header-line, output-high-water) follow it.
 * With no STOMP `listen` (none, or only http://), the one STOMP listener is
 * tcp://bind:port.  A bind or port flag replaces the file's STOMP listeners
 * (its http:// ones stay); a listen flag, its bind and port.  Two listeners
 * on one address and port are an error naming both.  An http:// listener
 * must be on loopback unless a users-file says who may use it.  Each policy
 * line's keys it does not give are filled in from the global settings. */
int config_check(struct config *cfg, char *err, size_t errlen);
/* The policy of the destination name (len bytes, not NUL-terminated; any
 * name, broker-internal ones too): the values of the first policy line whose
 * pattern matches, else the global settings.  A dead-letter queue (one that
 * the global settings or a policy line name as dead-letter-queue) keeps its
 * dead letters until they are read: it takes no message-ttl from the global
 * settings or from a pattern, only from a line that names it exactly and
 * gives message-ttl itself.  After config_check. */
const struct dest_policy *config_policy(const struct config *cfg, const char *name, size_t len);

#endif
