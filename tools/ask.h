/* ask.h - a password from the terminal with echo off, for the command-line
 * tools (eft-passwd, eftctl). */
#ifndef EFT_TOOLS_ASK_H
#define EFT_TOOLS_ASK_H

#include <stddef.h>

/* Write prompt to the terminal (/dev/tty) and read one line from it with
 * echo off into buf: NUL-terminated, without its line end, cut at size - 1
 * bytes.  0, or -1 if there is no terminal, on end of input, or when a
 * signal (^C) came: no handler has SA_RESTART, so the read ends and the
 * terminal always gets its echo back. */
int ask_password(const char *prompt, char *buf, size_t size);

#endif
