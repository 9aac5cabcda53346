/* config.c - eftd settings.  Everything has a default so eftd runs with no
 * file at all; the file only overrides.  Keys are the long flag names. */
#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eft/config.h"

void
config_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->bind, sizeof(cfg->bind), "127.0.0.1");
	cfg->port = 61613;
	cfg->log_level = EFT_LOG_INFO;
	cfg->max_frame_size = 16u << 20;
	cfg->max_headers = 1000;
	cfg->max_header_line = 64u << 10;
	cfg->heartbeat_min_ms = 1000;
	cfg->output_high_water = 512u << 10;
	cfg->message_cache = 64u << 20;
	cfg->max_body_size = 16u << 20;
	cfg->max_subscriptions = 1000;
	cfg->max_connections = 0;
	cfg->max_output = 64u << 20;
	cfg->max_queue_messages = 10000000;
	cfg->max_queue_bytes = 0;
	cfg->max_memory = 0;
	cfg->connect_timeout_ms = 10000;
	cfg->frame_timeout_ms = 30000;
	cfg->auth_delay_ms = 1000;
	cfg->users_file[0] = '\0';
	cfg->allow_anonymous = true;
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

struct size_key {
	const char *name;
	size_t offset;
	int is_unsigned; /* field is unsigned int rather than size_t */
	uint64_t min, max;
};

static const struct size_key size_keys[] = {
	{ "max-frame-size", offsetof(struct config, max_frame_size), 0, 256, 1ull << 30 },
	{ "max-headers", offsetof(struct config, max_headers), 0, 8, 1000000 },
	{ "max-header-line", offsetof(struct config, max_header_line), 0, 64, 16u << 20 },
	{ "heartbeat-min-ms", offsetof(struct config, heartbeat_min_ms), 1, 10, 3600000 },
	{ "output-high-water", offsetof(struct config, output_high_water), 0, 4096, 1ull << 30 },
	{ "message-cache", offsetof(struct config, message_cache), 0, 0, 1ull << 40 },
	{ "max-body-size", offsetof(struct config, max_body_size), 0, 0, 1ull << 30 },
	{ "max-subscriptions", offsetof(struct config, max_subscriptions), 0, 1, 10000000 },
	{ "max-connections", offsetof(struct config, max_connections), 0, 0, 10000000 },
	{ "max-output", offsetof(struct config, max_output), 0, 64u << 10, 1ull << 40 },
	{ "max-queue-messages", offsetof(struct config, max_queue_messages), 0, 0, 1ull << 40 },
	{ "max-queue-bytes", offsetof(struct config, max_queue_bytes), 0, 0, 1ull << 50 },
	{ "max-memory", offsetof(struct config, max_memory), 0, 0, 1ull << 50 },
	{ "connect-timeout-ms", offsetof(struct config, connect_timeout_ms), 1, 10, 86400000 },
	{ "frame-timeout-ms", offsetof(struct config, frame_timeout_ms), 1, 10, 86400000 },
	{ "auth-delay-ms", offsetof(struct config, auth_delay_ms), 1, 0, 60000 },
};

int
config_set(struct config *cfg, const char *key, const char *value, char *err, size_t errlen)
{
	if (strcmp(key, "bind") == 0) {
		if (strlen(value) == 0 || strlen(value) >= sizeof(cfg->bind)) {
			snprintf(err, errlen, "bind: bad address '%s'", value);
			return -1;
		}
		snprintf(cfg->bind, sizeof(cfg->bind), "%s", value);
		return 0;
	}
	if (strcmp(key, "port") == 0) {
		uint64_t n;
		if (parse_size(value, 0, 65535, &n) != 0) {
			snprintf(err, errlen, "port: '%s' is not a port number (0-65535)", value);
			return -1;
		}
		cfg->port = (uint16_t)n;
		return 0;
	}
	if (strcmp(key, "users-file") == 0) {
		if (strlen(value) >= sizeof(cfg->users_file)) {
			snprintf(err, errlen, "users-file: path too long");
			return -1;
		}
		snprintf(cfg->users_file, sizeof(cfg->users_file), "%s", value);
		return 0;
	}
	if (strcmp(key, "allow-anonymous") == 0) {
		if (strcmp(value, "yes") == 0 || strcmp(value, "true") == 0 || strcmp(value, "1") == 0)
			cfg->allow_anonymous = true;
		else if (strcmp(value, "no") == 0 || strcmp(value, "false") == 0 || strcmp(value, "0") == 0)
			cfg->allow_anonymous = false;
		else {
			snprintf(err, errlen, "allow-anonymous: '%s' is not yes or no", value);
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "log-level") == 0) {
		if (log_level_parse(value, &cfg->log_level) != 0) {
			snprintf(err, errlen, "log-level: '%s' is not one of error, warn, info, debug", value);
			return -1;
		}
		return 0;
	}
	for (size_t i = 0; i < sizeof(size_keys) / sizeof(size_keys[0]); i++) {
		const struct size_key *k = &size_keys[i];
		if (strcmp(key, k->name) != 0)
			continue;
		uint64_t n;
		if (parse_size(value, k->min, k->max, &n) != 0) {
			snprintf(err, errlen, "%s: '%s' is not a number from %llu to %llu", key, value,
			    (unsigned long long)k->min, (unsigned long long)k->max);
			return -1;
		}
		char *field = (char *)cfg + k->offset;
		if (k->is_unsigned)
			*(unsigned *)field = (unsigned)n;
		else
			*(size_t *)field = (size_t)n;
		return 0;
	}
	snprintf(err, errlen, "unknown setting '%s'", key);
	return -1;
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

int
config_load(struct config *cfg, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "cannot read config %s: %s", path, strerror(errno));
		return -1;
	}
	char line[1024];
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
		char *eq = strchr(s, '=');
		if (eq == NULL) {
			snprintf(err, errlen, "%s:%d: expected 'key = value'", path, lineno);
			rc = -1;
			break;
		}
		*eq = '\0';
		char reason[256];
		if (config_set(cfg, trim(s), trim(eq + 1), reason, sizeof(reason)) != 0) {
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
	return rc;
}
