/* report.c - text, CSV and JSON Lines output, warnings and progress.
 *
 * CSV and JSON share one fixed list of columns for every mode, so rows from
 * different modes and brokers can be concatenated and compared; a column a
 * mode does not measure is empty (CSV) or null (JSON). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

static const struct opts *opts;
static bool header_done;
static bool progress_shown;

static const char *const columns[] = {
	"mode", "server", "host", "port", "size", "count", "conns", "inflight", "ack",
	"send_s", "recv_s", "total_s", "delivered", "msgs_per_s", "mb_per_s",
	"lat_min_us", "lat_mean_us", "lat_p50_us", "lat_p90_us", "lat_p99_us", "lat_p999_us",
	"lat_max_us", "lost", "duplicated", "reordered", "corrupted", "complete", "error",
	"transport", "persistent", "receipt_window",
};
#define NCOLUMNS (sizeof(columns) / sizeof(columns[0]))

void
result_init(struct result *r, const struct opts *o, size_t size)
{
	memset(r, 0, sizeof(*r));
	r->size = size;
	r->count = o->count;
	r->send_s = r->recv_s = r->total_s = -1;
}

void
result_latency(struct result *r, const struct hist *h)
{
	if (h->count == 0)
		return;
	static const double q[] = { 0.5, 0.9, 0.99, 0.999 };
	r->has_lat = true;
	r->lat_us[0] = (double)h->min / 1e3;
	r->lat_us[1] = (double)h->sum / (double)h->count / 1e3;
	for (int i = 0; i < 4; i++)
		r->lat_us[2 + i] = (double)hist_quantile(h, q[i]) / 1e3;
	r->lat_us[6] = (double)h->max / 1e3;
}

void
result_rates(struct result *r)
{
	if (r->total_s > 0) {
		r->msgs_per_s = (double)r->delivered / r->total_s;
		r->mb_per_s = (double)r->delivered * (double)r->size / r->total_s / 1e6;
	}
}

bool
result_ok(const struct result *r)
{
	return r->complete && !r->error[0] && r->lost == 0 && r->duplicated == 0 &&
	    r->reordered == 0 && r->corrupted == 0;
}

void
report_init(const struct opts *o)
{
	opts = o;
	header_done = false;
}

/* ---- stderr ---- */

void
report_progress(const char *fmt, ...)
{
	va_list ap;
	fputs("\r", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\033[K", stderr);
	fflush(stderr);
	progress_shown = true;
}

void
report_progress_clear(void)
{
	if (progress_shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		progress_shown = false;
	}
}

static void
vsay(const char *prefix, const char *fmt, va_list ap)
{
	report_progress_clear();
	fflush(stdout);
	fprintf(stderr, "eft-bench: %s", prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void
report_warn(const char *fmt, ...)
{
	if (opts != NULL && opts->quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsay("warning: ", fmt, ap);
	va_end(ap);
}

void
report_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay("", fmt, ap);
	va_end(ap);
}

/* ---- text ---- */

/* What went wrong, in a few words, for the last column of the text table. */
static void
check_summary(char *out, size_t len, const struct result *r)
{
	size_t n = 0;
	out[0] = '\0';
#define ADD(...) n += (size_t)snprintf(out + n, n < len ? len - n : 0, __VA_ARGS__)
	if (r->lost)
		ADD("%slost %" PRIu64, n ? ", " : "", r->lost);
	if (r->duplicated)
		ADD("%sduplicated %" PRIu64, n ? ", " : "", r->duplicated);
	if (r->reordered)
		ADD("%sreordered %" PRIu64, n ? ", " : "", r->reordered);
	if (r->corrupted)
		ADD("%scorrupted %" PRIu64, n ? ", " : "", r->corrupted);
	if (r->expired)
		ADD("%sINCOMPLETE (--duration)", n ? ", " : "");
	else if (!r->complete || r->error[0])
		ADD("%sFAILED", n ? ", " : "");
	if (n == 0)
		ADD("ok");
#undef ADD
}

static void
text_secs(double s)
{
	if (s < 0)
		printf(" %9s", "-");
	else
		printf(" %9.4f", s);
}

static void
text_rate(double v, bool measured)
{
	if (!measured)
		printf(" %11s", "-");
	else
		printf(" %11.0f", v);
}

static void
text_mb(double v, bool measured)
{
	if (!measured)
		printf(" %9s", "-");
	else
		printf(" %9.1f", v);
}

static void
text_lat(const struct result *r)
{
	static const int pick[] = { 2, 4, 5, 6 }; /* p50 p99 p99.9 max */
	for (int i = 0; i < 4; i++) {
		if (r->has_lat)
			printf(" %9.1f", r->lat_us[pick[i]]);
		else
			printf(" %9s", "-");
	}
}

/* How the text table's header line names the transport. */
static const char *
transport_text(const struct opts *o)
{
	if (o->ws)
		return o->tls ? "WebSocket/TLS" : "WebSocket";
	return o->tls ? "TLS" : "TCP";
}

static void
text_header(const struct result *r)
{
	const struct opts *o = opts;
	printf("eft-bench %s: %s port %s over %s (%s), %" PRIu64 " %s per run, ack %s",
	    o->mode_name, o->host, o->port, transport_text(o),
	    r->server[0] ? r->server : "server unknown", o->count,
	    o->mode == MODE_RPC ? "requests" : "messages", ack_mode_name(o->ack));
	if (o->mode == MODE_RPC)
		printf(", %d client%s, %d in flight each", o->clients, o->clients == 1 ? "" : "s",
		    o->inflight);
	if (o->mode == MODE_FANOUT)
		printf(", %d subscribers", o->subscribers);
	if ((o->mode == MODE_STREAM || o->mode == MODE_FANOUT) && o->rate > 0)
		printf(", paced at %.0f msg/s", o->rate);
	if (o->persistent)
		printf(", persistent");
	if (o->receipt_window > 0)
		printf(", a RECEIPT per SEND, %d outstanding at most", o->receipt_window);
	printf("\n");
	switch (o->mode) {
	case MODE_SENDRECV:
		printf("%8s %9s %9s %9s %11s %9s  %s\n", "size", "send s", "recv s", "total s",
		    "msg/s", "MB/s", "check");
		break;
	case MODE_STREAM:
	case MODE_FANOUT:
		printf("%8s %9s %9s %11s %9s %9s %9s %9s %9s  %s\n", "size", "send s", "total s",
		    o->mode == MODE_FANOUT ? "deliv/s" : "msg/s", "MB/s", "p50 us", "p99 us",
		    "p99.9 us", "max us", "check");
		break;
	case MODE_RPC:
		printf("%8s %9s %11s %9s %9s %9s %9s %9s  %s\n", "size", "total s", "rpc/s", "MB/s",
		    "p50 us", "p99 us", "p99.9 us", "max us", "check");
		break;
	}
}

static void
text_row(const struct result *r)
{
	char check[160];
	bool rated = r->total_s > 0;
	check_summary(check, sizeof(check), r);
	printf("%8zu", r->size);
	switch (opts->mode) {
	case MODE_SENDRECV:
		text_secs(r->send_s);
		text_secs(r->recv_s);
		text_secs(r->total_s);
		text_rate(r->msgs_per_s, rated);
		text_mb(r->mb_per_s, rated);
		break;
	case MODE_STREAM:
	case MODE_FANOUT:
		text_secs(r->send_s);
		text_secs(r->total_s);
		text_rate(r->msgs_per_s, rated);
		text_mb(r->mb_per_s, rated);
		text_lat(r);
		break;
	case MODE_RPC:
		text_secs(r->total_s);
		text_rate(r->msgs_per_s, rated);
		text_mb(r->mb_per_s, rated);
		text_lat(r);
		break;
	}
	printf("  %s\n", check);
}

/* ---- CSV and JSON ---- */

enum kind { K_STR, K_NUM, K_INT, K_BOOL, K_NULL };

struct cell {
	enum kind kind;
	const char *s;
	double d;
	int prec;   /* decimals of a K_NUM */
	uint64_t u;
};

static void
csv_str(const char *s)
{
	if (strpbrk(s, ",\"\n\r") == NULL) {
		fputs(s, stdout);
		return;
	}
	putchar('"');
	for (; *s; s++) {
		if (*s == '"')
			putchar('"');
		putchar(*s);
	}
	putchar('"');
}

static void
json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

static void
row_cells(const struct result *r, struct cell *c)
{
	const struct opts *o = opts;
	int i = 0;
#define STR(v) c[i++] = (struct cell){ .kind = K_STR, .s = (v) }
#define INT(v) c[i++] = (struct cell){ .kind = K_INT, .u = (uint64_t)(v) }
#define NUM(v, p) c[i++] = (struct cell){ .kind = K_NUM, .d = (v), .prec = (p) }
#define NUL() c[i++] = (struct cell){ .kind = K_NULL }
	STR(o->mode_name);
	STR(r->server);
	STR(o->host);
	INT(strtoul(o->port, NULL, 10));
	INT(r->size);
	INT(r->count);
	INT(r->conns);
	if (o->mode == MODE_RPC)
		INT(o->inflight);
	else
		NUL();
	STR(ack_mode_name(o->ack));
	const double secs[] = { r->send_s, r->recv_s, r->total_s };
	for (int j = 0; j < 3; j++) {
		if (secs[j] < 0)
			NUL();
		else
			NUM(secs[j], 6);
	}
	INT(r->delivered);
	if (r->total_s > 0) {
		NUM(r->msgs_per_s, 1);
		NUM(r->mb_per_s, 3);
	} else {
		NUL();
		NUL();
	}
	for (int j = 0; j < 7; j++) {
		if (r->has_lat)
			NUM(r->lat_us[j], 1);
		else
			NUL();
	}
	INT(r->lost);
	INT(r->duplicated);
	INT(r->reordered);
	INT(r->corrupted);
	c[i++] = (struct cell){ .kind = K_BOOL, .u = r->complete };
	if (r->error[0])
		STR(r->error);
	else
		NUL();
	STR(o->ws ? (o->tls ? "wss" : "ws") : o->tls ? "tls" : "tcp");
	c[i++] = (struct cell){ .kind = K_BOOL, .u = o->persistent };
	if (o->mode == MODE_RPC)
		NUL();
	else
		INT(o->receipt_window);
#undef STR
#undef INT
#undef NUM
#undef NUL
}

static void
print_cell(const struct cell *c)
{
	bool json = opts->format == OUT_JSON;
	switch (c->kind) {
	case K_STR:
		if (json)
			json_str(c->s);
		else
			csv_str(c->s);
		break;
	case K_NUM:
		if (isfinite(c->d))
			printf("%.*f", c->prec, c->d);
		else if (json)
			fputs("null", stdout);
		break;
	case K_INT:
		printf("%" PRIu64, c->u);
		break;
	case K_BOOL:
		fputs(json ? (c->u ? "true" : "false") : (c->u ? "1" : "0"), stdout);
		break;
	case K_NULL:
		if (json)
			fputs("null", stdout);
		break;
	}
}

void
report_row(const struct result *r)
{
	report_progress_clear();
	if (opts->format == OUT_TEXT) {
		if (!header_done)
			text_header(r);
		header_done = true;
		text_row(r);
		fflush(stdout);
		return;
	}
	struct cell cells[NCOLUMNS];
	row_cells(r, cells);
	if (opts->format == OUT_CSV && !header_done) {
		for (size_t i = 0; i < NCOLUMNS; i++)
			printf("%s%s", i ? "," : "", columns[i]);
		putchar('\n');
	}
	header_done = true;
	if (opts->format == OUT_JSON)
		putchar('{');
	for (size_t i = 0; i < NCOLUMNS; i++) {
		if (i)
			putchar(',');
		if (opts->format == OUT_JSON)
			printf("\"%s\":", columns[i]);
		print_cell(&cells[i]);
	}
	if (opts->format == OUT_JSON)
		putchar('}');
	putchar('\n');
	fflush(stdout);
}

void
report_finish(void)
{
	report_progress_clear();
	fflush(stdout);
}
