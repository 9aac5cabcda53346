/* transport.c - what every transport shares (see transport.h). */
#include <stdarg.h>
#include <stdio.h>

#include "eft/transport.h"

void
transport_bind(struct transport *t, transport_cb on_readable, transport_cb on_writable, void *arg)
{
	t->on_readable = on_readable;
	t->on_writable = on_writable;
	t->arg = arg;
}

void
transport_fail(struct transport *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(t->error, sizeof(t->error), fmt, ap);
	va_end(ap);
}
