/* eft-passwd.c - make a line for eftd's users file.
 *
 *     eft-passwd NAME              asks for the password twice, without echo
 *     echo SECRET | eft-passwd NAME   reads one line from the pipe
 *
 * prints NAME:HASH (Argon2id, the parameters eftd expects); append
 * :read=PREFIX,... or :write=PREFIX,... to limit the user (see
 * etc/users.example). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <sodium.h>

#include "eft/auth.h"

static volatile sig_atomic_t eft_passwd_signal;

static void
eft_passwd_on_signal(int sig)
{
	eft_passwd_signal = sig;
}

/* One line from stdin without its line end into *out (malloc'd, *cap bytes);
 * -1 on EOF, a read error or a signal. */
static int
eft_passwd_read_line(char **out, size_t *cap, size_t *len)
{
	ssize_t n = getline(out, cap, stdin);
	if (n < 0)
		return -1;
	if (n > 0 && (*out)[n - 1] == '\n')
		n--;
	if (n > 0 && (*out)[n - 1] == '\r')
		n--;
	*len = (size_t)n;
	return 0;
}

/* Prompt on stderr and read a line with echo off.  A signal (^C) ends the
 * read without SA_RESTART, so the terminal always gets its echo back. */
static int
eft_passwd_ask(const char *prompt, char **out, size_t *cap, size_t *len)
{
	struct termios saved, quiet;
	struct sigaction sa, old_int, old_term, old_hup;
	int rc = -1;

	if (tcgetattr(STDIN_FILENO, &saved) != 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = eft_passwd_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	quiet = saved;
	quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) != 0)
		goto done;
	fputs(prompt, stderr);
	fflush(stderr);
	rc = eft_passwd_read_line(out, cap, len);
	fputc('\n', stderr);
done:
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	return eft_passwd_signal ? -1 : rc;
}

static void
eft_passwd_wipe(char **s, size_t cap)
{
	if (*s != NULL)
		sodium_memzero(*s, cap);
	free(*s);
	*s = NULL;
}

int
main(int argc, char **argv)
{
	char *pw = NULL, *again = NULL;
	size_t cap = 0, len = 0, again_cap = 0, again_len = 0;
	char hash[AUTH_HASH_MAX];
	int status = 1;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: eft-passwd NAME   (the password is read from stdin)\n"
		    "prints a NAME:HASH line for eftd's users file\n");
		return argc == 2 && strcmp(argv[1], "-h") == 0 ? 0 : 2;
	}
	const char *name = argv[1];
	if (!auth_name_valid(name, strlen(name))) {
		fprintf(stderr, "eft-passwd: '%s' cannot be a user name (no ':', blanks or control "
		    "characters)\n", name);
		goto fail;
	}
	if (isatty(STDIN_FILENO)) {
		if (eft_passwd_ask("Password: ", &pw, &cap, &len) != 0 ||
		    eft_passwd_ask("Password again: ", &again, &again_cap, &again_len) != 0) {
			fprintf(stderr, "eft-passwd: no password read\n");
			goto fail;
		}
		if (len != again_len || memcmp(pw, again, len) != 0) {
			fprintf(stderr, "eft-passwd: the passwords differ\n");
			goto fail;
		}
	} else if (eft_passwd_read_line(&pw, &cap, &len) != 0) {
		fprintf(stderr, "eft-passwd: no password on stdin%s%s\n", ferror(stdin) ? ": " : "",
		    ferror(stdin) ? strerror(errno) : "");
		goto fail;
	}
	if (len == 0) {
		fprintf(stderr, "eft-passwd: empty password\n");
		goto fail;
	}
	if (auth_hash_password(pw, len, hash, sizeof(hash)) != 0) {
		fprintf(stderr, "eft-passwd: hashing failed (out of memory?)\n");
		goto fail;
	}
	if (printf("%s:%s\n", name, hash) < 0 || fflush(stdout) != 0) {
		fprintf(stderr, "eft-passwd: cannot write: %s\n", strerror(errno));
		goto fail;
	}
	status = 0;
fail:
	eft_passwd_wipe(&pw, cap);
	eft_passwd_wipe(&again, again_cap);
	return status;
}
