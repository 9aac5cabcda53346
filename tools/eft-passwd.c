/* eft-passwd.c - make a line for eftd's users file, or put it in the file.
 *
 *     eft-passwd NAME                 asks for the password twice, without echo
 *     echo SECRET | eft-passwd NAME   reads one line from the pipe
 *     eft-passwd -f FILE NAME         (--file) adds NAME to FILE, or changes
 *                                     its password there
 *     eft-passwd --admin ...          (-a) marks NAME admin: it may use the
 *                                     admin HTTP listener (a mark already
 *                                     there stays; removing one is an edit)
 *
 * Without -f it prints NAME:HASH (Argon2id, the parameters eftd expects);
 * append :read=PREFIX,... or :write=PREFIX,... to limit the user (see
 * etc/users.example).
 *
 * With -f the hashes never pass through a shell redirection, which would
 * leave them readable by everyone under the usual umask: a new FILE is made
 * mode 0600, and an existing one readable by group or others is tightened
 * to 0600.  A new user is appended; a known user's line keeps its read= and
 * write= fields and only its hash changes (and :admin is added with --admin), and every other line stays byte
 * for byte.  Such a change is written to a temporary file beside FILE and
 * renamed over it, so eftd never reads half a file. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "eft/auth.h"

#include "ask.h"

/* The longest password read from a terminal. */
#define TTY_PASSWORD_MAX 1024

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

static void
eft_passwd_wipe(char **s, size_t cap)
{
	if (*s != NULL)
		sodium_memzero(*s, cap);
	free(*s);
	*s = NULL;
}

/* All of p to fd, or -1 with errno set. */
static int
eft_passwd_write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The whole of fd, from its start, into *out (malloc'd, *len bytes); -1 with
 * errno set.  pread, because fd is opened O_APPEND. */
static int
eft_passwd_read_all(int fd, char **out, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap), *bigger;

	if (buf == NULL)
		goto fail;
	for (;;) {
		if (n == cap) {
			if ((bigger = realloc(buf, cap * 2)) == NULL)
				goto fail;
			buf = bigger;
			cap *= 2;
		}
		ssize_t r = pread(fd, buf + n, cap - n, (off_t)n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto fail;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*out = buf;
	*len = n;
	return 0;
fail:
	free(buf);
	return -1;
}

/* How many lines of buf are NAME's; the first one's hash is bytes
 * [*hash, *hash_end).  Blank and comment lines are skipped, and blanks
 * around a line ignored, as eftd does. */
static int
eft_passwd_find_user(const char *buf, size_t len, const char *name, size_t *hash,
    size_t *hash_end, size_t *line_end, bool *admin)
{
	size_t nlen = strlen(name);
	int found = 0;

	for (size_t at = 0; at < len;) {
		const char *nl = memchr(buf + at, '\n', len - at);
		size_t end = nl != NULL ? (size_t)(nl - buf) : len, i = at;
		while (i < end && isspace((unsigned char)buf[i]))
			i++;
		if (end - i > nlen && buf[i] != '#' && memcmp(buf + i, name, nlen) == 0 &&
		    buf[i + nlen] == ':' && found++ == 0) {
			size_t h = i + nlen + 1;
			*hash = h;
			while (h < end && buf[h] != ':' && !isspace((unsigned char)buf[h]))
				h++;
			*hash_end = h;
			/* The fields end where the blanks at the end of the line start. */
			size_t e = end;
			while (e > h && isspace((unsigned char)buf[e - 1]))
				e--;
			*line_end = e;
			*admin = false;
			for (size_t f = h; f < e; f++)
				if (buf[f] == ':' && e - f >= 6 && memcmp(buf + f + 1, "admin", 5) == 0 &&
				    (f + 6 == e || buf[f + 6] == ':'))
					*admin = true;
		}
		at = end + 1;
	}
	return found;
}

/* FILE does not exist: make it, mode 0600 whatever the umask, holding line. */
static int
eft_passwd_file_create(const char *path, const char *line)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (fd < 0)
		goto fail;
	if (fchmod(fd, 0600) != 0 || eft_passwd_write_all(fd, line, strlen(line)) != 0 ||
	    fsync(fd) != 0)
		goto fail;
	if (close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	return 0;
fail:
	fprintf(stderr, "eft-passwd: cannot create %s: %s\n", path, strerror(errno));
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	return -1;
}

/* NAME is not in the file open as fd (O_APPEND, len bytes now): add line at
 * the end, on a line of its own.  A failed write is cut off again. */
static int
eft_passwd_file_append(int fd, const char *path, size_t len, char last, const char *line)
{
	if (len > 0 && last != '\n' && eft_passwd_write_all(fd, "\n", 1) != 0)
		goto fail;
	if (eft_passwd_write_all(fd, line, strlen(line)) != 0 || fsync(fd) != 0)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "eft-passwd: cannot write %s: %s\n", path, strerror(errno));
	if (ftruncate(fd, (off_t)len) != 0)
		fprintf(stderr, "eft-passwd: and cannot cut %s back to %zu bytes: %s\n", path, len,
		    strerror(errno));
	return -1;
}

/* NAME's hash is bytes [hash, hash_end) of buf, the file at path (its real
 * path: the rename must not replace a symbolic link): write buf with the new
 * hash there to a temporary file beside it, mode 0600 and path's owner and
 * group, then rename it over path, so eftd reads either file, never half. */
static int
eft_passwd_file_replace(const char *path, const struct stat *st, const char *buf, size_t len,
    size_t hash, size_t hash_end, const char *new_hash)
{
	const char *doing = "cannot make a temporary file beside";
	char *tmp = NULL, *dir = NULL;
	int fd = -1, dfd, rc = -1;

	if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		tmp = NULL;
		errno = ENOMEM;
		goto fail;
	}
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		free(tmp);
		tmp = NULL;     /* nothing to remove */
		goto fail;
	}
	doing = "cannot write a new";
	/* Only root may give a file away; others keep the file as theirs. */
	if (fchmod(fd, 0600) != 0 || (fchown(fd, st->st_uid, st->st_gid) != 0 && geteuid() == 0))
		goto fail;
	if (eft_passwd_write_all(fd, buf, hash) != 0 ||
	    eft_passwd_write_all(fd, new_hash, strlen(new_hash)) != 0 ||
	    eft_passwd_write_all(fd, buf + hash_end, len - hash_end) != 0 || fsync(fd) != 0)
		goto fail;
	int closing = fd;
	fd = -1;
	if (close(closing) != 0)
		goto fail;
	doing = "cannot replace";
	if (rename(tmp, path) != 0)
		goto fail;
	free(tmp);
	tmp = NULL;
	/* The rename itself lasts once the folder is on disk. */
	if ((dir = strdup(path)) != NULL &&
	    (dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	rc = 0;
fail:
	if (rc != 0)
		fprintf(stderr, "eft-passwd: %s %s: %s\n", doing, path, strerror(errno));
	if (fd >= 0)
		close(fd);
	if (tmp != NULL)
		unlink(tmp);
	free(tmp);
	free(dir);
	return rc;
}

/* Put NAME:HASH into the users file at path (see the top of this file) and
 * say what changed on stderr. */
static int
eft_passwd_file_update(const char *path, const char *name, const char *hash, bool admin)
{
	char *line = NULL, *buf = NULL, *real = NULL, *fields = NULL;
	size_t len = 0, at = 0, end = 0, line_end = 0;
	bool has_admin = false;
	struct stat st;
	int fd = -1, rc = -1, found;

	if (asprintf(&line, "%s:%s%s\n", name, hash, admin ? ":admin" : "") < 0) {
		line = NULL;
		fprintf(stderr, "eft-passwd: out of memory\n");
		goto done;
	}
	fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		if (eft_passwd_file_create(path, line) != 0)
			goto done;
		fprintf(stderr, "eft-passwd: added %s to %s (a new file, mode 0600)\n", name, path);
		rc = 0;
		goto done;
	}
	if (fd < 0 || fstat(fd, &st) != 0 || eft_passwd_read_all(fd, &buf, &len) != 0) {
		fprintf(stderr, "eft-passwd: %s: %s\n", path, strerror(errno));
		goto done;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "eft-passwd: %s is not a regular file\n", path);
		goto done;
	}
	found = eft_passwd_find_user(buf, len, name, &at, &end, &line_end, &has_admin);
	if (found > 1) {
		fprintf(stderr, "eft-passwd: %s is in %s %d times, which eftd refuses: remove all "
		    "but one first\n", name, path, found);
		goto done;
	}
	if (found == 0) {
		/* Tighten before the new hash goes in. */
		if ((st.st_mode & 077) != 0 && fchmod(fd, 0600) != 0) {
			fprintf(stderr, "eft-passwd: cannot make %s mode 0600: %s\n", path,
			    strerror(errno));
			goto done;
		}
		if (eft_passwd_file_append(fd, path, len, len > 0 ? buf[len - 1] : '\n', line) != 0)
			goto done;
	} else {
		if ((real = realpath(path, NULL)) == NULL) {
			fprintf(stderr, "eft-passwd: %s: %s\n", path, strerror(errno));
			goto done;
		}
		/* --admin on a user without the mark: the hash and the fields after
		 * it are replaced, with :admin at the end. */
		if (admin && !has_admin) {
			if (asprintf(&fields, "%s%.*s:admin", hash, (int)(line_end - end), buf + end) < 0) {
				fields = NULL;
				fprintf(stderr, "eft-passwd: out of memory\n");
				goto done;
			}
			end = line_end;
		}
		if (eft_passwd_file_replace(real, &st, buf, len, at, end, fields ? fields : hash) != 0)
			goto done;
	}
	if ((st.st_mode & 077) != 0)
		fprintf(stderr, "eft-passwd: %s was mode %04o, readable beyond its owner: now 0600\n",
		    path, (unsigned)(st.st_mode & 07777));
	fprintf(stderr, "eft-passwd: %s %s %s %s\n", found ? "updated" : "added", name,
	    found ? "in" : "to", path);
	rc = 0;
done:
	if (fd >= 0)
		close(fd);
	free(line);
	free(buf);
	free(real);
	free(fields);
	return rc;
}

static void
eft_passwd_usage(FILE *to)
{
	fprintf(to, "usage: eft-passwd [-a] [-f FILE] NAME   (the password is read from stdin)\n"
	    "prints a NAME:HASH line for eftd's users file; with -f (--file) FILE, adds NAME\n"
	    "to FILE or changes NAME's password there (a new FILE is made mode 0600);\n"
	    "with -a (--admin), NAME gets the admin mark: it may use eftd's admin listener\n");
}

int
main(int argc, char **argv)
{
	char *pw = NULL, *again = NULL;
	size_t cap = 0, len = 0, again_cap = 0, again_len = 0;
	char hash[AUTH_HASH_MAX];
	const char *file = NULL;
	bool admin = false;
	int status = 1, opt;
	static const struct option longopts[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "admin", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};

	while ((opt = getopt_long(argc, argv, "af:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'a':
			admin = true;
			break;
		case 'f':
			file = optarg;
			break;
		case 'h':
			eft_passwd_usage(stdout);
			return 0;
		default:
			eft_passwd_usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		eft_passwd_usage(stderr);
		return 2;
	}
	const char *name = argv[optind];
	if (!auth_name_valid(name, strlen(name)) || name[0] == '#') {
		fprintf(stderr, "eft-passwd: '%s' cannot be a user name (no ':', blanks or control "
		    "characters, and no '#' first)\n", name);
		goto fail;
	}
	if (isatty(STDIN_FILENO)) {
		cap = again_cap = TTY_PASSWORD_MAX;
		if ((pw = malloc(cap)) == NULL || (again = malloc(again_cap)) == NULL ||
		    ask_password("Password: ", pw, cap) != 0 ||
		    ask_password("Password again: ", again, again_cap) != 0) {
			fprintf(stderr, "eft-passwd: no password read\n");
			goto fail;
		}
		len = strlen(pw);
		again_len = strlen(again);
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
	if (file != NULL) {
		if (eft_passwd_file_update(file, name, hash, admin) != 0)
			goto fail;
	} else if (printf("%s:%s%s\n", name, hash, admin ? ":admin" : "") < 0 ||
	    fflush(stdout) != 0) {
		fprintf(stderr, "eft-passwd: cannot write: %s\n", strerror(errno));
		goto fail;
	}
	status = 0;
fail:
	eft_passwd_wipe(&pw, cap);
	eft_passwd_wipe(&again, again_cap);
	return status;
}
