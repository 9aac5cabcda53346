/* config.c - eftd settings.  Everything has a default so eftd runs with no
 * file at all; the file only overrides, and flags override the file.  Keys
 * are the long flag names.  Every key is in one table, so that "given twice"
 * and "where did this value come from" work the same for all of them. */
#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "eft/config.h"

enum value_type { T_ADDR, T_PORT, T_LEVEL, T_BOOL, T_PATH, T_SIZE, T_UINT, T_LISTEN, T_TLS_VERSION,
	T_STRING, T_WS_FRAME, T_FSYNC, T_OVERFLOW, T_QUEUE, T_POLICY };

struct key_def {
	const char *name;
	enum value_type type;
	size_t offset;
	uint64_t min, max;      /* T_SIZE, T_UINT */
	bool repeats;           /* may be given more than once */
	size_t size;            /* the field's size */
};

/* One table row.  A policy key's field is in struct config's policy, so
 * that a policy line can parse into a struct dest_policy of its own. */
#define KEY(id, key, t, field, lo, hi, rep) \
	[id] = { .name = key, .type = t, .offset = offsetof(struct config, field), .min = lo, \
		.max = hi, .repeats = rep, .size = sizeof(((struct config *)0)->field) }
#define SIZE_KEY(id, key, field, lo, hi) KEY(id, key, T_SIZE, field, lo, hi, false)
#define UINT_KEY(id, key, field, lo, hi) KEY(id, key, T_UINT, field, lo, hi, false)

/* The longest message-ttl (365-day years). */
#define TEN_YEARS_MS (10ull * 365 * 24 * 3600 * 1000)

static const struct key_def keys[CFG_NKEYS] = {
	KEY(CFG_BIND, "bind", T_ADDR, bind, 0, 0, false),
	KEY(CFG_PORT, "port", T_PORT, port, 0, 65535, false),
	KEY(CFG_LOG_LEVEL, "log-level", T_LEVEL, log_level, 0, 0, false),
	SIZE_KEY(CFG_MAX_FRAME_SIZE, "max-frame-size", max_frame_size, 256, 1ull << 30),
	SIZE_KEY(CFG_MAX_HEADERS, "max-headers", max_headers, 8, 1000000),
	SIZE_KEY(CFG_MAX_HEADER_LINE, "max-header-line", max_header_line, 64, 16u << 20),
	UINT_KEY(CFG_HEARTBEAT_MIN_MS, "heartbeat-min-ms", heartbeat_min_ms, 10, 3600000),
	SIZE_KEY(CFG_OUTPUT_HIGH_WATER, "output-high-water", output_high_water, 4096, 1ull << 30),
	SIZE_KEY(CFG_MAX_OUTPUT, "max-output", max_output, 64u << 10, 1ull << 40),
	SIZE_KEY(CFG_MESSAGE_CACHE, "message-cache", message_cache, 0, 1ull << 40),
	SIZE_KEY(CFG_MAX_QUEUE_MESSAGES, "max-queue-messages", policy.max_queue_messages, 0,
	    1ull << 40),
	SIZE_KEY(CFG_MAX_QUEUE_BYTES, "max-queue-bytes", policy.max_queue_bytes, 0, 1ull << 50),
	KEY(CFG_QUEUE_OVERFLOW, "queue-overflow", T_OVERFLOW, policy.overflow, 0, 0, false),
	UINT_KEY(CFG_MESSAGE_TTL, "message-ttl", policy.message_ttl_ms, 0, TEN_YEARS_MS),
	UINT_KEY(CFG_MAX_REDELIVERIES, "max-redeliveries", policy.max_redeliveries, 0, 1000000),
	KEY(CFG_DEAD_LETTER_QUEUE, "dead-letter-queue", T_QUEUE, policy.dead_letter_queue, 0, 0,
	    false),
	KEY(CFG_POLICY, "policy", T_POLICY, policies, 0, 0, true),
	SIZE_KEY(CFG_MAX_MEMORY, "max-memory", max_memory, 0, 1ull << 50),
	SIZE_KEY(CFG_MAX_BODY_SIZE, "max-body-size", max_body_size, 0, 1ull << 30),
	SIZE_KEY(CFG_MAX_SUBSCRIPTIONS, "max-subscriptions", max_subscriptions, 1, 10000000),
	SIZE_KEY(CFG_MAX_CONNECTIONS, "max-connections", max_connections, 0, 10000000),
	SIZE_KEY(CFG_MAX_SCHEDULED_MESSAGES, "max-scheduled-messages", max_scheduled_messages, 0,
	    100000000),
	UINT_KEY(CFG_CONNECT_TIMEOUT_MS, "connect-timeout-ms", connect_timeout_ms, 10, 86400000),
	UINT_KEY(CFG_FRAME_TIMEOUT_MS, "frame-timeout-ms", frame_timeout_ms, 10, 86400000),
	KEY(CFG_USERS_FILE, "users-file", T_PATH, users_file, 0, 0, false),
	KEY(CFG_ALLOW_ANONYMOUS, "allow-anonymous", T_BOOL, allow_anonymous, 0, 0, false),
	UINT_KEY(CFG_AUTH_DELAY_MS, "auth-delay-ms", auth_delay_ms, 0, 60000),
	KEY(CFG_LISTEN, "listen", T_LISTEN, listen, 0, 0, true),
	KEY(CFG_TLS_CERT_FILE, "tls-cert-file", T_PATH, tls_cert_file, 0, 0, false),
	KEY(CFG_TLS_KEY_FILE, "tls-key-file", T_PATH, tls_key_file, 0, 0, false),
	KEY(CFG_TLS_CA_FILE, "tls-ca-file", T_PATH, tls_ca_file, 0, 0, false),
	KEY(CFG_TLS_VERIFY_CLIENT, "tls-verify-client", T_BOOL, tls_verify_client, 0, 0, false),
	KEY(CFG_TLS_MIN_VERSION, "tls-min-version", T_TLS_VERSION, tls_min_version, 0, 0, false),
	KEY(CFG_TLS_CIPHERS, "tls-ciphers", T_STRING, tls_ciphers, 0, 0, false),
	KEY(CFG_WS_ALLOWED_ORIGINS, "ws-allowed-origins", T_STRING, ws_allowed_origins, 0, 0, false),
	KEY(CFG_WS_FRAME, "ws-frame", T_WS_FRAME, ws_frame, 0, 0, false),
	KEY(CFG_DATA_DIR, "data-dir", T_PATH, data_dir, 0, 0, false),
	KEY(CFG_FSYNC, "fsync", T_FSYNC, fsync, 0, 0, false),
	KEY(CFG_PERSISTENT_DEFAULT, "persistent-default", T_BOOL, persistent_default, 0, 0, false),
	SIZE_KEY(CFG_MAX_DISK, "max-disk", max_disk, 0, 1ull << 60),
	SIZE_KEY(CFG_JOURNAL_SEGMENT_SIZE, "journal-segment-size", journal_segment_size, 64u << 10,
	    1ull << 30),
	KEY(CFG_RECOVER, "recover", T_BOOL, recover, 0, 0, false),
	KEY(CFG_CLUSTER, "cluster", T_STRING, cluster, 0, 0, false),
	KEY(CFG_CLUSTER_USER, "cluster-user", T_STRING, cluster_user, 0, 0, false),
	KEY(CFG_CLUSTER_PASSWORD, "cluster-password", T_STRING, cluster_password, 0, 0, false),
	KEY(CFG_CLUSTER_CREDS_FILE, "cluster-creds-file", T_PATH, cluster_creds_file, 0, 0, false),
	KEY(CFG_NODE_NAME, "node-name", T_STRING, node_name, 0, 0, false),
	UINT_KEY(CFG_CLUSTER_REPLICAS, "cluster-replicas", cluster_replicas, 1, 5),
	UINT_KEY(CFG_CLUSTER_ACK_WAIT_MS, "cluster-ack-wait-ms", cluster_ack_wait_ms, 100, 3600000),
	UINT_KEY(CFG_CLUSTER_QUEUE_STREAMS, "cluster-queue-streams", cluster_queue_streams, 1, 1024),
	UINT_KEY(CFG_CLUSTER_STATS_MS, "cluster-stats-ms", cluster_stats_ms, 0, 3600000),
	KEY(CFG_LOG_FILE, "log-file", T_PATH, log_file, 0, 0, false),
	KEY(CFG_REDELIVERED_ALWAYS, "redelivered-always", T_BOOL, redelivered_always, 0, 0, false),
};

/* Strong TLS 1.2 suites with forward secrecy (TLS 1.3 suites are OpenSSL's). */
#define DEFAULT_TLS_CIPHERS "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20"

/* The default body limit; a frame must also carry headers, hence the extra
 * megabyte in the default frame limit. */
#define DEFAULT_BODY_SIZE (16u << 20)
#define DEFAULT_FRAME_SIZE (DEFAULT_BODY_SIZE + (1u << 20))
/* The least a frame with a body adds to it: "SEND\n", the blank line, the NUL. */
#define FRAME_MIN_OVERHEAD 7

void
config_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->bind, sizeof(cfg->bind), "127.0.0.1");
	cfg->port = 61613;
	cfg->log_level = EFT_LOG_INFO;
	cfg->max_frame_size = DEFAULT_FRAME_SIZE;
	cfg->max_headers = 1000;
	cfg->max_header_line = 64u << 10;
	cfg->heartbeat_min_ms = 1000;
	cfg->output_high_water = 512u << 10;
	cfg->message_cache = 64u << 20;
	cfg->max_body_size = DEFAULT_BODY_SIZE;
	cfg->max_subscriptions = 1000;
	cfg->max_connections = 0;
	cfg->max_scheduled_messages = 100000;
	cfg->max_output = 64u << 20;
	cfg->policy.max_queue_messages = 10000000;
	cfg->policy.max_queue_bytes = 0;
	cfg->policy.overflow = OVERFLOW_BLOCK;
	cfg->policy.message_ttl_ms = 0;
	cfg->policy.max_redeliveries = 0;
	cfg->policy.dead_letter_queue[0] = '\0';
	cfg->max_memory = 0;
	cfg->connect_timeout_ms = 10000;
	cfg->frame_timeout_ms = 30000;
	cfg->auth_delay_ms = 1000;
	cfg->users_file[0] = '\0';
	cfg->allow_anonymous = true;
	snprintf(cfg->tls_min_version, sizeof(cfg->tls_min_version), "1.2");
	snprintf(cfg->tls_ciphers, sizeof(cfg->tls_ciphers), "%s", DEFAULT_TLS_CIPHERS);
	snprintf(cfg->ws_frame, sizeof(cfg->ws_frame), "text");
	snprintf(cfg->fsync, sizeof(cfg->fsync), "everysec");
	cfg->journal_segment_size = 64u << 20;
	cfg->cluster_replicas = 1;
	cfg->cluster_ack_wait_ms = 30000;
	cfg->cluster_queue_streams = 32;
	cfg->cluster_stats_ms = 5000;
}

static int
parse_size(const char *value, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	if (!isdigit((unsigned char)value[0]))
		return -1;
	unsigned long long n = strtoull(value, &end, 10);
	if (errno != 0)
		return -1;
	uint64_t mult = 1;
	if (*end == 'k' || *end == 'K')
		mult = 1024, end++;
	else if (*end == 'm' || *end == 'M')
		mult = 1024 * 1024, end++;
	else if (*end == 'g' || *end == 'G')
		mult = 1024ull * 1024 * 1024, end++;
	if (*end != '\0' || n > max / mult || n * mult < min || n * mult > max)
		return -1;
	*out = n * mult;
	return 0;
}

static int
find_key(const char *name)
{
	for (int i = 0; i < CFG_NKEYS; i++)
		if (strcmp(keys[i].name, name) == 0)
			return i;
	return -1;
}

/* scheme://HOST:PORT[/PATH] into out (a path only for ws and wss); -1 with
 * a reason. */
static int
parse_listen(const char *value, struct config_listen *out, char *err, size_t errlen)
{
	static const char *const schemes[] = { "tcp", "tls", "ws", "wss", "http" };
	const char *sep = strstr(value, "://");
	size_t slen = sep ? (size_t)(sep - value) : 0;
	bool known = false;
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
		known |= slen == strlen(schemes[i]) && memcmp(value, schemes[i], slen) == 0;
	if (!known) {
		snprintf(err, errlen, "listen: '%s' does not start with tcp://, tls://, ws://, wss:// "
		    "or http://", value);
		return -1;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out->scheme, value, slen);
	bool ws = out->scheme[0] == 'w';
	const char *host = sep + 3, *colon;
	/* The authority ends at the path (after an IPv6 address's bracket). */
	const char *slash = strchr(*host == '[' && strchr(host, ']') ? strchr(host, ']') : host, '/');
	const char *end = slash ? slash : host + strlen(host);
	size_t hlen;
	if (slash != NULL && !ws) {
		snprintf(err, errlen, "listen: '%s': only ws:// and wss:// listeners have a path", value);
		return -1;
	}
	if (*host == '[') {
		const char *close = memchr(host, ']', (size_t)(end - host));
		if (close == NULL || close[1] != ':') {
			snprintf(err, errlen, "listen: '%s': an IPv6 address is written [ADDR]:PORT",
			    value);
			return -1;
		}
		host++;
		hlen = (size_t)(close - host);
		colon = close + 1;
	} else {
		colon = NULL;
		for (const char *q = host; q < end; q++)
			if (*q == ':')
				colon = q;
		hlen = colon ? (size_t)(colon - host) : 0;
		if (colon != NULL && memchr(host, ':', hlen) != NULL) {
			snprintf(err, errlen, "listen: '%s': write an IPv6 address in brackets, "
			    "%s://[ADDR]:PORT", value, out->scheme);
			return -1;
		}
	}
	char portbuf[8];
	size_t plen = colon ? (size_t)(end - colon - 1) : 0;
	uint64_t port;
	if (colon == NULL || hlen == 0 || hlen >= sizeof(out->host) || plen == 0 ||
	    plen >= sizeof(portbuf) || (memcpy(portbuf, colon + 1, plen), portbuf[plen] = '\0',
	    parse_size(portbuf, 0, 65535, &port)) != 0) {
		snprintf(err, errlen, "listen: '%s' is not %s://HOST:PORT%s (PORT 0-65535)", value,
		    out->scheme, ws ? "[/PATH]" : "");
		return -1;
	}
	if (strlen(value) >= sizeof(out->url) || (slash && strlen(slash) >= sizeof(out->path))) {
		snprintf(err, errlen, "listen: URL too long");
		return -1;
	}
	if (slash != NULL && strpbrk(slash, " ?#\t") != NULL) {
		snprintf(err, errlen, "listen: '%s': the path may not hold a space, '?' or '#'", value);
		return -1;
	}
	memcpy(out->host, host, hlen);
	out->port = (uint16_t)port;
	if (ws)
		snprintf(out->path, sizeof(out->path), "%s", slash ? slash : "/ws");
	snprintf(out->url, sizeof(out->url), "%s", value);
	return 0;
}

static int parse_policy(struct config *, const char *, char *, size_t);

/* A dead-letter queue: one /queue/NAME, not a pattern; "" for none. */
static int
check_queue(const struct key_def *k, const char *value, char *err, size_t errlen)
{
	if (value[0] == '\0')
		return 0;
	if (strlen(value) >= k->size) {
		snprintf(err, errlen, "%s: longer than %zu bytes", k->name, k->size - 1);
		return -1;
	}
	if (strncmp(value, "/queue/", 7) != 0 || value[7] == '\0') {
		snprintf(err, errlen, "%s: '%s' is not /queue/NAME", k->name, value);
		return -1;
	}
	if (strpbrk(value, "*>") != NULL) {
		snprintf(err, errlen, "%s: '%s' is a pattern: a dead-letter queue is one queue, "
		    "without '*' or '>'", k->name, value);
		return -1;
	}
	for (const char *s = value; *s != '\0'; s++) {
		if ((unsigned char)*s <= ' ' || *s == 0x7f) {
			snprintf(err, errlen, "%s: '%s' holds a space or a control character",
			    k->name, value);
			return -1;
		}
	}
	return 0;
}

/* Parse value into field, key k's field in cfg or in a policy line's
 * values; -1 with a reason, field as it was. */
static int
set_value(struct config *cfg, const struct key_def *k, char *field, const char *value, char *err,
    size_t errlen)
{
	uint64_t n;
	switch (k->type) {
	case T_ADDR:
		if (strlen(value) == 0 || strlen(value) >= sizeof(cfg->bind)) {
			snprintf(err, errlen, "%s: bad address '%s'", k->name, value);
			return -1;
		}
		snprintf(field, sizeof(cfg->bind), "%s", value);
		return 0;
	case T_PORT:
		if (parse_size(value, k->min, k->max, &n) != 0) {
			snprintf(err, errlen, "%s: '%s' is not a port number (0-65535)", k->name, value);
			return -1;
		}
		*(uint16_t *)field = (uint16_t)n;
		return 0;
	case T_LEVEL:
		if (log_level_parse(value, (enum log_level *)field) != 0) {
			snprintf(err, errlen, "%s: '%s' is not one of error, warn, info, debug",
			    k->name, value);
			return -1;
		}
		return 0;
	case T_BOOL:
		if (strcmp(value, "yes") == 0 || strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
			*(bool *)field = true;
		else if (strcmp(value, "no") == 0 || strcmp(value, "false") == 0 ||
		    strcmp(value, "0") == 0)
			*(bool *)field = false;
		else {
			snprintf(err, errlen, "%s: '%s' is not yes or no", k->name, value);
			return -1;
		}
		return 0;
	case T_PATH:
		if (strlen(value) >= PATH_MAX) {
			snprintf(err, errlen, "%s: path too long", k->name);
			return -1;
		}
		snprintf(field, PATH_MAX, "%s", value);
		return 0;
	case T_STRING:
		if (strlen(value) >= k->size) {
			snprintf(err, errlen, "%s: too long", k->name);
			return -1;
		}
		snprintf(field, k->size, "%s", value);
		return 0;
	case T_WS_FRAME:
		if (strcmp(value, "text") != 0 && strcmp(value, "binary") != 0) {
			snprintf(err, errlen, "%s: '%s' is not text or binary", k->name, value);
			return -1;
		}
		snprintf(field, sizeof(cfg->ws_frame), "%s", value);
		return 0;
	case T_FSYNC:
		if (strcmp(value, "always") != 0 && strcmp(value, "everysec") != 0 &&
		    strcmp(value, "no") != 0) {
			snprintf(err, errlen, "%s: '%s' is not always, everysec or no", k->name, value);
			return -1;
		}
		snprintf(field, sizeof(cfg->fsync), "%s", value);
		return 0;
	case T_TLS_VERSION:
		if (strcmp(value, "1.2") != 0 && strcmp(value, "1.3") != 0) {
			snprintf(err, errlen, "%s: '%s' is not 1.2 or 1.3", k->name, value);
			return -1;
		}
		snprintf(field, sizeof(cfg->tls_min_version), "%s", value);
		return 0;
	case T_LISTEN: {
		struct config_listen l;
		if (cfg->nlisten == CONFIG_MAX_LISTENERS) {
			snprintf(err, errlen, "listen: at most %d listeners", CONFIG_MAX_LISTENERS);
			return -1;
		}
		if (parse_listen(value, &l, err, errlen) != 0)
			return -1;
		cfg->listen[cfg->nlisten++] = l;
		return 0;
	}
	case T_OVERFLOW:
		if (strcmp(value, "block") == 0)
			*(enum queue_overflow *)field = OVERFLOW_BLOCK;
		else if (strcmp(value, "drop-head") == 0)
			*(enum queue_overflow *)field = OVERFLOW_DROP_HEAD;
		else {
			snprintf(err, errlen, "%s: '%s' is not block or drop-head", k->name, value);
			return -1;
		}
		return 0;
	case T_QUEUE:
		if (check_queue(k, value, err, errlen) != 0)
			return -1;
		snprintf(field, k->size, "%s", value);
		return 0;
	case T_POLICY:
		return parse_policy(cfg, value, err, errlen);
	case T_SIZE:
	case T_UINT:
		if (parse_size(value, k->min, k->max, &n) != 0) {
			snprintf(err, errlen, "%s: '%s' is not a number from %llu to %llu", k->name,
			    value, (unsigned long long)k->min, (unsigned long long)k->max);
			return -1;
		}
		/* As wide as the field: unsigned, uint32_t, size_t or uint64_t. */
		if (k->size == sizeof(uint64_t))
			memcpy(field, &n, sizeof(n));
		else {
			uint32_t n32 = (uint32_t)n;
			memcpy(field, &n32, sizeof(n32));
		}
		return 0;
	}
	return -1;
}

/* Where key k's field is in a struct dest_policy. */
static size_t
policy_offset(int k)
{
	return keys[k].offset - offsetof(struct config, policy);
}

/* `PATTERN key=value ...`: one more policy line in cfg.  The values are
 * parsed by set_value as the global keys are.  -1 with a reason, cfg as
 * it was. */
static int
parse_policy(struct config *cfg, const char *value, char *err, size_t errlen)
{
	static const char ws[] = " \t\r\n\v\f";
	struct config_policy p;
	char line[1024], why[384], *save, *tok;
	if (cfg->npolicies == CONFIG_MAX_POLICIES) {
		snprintf(err, errlen, "policy: at most %d policy lines", CONFIG_MAX_POLICIES);
		return -1;
	}
	if (strlen(value) >= sizeof(line)) {
		snprintf(err, errlen, "policy: longer than %zu bytes", sizeof(line) - 1);
		return -1;
	}
	memcpy(line, value, strlen(value) + 1);
	const char *pattern = strtok_r(line, ws, &save);
	if (pattern == NULL) {
		snprintf(err, errlen, "policy: expected 'PATTERN key=value ...'");
		return -1;
	}
	const char *bad = policy_pattern_check(pattern);
	if (bad != NULL) {
		snprintf(err, errlen, "policy: pattern '%s' %s", pattern, bad);
		return -1;
	}
	memset(&p, 0, sizeof(p));
	snprintf(p.pattern, sizeof(p.pattern), "%s", pattern);
	while ((tok = strtok_r(NULL, ws, &save)) != NULL) {
		char *eq = strchr(tok, '=');
		if (eq == NULL || eq == tok) {
			snprintf(err, errlen, "policy %s: '%s' is not key=value (no spaces around '=')",
			    pattern, tok);
			return -1;
		}
		*eq = '\0';
		int k = find_key(tok);
		if (k < CONFIG_POLICY_FIRST || k > CONFIG_POLICY_LAST) {
			size_t n = (size_t)snprintf(why, sizeof(why), "one of");
			for (int i = CONFIG_POLICY_FIRST; i <= CONFIG_POLICY_LAST && n < sizeof(why); i++)
				n += (size_t)snprintf(why + n, sizeof(why) - n, " %s%s", keys[i].name,
				    i < CONFIG_POLICY_LAST ? "," : "");
			snprintf(err, errlen, "policy %s: '%s' is not a policy key (%s)", pattern, tok,
			    why);
			return -1;
		}
		if (p.set & CONFIG_POLICY_BIT(k)) {
			snprintf(err, errlen, "policy %s: '%s' is given twice", pattern, tok);
			return -1;
		}
		if (set_value(cfg, &keys[k], (char *)&p.values + policy_offset(k), eq + 1, why,
		    sizeof(why)) != 0) {
			snprintf(err, errlen, "policy %s: %s", pattern, why);
			return -1;
		}
		p.set |= CONFIG_POLICY_BIT(k);
	}
	if (p.set == 0) {
		snprintf(err, errlen, "policy %s: no key=value settings", pattern);
		return -1;
	}
	cfg->policies[cfg->npolicies++] = p;
	return 0;
}

int
config_set(struct config *cfg, const char *key, const char *value, char *err, size_t errlen)
{
	int i = find_key(key);
	if (i < 0) {
		snprintf(err, errlen, "unknown setting '%s'", key);
		return -1;
	}
	/* Flags override the file: the first --listen replaces its listeners,
	 * the first --policy its policy lines. */
	size_t *count = i == CFG_LISTEN ? &cfg->nlisten : i == CFG_POLICY ? &cfg->npolicies : NULL;
	size_t before = count != NULL ? *count : 0;
	if (count != NULL && cfg->origin[i] != CONFIG_FLAG)
		*count = 0;
	if (set_value(cfg, &keys[i], (char *)cfg + keys[i].offset, value, err, errlen) != 0) {
		if (count != NULL)
			*count = before;
		return -1;
	}
	cfg->origin[i] = CONFIG_FLAG;
	if (i == CFG_LISTEN)
		cfg->listen[cfg->nlisten - 1].origin = CONFIG_FLAG;
	return 0;
}

static char *
trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

/* A relative path set in the file at `path` means a file beside it: eftd
 * must find its users file whatever folder it was started from. */
static int
resolve_beside(char *file, const char *path)
{
	if (file[0] == '\0' || file[0] == '/')
		return 0;
	char dir[PATH_MAX], joined[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *real = realpath(dirname(dir), NULL);
	if (real == NULL)
		return -1;
	int n = snprintf(joined, sizeof(joined), "%s/%s", real, file);
	free(real);
	if (n < 0 || (size_t)n >= sizeof(joined))
		return -1;
	memcpy(file, joined, (size_t)n + 1);
	return 0;
}

/* One "key = value" line (comment and blanks gone); -1 with a reason. */
static int
load_line(struct config *cfg, char *s, int lineno, char *reason, size_t reasonlen)
{
	char *eq = strchr(s, '=');
	if (eq == NULL) {
		snprintf(reason, reasonlen, "expected 'key = value'");
		return -1;
	}
	*eq = '\0';
	char *key = trim(s);
	int i = find_key(key);
	if (i < 0) {
		snprintf(reason, reasonlen, "unknown setting '%s'", key);
		return -1;
	}
	if (cfg->origin[i] > 0 && !keys[i].repeats) {
		snprintf(reason, reasonlen, "'%s' is given twice, on lines %d and %d: keep one",
		    key, cfg->origin[i], lineno);
		return -1;
	}
	if (set_value(cfg, &keys[i], (char *)cfg + keys[i].offset, trim(eq + 1), reason,
	    reasonlen) != 0)
		return -1;
	cfg->origin[i] = lineno;
	if (i == CFG_LISTEN)
		cfg->listen[cfg->nlisten - 1].origin = lineno;
	return 0;
}

int
config_load(struct config *cfg, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "cannot read config %s: %s", path, strerror(errno));
		return -1;
	}
	char line[1024], reason[512];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		bool whole = strchr(line, '\n') != NULL || feof(f);
		char *hash = strchr(line, '#');
		if (hash != NULL)
			*hash = '\0';
		if (!whole) {
			/* Longer than the buffer: fine for a comment, not for a setting. */
			int ch;
			while ((ch = fgetc(f)) != EOF && ch != '\n')
				;
			if (*trim(line) != '\0') {
				snprintf(err, errlen, "%s:%d: line too long", path, lineno);
				rc = -1;
				break;
			}
			continue;
		}
		char *s = trim(line);
		if (*s == '\0')
			continue;
		if (load_line(cfg, s, lineno, reason, sizeof(reason)) != 0) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, reason);
			rc = -1;
			break;
		}
	}
	if (rc == 0 && ferror(f)) {
		snprintf(err, errlen, "cannot read config %s: %s", path, strerror(errno));
		rc = -1;
	}
	fclose(f);
	for (int i = 0; rc == 0 && i < CFG_NKEYS; i++) {
		char *file = (char *)cfg + keys[i].offset;
		if (keys[i].type == T_PATH && cfg->origin[i] > 0 && resolve_beside(file, path) != 0) {
			snprintf(err, errlen, "%s:%d: %s: cannot resolve '%s' beside %s", path,
			    cfg->origin[i], keys[i].name, file, path);
			rc = -1;
		}
	}
	if (rc == 0)
		snprintf(cfg->path, sizeof(cfg->path), "%s", path);
	return rc;
}

/* "max-body-size (20m, line 4)" or "max-frame-size (16m, the default)". */
static void
describe(const struct config *cfg, enum config_key k, char *out, size_t outlen)
{
	size_t v = *(const size_t *)((const char *)cfg + keys[k].offset);
	char num[32];
	if (v != 0 && v % (1u << 20) == 0)
		snprintf(num, sizeof(num), "%zum", v >> 20);
	else if (v != 0 && v % 1024 == 0)
		snprintf(num, sizeof(num), "%zuk", v >> 10);
	else
		snprintf(num, sizeof(num), "%zu", v);
	if (cfg->origin[k] > 0)
		snprintf(out, outlen, "%s (%s, line %d)", keys[k].name, num, cfg->origin[k]);
	else if (cfg->origin[k] == CONFIG_FLAG)
		snprintf(out, outlen, "%s (%s)", keys[k].name, num);
	else
		snprintf(out, outlen, "%s (%s, the default)", keys[k].name, num);
}

/* small <= large, where small's default may follow large: -1 with a reason
 * naming both when the user set small above what large allows. */
static int
check_pair(struct config *cfg, enum config_key small, size_t allowed, enum config_key large,
    const char *is, const char *than, size_t follow, char *err, size_t errlen)
{
	size_t *v = (size_t *)((char *)cfg + keys[small].offset);
	if (*v <= allowed)
		return 0;
	if (cfg->origin[small] == CONFIG_DEFAULT) {
		*v = follow;
		return 0;
	}
	char a[128], b[128];
	describe(cfg, small, a, sizeof(a));
	describe(cfg, large, b, sizeof(b));
	snprintf(err, errlen, "%s%s%s is %s %s%s: raise %s or lower %s",
	    cfg->path[0] ? cfg->path : "", cfg->path[0] ? ": " : "", a, is, b, than,
	    keys[large].name, keys[small].name);
	return -1;
}

bool
config_listen_is_http(const struct config_listen *l)
{
	return strcmp(l->scheme, "http") == 0;
}

bool
config_host_is_loopback(const char *host)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (strcmp(host, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, host, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* cluster: nats:// (or tls://) URLs, comma-separated, each with a port; a
 * login is a user with a password, or a creds file, not both. */
static int
check_cluster(const struct config *cfg, char *err, size_t errlen)
{
	bool login = cfg->cluster_user[0] || cfg->cluster_password[0];
	if (!cfg->cluster[0]) {
		if (login || cfg->cluster_creds_file[0] || cfg->node_name[0]) {
			snprintf(err, errlen, "cluster-user, cluster-password, cluster-creds-file and "
			    "node-name need cluster = nats://HOST:PORT");
			return -1;
		}
		return 0;
	}
	if (cfg->cluster_stats_ms != 0 && cfg->cluster_stats_ms < 200) {
		snprintf(err, errlen, "cluster-stats-ms: %u is too often; give 0 (never) or 200 and up",
		    cfg->cluster_stats_ms);
		return -1;
	}
	char list[sizeof(cfg->cluster)];
	snprintf(list, sizeof(list), "%s", cfg->cluster);
	char *save = NULL;
	for (char *url = strtok_r(list, ", ", &save); url; url = strtok_r(NULL, ", ", &save)) {
		const char *rest = strncmp(url, "nats://", 7) == 0 ? url + 7 :
		    strncmp(url, "tls://", 6) == 0 ? url + 6 : NULL;
		const char *colon = rest ? strrchr(rest, ':') : NULL;
		if (rest == NULL || colon == NULL || colon == rest || colon[1] == '\0' ||
		    strspn(colon + 1, "0123456789") != strlen(colon + 1)) {
			snprintf(err, errlen, "cluster: '%s' is not nats://HOST:PORT", url);
			return -1;
		}
	}
	if (cfg->cluster_user[0] != '\0' && cfg->cluster_password[0] == '\0') {
		snprintf(err, errlen, "cluster-user needs cluster-password");
		return -1;
	}
	if (login && cfg->cluster_creds_file[0]) {
		snprintf(err, errlen, "cluster-creds-file and cluster-user/cluster-password: give one "
		    "way to log in to NATS");
		return -1;
	}
	if (cfg->data_dir[0]) {
		snprintf(err, errlen, "data-dir and cluster: in a cluster JetStream keeps the queues' "
		    "messages, not the local journal; give one of them");
		return -1;
	}
	return 0;
}

/* Would binding a and b clash (EADDRINUSE)?  The same port (not 0) on the
 * same host, or on 0.0.0.0 and an IPv4 address. */
static bool
listen_clash(const struct config_listen *a, const struct config_listen *b)
{
	struct in_addr a4;
	if (a->port == 0 || a->port != b->port)
		return false;
	if (strcasecmp(a->host, b->host) == 0)
		return true;
	return (strcmp(a->host, "0.0.0.0") == 0 && inet_pton(AF_INET, b->host, &a4) == 1) ||
	    (strcmp(b->host, "0.0.0.0") == 0 && inet_pton(AF_INET, a->host, &a4) == 1);
}

/* "listen = URL (line 4)", "--listen URL", "tcp://HOST:PORT (--port)". */
static void
describe_listen(const struct config *cfg, const struct config_listen *l, char *out,
    size_t outlen)
{
	enum config_key k = cfg->origin[CFG_PORT] != CONFIG_DEFAULT ? CFG_PORT : CFG_BIND;
	if (l->origin > 0)
		snprintf(out, outlen, "listen = %s (line %d)", l->url, l->origin);
	else if (l->origin == CONFIG_FLAG)
		snprintf(out, outlen, "--listen %s", l->url);
	else if (cfg->origin[k] == CONFIG_FLAG)
		snprintf(out, outlen, "%s (--%s)", l->url, keys[k].name);
	else if (cfg->origin[k] > 0)
		snprintf(out, outlen, "%s (%s, line %d)", l->url, keys[k].name, cfg->origin[k]);
	else
		snprintf(out, outlen, "%s (the default bind and port)", l->url);
}

/* Two listeners on one address and port: the second would fail with
 * "Address already in use", which does not say that eftd itself holds it. */
static int
check_listen_clash(const struct config *cfg, char *err, size_t errlen)
{
	for (size_t i = 0; i < cfg->nlisten; i++) {
		for (size_t j = i + 1; j < cfg->nlisten; j++) {
			const struct config_listen *a = &cfg->listen[i], *b = &cfg->listen[j];
			if (!listen_clash(a, b))
				continue;
			bool file = a->origin > 0 || b->origin > 0;
			if (strcmp(a->url, b->url) == 0 && a->origin != CONFIG_DEFAULT &&
			    b->origin != CONFIG_DEFAULT) {
				if (a->origin > 0 && b->origin > 0)
					snprintf(err, errlen, "%s: listen = %s is given twice, on lines %d "
					    "and %d: keep one", cfg->path, a->url, a->origin, b->origin);
				else
					snprintf(err, errlen, "--listen %s is given twice: keep one", a->url);
				return -1;
			}
			char da[400], db[400];
			describe_listen(cfg, a, da, sizeof(da));
			describe_listen(cfg, b, db, sizeof(db));
			snprintf(err, errlen, "%s%s%s and %s are on the same address and port: give "
			    "each listener a port of its own", file ? cfg->path : "", file ? ": " : "",
			    da, db);
			return -1;
		}
	}
	return 0;
}

/* bind and port, the shorthand for one tcp:// listener, against listen.
 * Flags override the file: a bind or port flag replaces the file's STOMP
 * listeners (its admin listeners stay), a listen flag the file's bind and
 * port.  Both in the file, or both as flags, are an error. */
static int
check_listen_shorthand(struct config *cfg, char *err, size_t errlen)
{
	bool short_flag = cfg->origin[CFG_BIND] == CONFIG_FLAG || cfg->origin[CFG_PORT] == CONFIG_FLAG;
	bool short_file = cfg->origin[CFG_BIND] > 0 || cfg->origin[CFG_PORT] > 0;
	const char *name = cfg->origin[CFG_PORT] == CONFIG_FLAG ? "port" :
	    cfg->origin[CFG_BIND] == CONFIG_FLAG ? "bind" :
	    cfg->origin[CFG_BIND] != CONFIG_DEFAULT ? "bind" : "port";
	bool v6 = strchr(cfg->bind, ':') != NULL && cfg->bind[0] != '[';
	size_t nstomp = 0;
	for (size_t i = 0; i < cfg->nlisten; i++)
		nstomp += !config_listen_is_http(&cfg->listen[i]);
	if (nstomp == 0)
		return 0;
	if (cfg->origin[CFG_LISTEN] == CONFIG_FLAG) {
		if (!short_flag)
			return 0; /* --listen: the file's bind and port give way */
		snprintf(err, errlen, "--%s is the shorthand for one tcp:// listener: with --listen, "
		    "give every listener as a URL (e.g. --listen tcp://%s%s%s:%u)", name,
		    v6 ? "[" : "", cfg->bind, v6 ? "]" : "", cfg->port);
		return -1;
	}
	if (short_flag) {
		size_t n = 0;
		for (size_t i = 0; i < cfg->nlisten; i++)
			if (config_listen_is_http(&cfg->listen[i]))
				cfg->listen[n++] = cfg->listen[i];
		cfg->nlisten = n;
		return 0;
	}
	if (short_file) {
		snprintf(err, errlen, "%s%s%s is the shorthand for one tcp:// listener: with listen, "
		    "give every listener as a URL (e.g. listen = tcp://%s%s%s:%u)",
		    cfg->path[0] ? cfg->path : "", cfg->path[0] ? ": " : "", name, v6 ? "[" : "",
		    cfg->bind, v6 ? "]" : "", cfg->port);
		return -1;
	}
	return 0;
}

int
config_check(struct config *cfg, char *err, size_t errlen)
{
	if (check_listen_shorthand(cfg, err, errlen) != 0)
		return -1;
	size_t nstomp = 0;
	for (size_t i = 0; i < cfg->nlisten; i++)
		nstomp += !config_listen_is_http(&cfg->listen[i]);
	if (nstomp == 0) {
		/* The shorthand: one tcp listener (an admin listener alone serves no STOMP). */
		if (cfg->nlisten == CONFIG_MAX_LISTENERS) {
			snprintf(err, errlen, "too many listeners (at most %d)", CONFIG_MAX_LISTENERS);
			return -1;
		}
		struct config_listen l = { .scheme = "tcp", .port = cfg->port };
		snprintf(l.host, sizeof(l.host), "%s", cfg->bind);
		bool v6 = strchr(cfg->bind, ':') != NULL && cfg->bind[0] != '[';
		snprintf(l.url, sizeof(l.url), "tcp://%s%s%s:%u", v6 ? "[" : "", cfg->bind,
		    v6 ? "]" : "", cfg->port);
		if (cfg->bind[0] == '[') {
			size_t n = strlen(cfg->bind);
			snprintf(l.host, sizeof(l.host), "%.*s", (int)(n > 2 ? n - 2 : 0), cfg->bind + 1);
		}
		cfg->listen[cfg->nlisten++] = l;
	}
	if (check_listen_clash(cfg, err, errlen) != 0)
		return -1;
	const char *tls = NULL;
	for (size_t i = 0; i < cfg->nlisten; i++)
		if (strcmp(cfg->listen[i].scheme, "tls") == 0 || strcmp(cfg->listen[i].scheme, "wss") == 0)
			tls = cfg->listen[i].scheme;
	if (tls && (cfg->tls_cert_file[0] == '\0' || cfg->tls_key_file[0] == '\0')) {
		snprintf(err, errlen, "%s%sa %s:// listener needs tls-cert-file and tls-key-file",
		    cfg->path[0] ? cfg->path : "", cfg->path[0] ? ": " : "", tls);
		return -1;
	}
	if (cfg->tls_verify_client && cfg->tls_ca_file[0] == '\0') {
		snprintf(err, errlen, "%s%stls-verify-client = yes needs a tls-ca-file to check "
		    "client certificates against", cfg->path[0] ? cfg->path : "",
		    cfg->path[0] ? ": " : "");
		return -1;
	}
	for (size_t i = 0; i < cfg->nlisten; i++) {
		const struct config_listen *l = &cfg->listen[i];
		if (config_listen_is_http(l) && cfg->users_file[0] == '\0' && !config_host_is_loopback(l->host)) {
			snprintf(err, errlen, "%s%slisten = %s: without a users-file the admin listener "
			    "must be on a loopback address (127.0.0.1, ::1, localhost), or anyone who "
			    "reaches it could purge queues and close connections; set users-file and "
			    "mark an admin user (eft-passwd --admin)", cfg->path[0] ? cfg->path : "",
			    cfg->path[0] ? ": " : "", l->url);
			return -1;
		}
	}
	if (!cfg->allow_anonymous && cfg->users_file[0] == '\0') {
		snprintf(err, errlen, "%s%sallow-anonymous = no needs a users-file: without one "
		    "nobody could log in; set users-file (make it with eft-passwd)",
		    cfg->path[0] ? cfg->path : "", cfg->path[0] ? ": " : "");
		return -1;
	}
	size_t frame = cfg->max_frame_size;
	size_t carry = frame - FRAME_MIN_OVERHEAD;
	/* A default body limit the frame cannot carry becomes "none of its own":
	 * the frame limit bounds the body. */
	if (check_pair(cfg, CFG_MAX_BODY_SIZE, carry, CFG_MAX_FRAME_SIZE,
	    "more than a frame of", " can carry", 0, err, errlen) != 0)
		return -1;
	if (check_pair(cfg, CFG_MAX_HEADER_LINE, frame, CFG_MAX_FRAME_SIZE,
	    "longer than a whole frame of", "", frame, err, errlen) != 0)
		return -1;
	if (check_pair(cfg, CFG_OUTPUT_HIGH_WATER, cfg->max_output - 1, CFG_MAX_OUTPUT,
	    "not below", "", cfg->max_output / 2, err, errlen) != 0)
		return -1;
	if (check_cluster(cfg, err, errlen) != 0)
		return -1;
	/* Only now are the global settings final, wherever the file gave them. */
	for (size_t i = 0; i < cfg->npolicies; i++) {
		struct config_policy *p = &cfg->policies[i];
		for (int k = CONFIG_POLICY_FIRST; k <= CONFIG_POLICY_LAST; k++)
			if (!(p->set & CONFIG_POLICY_BIT(k)))
				memcpy((char *)&p->values + policy_offset(k),
				    (char *)&cfg->policy + policy_offset(k), keys[k].size);
		p->for_dlq = p->values;
		p->for_dlq.message_ttl_ms = 0;
	}
	cfg->policy_for_dlq = cfg->policy;
	cfg->policy_for_dlq.message_ttl_ms = 0;
	return 0;
}

static bool
names(const char *s, const char *name, size_t len)
{
	return strlen(s) == len && memcmp(s, name, len) == 0;
}

/* Do dead messages of some destination go to name? */
static bool
config_is_dead_letter_queue(const struct config *cfg, const char *name, size_t len)
{
	if (len == 0) /* "": dead messages are dropped */
		return false;
	if (names(cfg->policy.dead_letter_queue, name, len))
		return true;
	for (size_t i = 0; i < cfg->npolicies; i++)
		if (names(cfg->policies[i].values.dead_letter_queue, name, len))
			return true;
	return false;
}

const struct dest_policy *
config_policy(const struct config *cfg, const char *name, size_t len)
{
	/* A message-ttl meant for the queues a dead-letter queue collects for
	 * (a pattern that matches it too, or the global one) would let their
	 * dead letters expire unread. */
	bool dlq = config_is_dead_letter_queue(cfg, name, len);
	for (size_t i = 0; i < cfg->npolicies; i++) {
		const struct config_policy *p = &cfg->policies[i];
		if (!policy_match(p->pattern, name, len))
			continue;
		if (dlq && !(names(p->pattern, name, len) &&
		    (p->set & CONFIG_POLICY_BIT(CFG_MESSAGE_TTL))))
			return &p->for_dlq;
		return &p->values;
	}
	return dlq ? &cfg->policy_for_dlq : &cfg->policy;
}
