/* config.h - eftd settings: defaults, the key = value config file, overrides. */
#ifndef EFT_CONFIG_H
#define EFT_CONFIG_H

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
};

void config_defaults(struct config *cfg);
/* Set one key; 0 on success, -1 with a reason in err. */
int config_set(struct config *cfg, const char *key, const char *value, char *err, size_t errlen);
/* Read a key = value file ('#' comments, blank lines); -1 with a reason in err. */
int config_load(struct config *cfg, const char *path, char *err, size_t errlen);

#endif
