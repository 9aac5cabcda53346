/* config.h - eftd settings: defaults, the key = value config file, overrides. */
#ifndef EFT_CONFIG_H
#define EFT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eft/log.h"

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
	size_t max_body_size;      /* bytes in one frame body */
	size_t max_subscriptions;  /* per connection */
	size_t max_connections;    /* in total; 0: as many as the open-file limit allows */
	size_t max_output;         /* pending output before a connection is cut off as too slow */
	size_t max_queue_messages; /* per queue; a producer to a full queue waits; 0: no limit */
	size_t max_queue_bytes;    /* per queue, message memory; 0: no limit of its own */
	size_t max_memory;         /* all messages held; producers wait above it; 0: 40% of RAM */
	unsigned connect_timeout_ms; /* from accept to CONNECT */
	unsigned frame_timeout_ms;   /* from a frame's first byte to its last */
	unsigned auth_delay_ms;      /* before answering a failed login */
	char users_file[256];      /* "" for none */
	bool allow_anonymous;      /* CONNECT without a known login is accepted */
};

void config_defaults(struct config *cfg);
/* Set one key; 0 on success, -1 with a reason in err. */
int config_set(struct config *cfg, const char *key, const char *value, char *err, size_t errlen);
/* Read a key = value file ('#' comments, blank lines); -1 with a reason in err. */
int config_load(struct config *cfg, const char *path, char *err, size_t errlen);

#endif
