/* admin.h - what the admin listener answers, apart from HTTP: a request
 * (method, path, the format asked for) becomes a status and a body.  The
 * routes are in docs/admin-api.md: the dashboard (/), Prometheus metrics
 * (/metrics, metrics.h) and the JSON API (/api/...).  Who may ask is the
 * HTTP edge's business (http.c); everything here runs on the broker's loop
 * and reads the broker as it is between two loop turns. */
#ifndef EFT_ADMIN_H
#define EFT_ADMIN_H

#include <stddef.h>

#include "eft/sbuf.h"

struct broker;

/* JSON, or the same rows as tab-separated values (eftctl's tables). */
enum admin_format { ADMIN_JSON, ADMIN_TSV };

struct admin_reply {
	int status;                  /* HTTP status */
	const char *content_type;
	const char *allow;           /* 405: the methods the path takes, else NULL */
	struct sbuf body;
	const char *fixed;           /* a body not copied (the dashboard), else NULL */
	size_t fixed_len;
};

/* Answer method (GET, HEAD, POST, DELETE, ...) on path (percent-encoded, no
 * query) into r.  Purging, deleting and closing take effect at once; free
 * r with admin_reply_free. */
void admin_handle(struct broker *b, const char *method, const char *path, enum admin_format fmt,
    struct admin_reply *r);
void admin_reply_free(struct admin_reply *r);
/* The reply's body and its length. */
const char *admin_reply_body(const struct admin_reply *r, size_t *len);

/* The dashboard page (web/dashboard.html, in the binary). */
extern const char eft_dashboard_html[];
extern const char eft_dashboard_html_end[];

#endif
