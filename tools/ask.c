/* ask.c - a password from the terminal with echo off (see ask.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "ask.h"

static volatile sig_atomic_t ask_signal;

static void
ask_on_signal(int sig)
{
	ask_signal = sig;
}

int
ask_password(const char *prompt, char *buf, size_t size)
{
	struct termios saved, quiet;
	struct sigaction sa, old_int, old_term, old_hup;
	size_t len = 0;
	int fd, rc = -1;

	if (size == 0 || (fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)) < 0)
		return -1;
	if (tcgetattr(fd, &saved) != 0) {
		close(fd);
		return -1;
	}
	ask_signal = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = ask_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	quiet = saved;
	quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
	if (tcsetattr(fd, TCSAFLUSH, &quiet) != 0)
		goto done;
	dprintf(fd, "%s", prompt);
	for (;;) {
		char c;
		ssize_t n = read(fd, &c, 1);
		if (n < 0 && errno == EINTR && !ask_signal)
			continue;
		if (n <= 0 || ask_signal)
			break;
		if (c == '\n') {
			rc = 0;
			break;
		}
		if (len + 1 < size)
			buf[len++] = c;
	}
	if (len > 0 && buf[len - 1] == '\r')
		len--;
	buf[len] = '\0';
	ssize_t nl = write(fd, "\n", 1);        /* cosmetic: no error */
	(void)nl;
done:
	tcsetattr(fd, TCSAFLUSH, &saved);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	close(fd);
	return ask_signal ? -1 : rc;
}
