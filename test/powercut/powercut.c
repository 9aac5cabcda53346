/* powercut.c - a power cut for eftd's tests (test/e2e/test_powercut.py).
 *
 * kill -9 cannot test fsync: the page cache outlives the process, so what
 * eftd wrote but never synced is still there for the next start.  After a
 * power cut it is not.  This library, LD_PRELOADed into eftd, keeps an
 * image of what the disk would hold if the power went now, in the way
 * LazyFS keeps a file system's unsynced writes apart for Jepsen:
 *
 * - a data-dir file's content reaches the image when an fsync or fdatasync
 *   of it returns (through any descriptor of its inode): the image then
 *   holds the file as it is at that moment.  What was written, truncated
 *   or cut since is not in the image;
 * - names reach the image when an fsync of the data dir itself returns:
 *   the image's names are then the directory's names at that moment, each
 *   naming the inode it names now.  A file created, renamed or deleted
 *   since is not (or is still) there;
 * - what is in the data dir when eftd starts is taken to be on disk.
 *
 * The power cut is then kill -9: every sync that returned is in the image,
 * and nothing else.  (A kill while a sync is copied into the image leaves
 * part of it there, as a cut during that sync could.)  The test builds a
 * data dir from the image (IMAGE/names) and starts eftd on it.
 *
 * Environment: POWERCUT_DATA, the data dir (it must exist); POWERCUT_IMAGE,
 * a directory for the image.  Without both the library does nothing.
 *     IMAGE/files/N   the synced content of the Nth inode seen
 *     IMAGE/names/    the synced directory: hard links to IMAGE/files/N
 *
 * It intercepts what eftd calls on its data files (nm -D build/eftd):
 * open, openat (and their 64 and _FORTIFY_SOURCE names), write, pwrite,
 * writev, pwritev, ftruncate, truncate, fsync, fdatasync and close; mmap
 * only to refuse a writable shared mapping of a data file.  sync_file_range makes nothing durable and is let through.
 * Anything it cannot model (a data file on a descriptor above its table, a
 * file it did not see made) stops eftd with a line on stderr saying so: a
 * test must fail rather than cut the power wrongly.  eftd's journal runs
 * on one thread; a mutex still guards the tables. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define FD_MAX 65536
#define FD_DIR (-1)          /* fd_kind: the data dir itself */
#define CLEAN INT64_MAX      /* dirty_from: nothing unsynced */

/* An inode of the data dir. */
struct file {
	dev_t dev;
	ino_t ino;
	unsigned id;         /* IMAGE/files/id */
	int64_t dirty_from;  /* changed from here on since its last sync */
};

static bool on;
static char data_dir[PATH_MAX - 64], image_dir[PATH_MAX - 64]; /* room for a name after */
static struct file *files;
static size_t nfiles, files_cap;
static unsigned next_id = 1;
static int fd_kind[FD_MAX];  /* 0: not ours; FD_DIR; i + 1: files[i] */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The next definition of a function: libc's (or ASan's, before us). */
#define REAL(name) ((__typeof__(real_##name))next_fn(#name, (void **)&real_##name))
static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_truncate)(const char *, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_close)(int);
static void *(*real_mmap)(void *, size_t, int, int, int, off_t);

static void *
next_fn(const char *name, void **slot)
{
	if (*slot == NULL)
		*slot = dlsym(RTLD_NEXT, name);
	if (*slot == NULL)
		abort(); /* no libc: nothing to say it with */
	return *slot;
}

static void __attribute__((noreturn, format(printf, 1, 2)))
die(const char *fmt, ...)
{
	char msg[PATH_MAX + 256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof(msg) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(msg) - 2)
		n = (int)sizeof(msg) - 2;
	msg[n++] = '\n';
	(void)!REAL(write)(STDERR_FILENO, "powercut: ", 10);
	(void)!REAL(write)(STDERR_FILENO, msg, (size_t)n);
	abort();
}

static void
image_path(char *out, size_t len, const char *what, unsigned id)
{
	if (snprintf(out, len, "%s/%s/%u", image_dir, what, id) >= (int)len)
		die("image path too long");
}

/* Copy [from, to) of in to out at the same offsets. */
static void
copy_range(int in, int out, int64_t from, int64_t to)
{
	char buf[1 << 16];
	while (from < to) {
		size_t want = to - from < (int64_t)sizeof(buf) ? (size_t)(to - from) : sizeof(buf);
		ssize_t n = pread(in, buf, want, from);
		if (n <= 0)
			die("reading a data file to sync it: %s", n < 0 ? strerror(errno) : "end of file");
		if (REAL(pwrite)(out, buf, (size_t)n, from) != n)
			die("writing the image: %s", strerror(errno));
		from += n;
	}
}

static struct file *
file_find(dev_t dev, ino_t ino)
{
	for (size_t i = 0; i < nfiles; i++)
		if (files[i].dev == dev && files[i].ino == ino)
			return &files[i];
	return NULL;
}

/* A new inode (or a new file on an inode number used before): its image
 * starts empty, and all of it unsynced. */
static struct file *
file_add(dev_t dev, ino_t ino)
{
	struct file *f = file_find(dev, ino);
	if (f == NULL) {
		if (nfiles == files_cap) {
			files_cap = files_cap ? files_cap * 2 : 64;
			files = realloc(files, files_cap * sizeof(*files));
			if (files == NULL)
				die("out of memory");
		}
		f = &files[nfiles++];
	}
	*f = (struct file){ dev, ino, next_id++, 0 };
	char path[PATH_MAX];
	image_path(path, sizeof(path), "files", f->id);
	int fd = REAL(open)(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		die("%s: %s", path, strerror(errno));
	REAL(close)(fd);
	return f;
}

static void
touch(struct file *f, int64_t from)
{
	if (from < f->dirty_from)
		f->dirty_from = from < 0 ? 0 : from;
}

/* An fsync or fdatasync of f (open as fd) returned: the image gets the
 * file as it is. */
static void
file_synced(struct file *f, int fd)
{
	char path[PATH_MAX], self[64];
	struct stat st, ist;
	if (fstat(fd, &st) != 0)
		die("fstat: %s", strerror(errno));
	int64_t size = st.st_size, from = f->dirty_from < size ? f->dirty_from : size;
	image_path(path, sizeof(path), "files", f->id);
	int out = REAL(open)(path, O_WRONLY | O_CLOEXEC);
	if (out < 0 || fstat(out, &ist) != 0)
		die("%s: %s", path, strerror(errno));
	if (size < ist.st_size && REAL(ftruncate)(out, size) != 0)
		die("%s: %s", path, strerror(errno));
	if (from < size) {
		/* fd may be write-only: open the same inode to read it. */
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		int in = REAL(open)(self, O_RDONLY | O_CLOEXEC);
		if (in < 0)
			die("%s: %s", self, strerror(errno));
		copy_range(in, out, from, size);
		REAL(close)(in);
	}
	if (size > ist.st_size && REAL(ftruncate)(out, size) != 0)
		die("%s: %s", path, strerror(errno));
	REAL(close)(out);
	f->dirty_from = CLEAN;
}

static void
remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			(void)unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
	(void)rmdir(dir);
}

/* An fsync of the data dir returned: the image's names become the
 * directory's, made aside and swapped in at once. */
static void
names_synced(void)
{
	char names[PATH_MAX], fresh[PATH_MAX], target[PATH_MAX], link_path[PATH_MAX];
	snprintf(names, sizeof(names), "%s/names", image_dir);
	snprintf(fresh, sizeof(fresh), "%s/names.new", image_dir);
	remove_tree(fresh);
	if (mkdir(fresh, 0700) != 0)
		die("%s: %s", fresh, strerror(errno));
	DIR *d = opendir(data_dir);
	if (d == NULL)
		die("%s: %s", data_dir, strerror(errno));
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			die("%s/%s: %s", data_dir, e->d_name, strerror(errno));
		if (!S_ISREG(st.st_mode))
			die("%s/%s: not a regular file (not modelled)", data_dir, e->d_name);
		struct file *f = file_find(st.st_dev, st.st_ino);
		if (f == NULL)
			die("%s/%s: a file the power cut did not see made", data_dir, e->d_name);
		image_path(target, sizeof(target), "files", f->id);
		if (snprintf(link_path, sizeof(link_path), "%s/%s", fresh, e->d_name) >=
		    (int)sizeof(link_path) || link(target, link_path) != 0)
			die("%s: %s", link_path, strerror(errno));
	}
	closedir(d);
	if (renameat2(AT_FDCWD, fresh, AT_FDCWD, names, RENAME_EXCHANGE) != 0)
		die("%s: %s", names, strerror(errno));
	remove_tree(fresh); /* the old names */
}

/* Is the open file fd the data dir (FD_DIR) or a file in it (1)?  0 if
 * neither. */
static int
data_kind(int fd)
{
	char self[64], path[PATH_MAX];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(self, path, sizeof(path) - 1);
	if (n < 0)
		return 0;
	path[n] = '\0';
	size_t len = strlen(data_dir);
	if (strcmp(path, data_dir) == 0)
		return FD_DIR;
	return strncmp(path, data_dir, len) == 0 && path[len] == '/' &&
	    strchr(path + len + 1, '/') == NULL;
}

/* fd was just opened with flags; created: it did not exist before. */
static void
opened(int fd, int flags, bool created)
{
	int kind = data_kind(fd);
	if (kind == 0)
		return;
	if (fd >= FD_MAX)
		die("a data file on descriptor %d, above the table's %d", fd, FD_MAX);
	if (kind == FD_DIR) {
		fd_kind[fd] = FD_DIR;
		return;
	}
	struct stat st;
	if (fstat(fd, &st) != 0)
		die("fstat: %s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return;
	struct file *f = created ? file_add(st.st_dev, st.st_ino) : file_find(st.st_dev, st.st_ino);
	if (f == NULL)
		die("descriptor %d: a data file the power cut did not see made", fd);
	if (flags & O_TRUNC)
		touch(f, 0);
	fd_kind[fd] = (int)(f - files) + 1;
}

static int
open_common(int dirfd, const char *path, int flags, mode_t mode, bool at)
{
	if (!on)
		return at ? REAL(openat)(dirfd, path, flags, mode) : REAL(open)(path, flags, mode);
	pthread_mutex_lock(&lock);
	struct stat st;
	bool created = (flags & O_CREAT) && fstatat(dirfd, path, &st, 0) != 0;
	int fd = at ? REAL(openat)(dirfd, path, flags, mode) : REAL(open)(path, flags, mode);
	int e = errno;
	if (fd >= 0)
		opened(fd, flags, created);
	pthread_mutex_unlock(&lock);
	errno = e;
	return fd;
}

static mode_t
mode_arg(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int
open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	return open_common(AT_FDCWD, path, flags, mode, false);
}

int
open64(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	return open_common(AT_FDCWD, path, flags, mode, false);
}

int
openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	return open_common(dirfd, path, flags, mode, true);
}

int
openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	return open_common(dirfd, path, flags, mode, true);
}

/* What a _FORTIFY_SOURCE build calls for an open without O_CREAT. */
int
__open_2(const char *path, int flags)
{
	return open_common(AT_FDCWD, path, flags, 0, false);
}

int
__open64_2(const char *path, int flags)
{
	return open_common(AT_FDCWD, path, flags, 0, false);
}

int
__openat_2(int dirfd, const char *path, int flags)
{
	return open_common(dirfd, path, flags, 0, true);
}

int
__openat64_2(int dirfd, const char *path, int flags)
{
	return open_common(dirfd, path, flags, 0, true);
}

/* The data file open as fd, with the lock held; NULL (lock not held) if fd
 * is no data file. */
static struct file *
data_file(int fd)
{
	if (!on || fd < 0 || fd >= FD_MAX || fd_kind[fd] <= 0)
		return NULL;
	pthread_mutex_lock(&lock);
	if (fd_kind[fd] <= 0) {
		pthread_mutex_unlock(&lock);
		return NULL;
	}
	return &files[fd_kind[fd] - 1];
}

/* Where a write() on fd lands. */
static int64_t
write_offset(int fd)
{
	struct stat st;
	if ((fcntl(fd, F_GETFL) & O_APPEND) && fstat(fd, &st) == 0)
		return st.st_size;
	return lseek(fd, 0, SEEK_CUR);
}

/* After a write of w bytes at `at` on data file f (lock held): mark the
 * range unsynced if anything was written, and let go of the lock. */
static ssize_t
wrote(struct file *f, int64_t at, ssize_t w)
{
	if (w > 0)
		touch(f, at);
	pthread_mutex_unlock(&lock);
	return w;
}

ssize_t
write(int fd, const void *buf, size_t n)
{
	struct file *f = data_file(fd);
	if (f == NULL)
		return REAL(write)(fd, buf, n);
	int64_t at = write_offset(fd);
	return wrote(f, at, REAL(write)(fd, buf, n));
}

ssize_t
pwrite(int fd, const void *buf, size_t n, off_t off)
{
	struct file *f = data_file(fd);
	if (f == NULL)
		return REAL(pwrite)(fd, buf, n, off);
	return wrote(f, off, REAL(pwrite)(fd, buf, n, off));
}

ssize_t
pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	return pwrite(fd, buf, n, off);
}

ssize_t
writev(int fd, const struct iovec *iov, int cnt)
{
	struct file *f = data_file(fd);
	if (f == NULL)
		return REAL(writev)(fd, iov, cnt);
	int64_t at = write_offset(fd);
	return wrote(f, at, REAL(writev)(fd, iov, cnt));
}

ssize_t
pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	struct file *f = data_file(fd);
	if (f == NULL)
		return REAL(pwritev)(fd, iov, cnt, off);
	return wrote(f, off, REAL(pwritev)(fd, iov, cnt, off));
}

ssize_t
pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return pwritev(fd, iov, cnt, off);
}

int
ftruncate(int fd, off_t len)
{
	struct file *f = data_file(fd);
	if (f == NULL)
		return REAL(ftruncate)(fd, len);
	int rc = REAL(ftruncate)(fd, len);
	if (rc == 0)
		touch(f, len);
	pthread_mutex_unlock(&lock);
	return rc;
}

int
ftruncate64(int fd, off_t len)
{
	return ftruncate(fd, len);
}

int
truncate(const char *path, off_t len)
{
	if (!on)
		return REAL(truncate)(path, len);
	/* By name: open it (O_RDONLY changes nothing) to know if it is ours. */
	pthread_mutex_lock(&lock);
	struct file *f = NULL;
	int fd = REAL(open)(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		struct stat st;
		if (data_kind(fd) == 1 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
		    (f = file_find(st.st_dev, st.st_ino)) == NULL)
			die("%s: a data file the power cut did not see made", path);
		REAL(close)(fd);
	}
	int rc = REAL(truncate)(path, len);
	int e = errno;
	if (rc == 0 && f != NULL)
		touch(f, len);
	pthread_mutex_unlock(&lock);
	errno = e;
	return rc;
}

int
truncate64(const char *path, off_t len)
{
	return truncate(path, len);
}

/* fd was synced: the image follows. */
static void
synced(int fd)
{
	if (!on || fd < 0 || fd >= FD_MAX || fd_kind[fd] == 0)
		return;
	int e = errno;
	pthread_mutex_lock(&lock);
	if (fd_kind[fd] == FD_DIR)
		names_synced();
	else if (fd_kind[fd] > 0)
		file_synced(&files[fd_kind[fd] - 1], fd);
	pthread_mutex_unlock(&lock);
	errno = e;
}

int
fsync(int fd)
{
	int rc = REAL(fsync)(fd);
	if (rc == 0)
		synced(fd);
	return rc;
}

int
fdatasync(int fd)
{
	int rc = REAL(fdatasync)(fd);
	if (rc == 0)
		synced(fd);
	return rc;
}

int
close(int fd)
{
	if (on && fd >= 0 && fd < FD_MAX && fd_kind[fd] != 0) {
		pthread_mutex_lock(&lock);
		fd_kind[fd] = 0;
		pthread_mutex_unlock(&lock);
	}
	return REAL(close)(fd);
}

void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (on && fd >= 0 && fd < FD_MAX && fd_kind[fd] > 0 && (prot & PROT_WRITE) &&
	    (flags & MAP_SHARED))
		die("descriptor %d: a writable shared mapping of a data file (not modelled)", fd);
	return REAL(mmap)(addr, len, prot, flags, fd, off);
}

void *
mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

/* Start: the data dir as it is is on disk; the image is made from it. */
static void __attribute__((constructor))
powercut_start(void)
{
	const char *data = getenv("POWERCUT_DATA"), *image = getenv("POWERCUT_IMAGE");
	char path[PATH_MAX], target[PATH_MAX];
	if (data == NULL || image == NULL)
		return;
	errno = 0;
	if (realpath(data, path) == NULL || strlen(path) >= sizeof(data_dir))
		die("POWERCUT_DATA %s: %s", data, strerror(errno ? errno : ENAMETOOLONG));
	strcpy(data_dir, path);
	errno = 0;
	if (realpath(image, path) == NULL || strlen(path) >= sizeof(image_dir))
		die("POWERCUT_IMAGE %s: %s", image, strerror(errno ? errno : ENAMETOOLONG));
	strcpy(image_dir, path);
	/* Anew each time (valgrind's launcher runs this before eftd does). */
	snprintf(path, sizeof(path), "%s/names", image_dir);
	remove_tree(path);
	snprintf(path, sizeof(path), "%s/files", image_dir);
	remove_tree(path);
	if (mkdir(path, 0700) != 0)
		die("%s: %s", path, strerror(errno));
	snprintf(path, sizeof(path), "%s/names", image_dir);
	if (mkdir(path, 0700) != 0)
		die("%s: %s", path, strerror(errno));
	DIR *d = opendir(data_dir);
	if (d == NULL)
		die("%s: %s", data_dir, strerror(errno));
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		int in = REAL(openat)(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (in < 0 || fstat(in, &st) != 0 || !S_ISREG(st.st_mode))
			die("%s/%s: not a regular file (not modelled)", data_dir, e->d_name);
		struct file *f = file_add(st.st_dev, st.st_ino);
		image_path(target, sizeof(target), "files", f->id);
		int out = REAL(open)(target, O_WRONLY | O_CLOEXEC);
		if (out < 0)
			die("%s: %s", target, strerror(errno));
		copy_range(in, out, 0, st.st_size);
		REAL(close)(out);
		REAL(close)(in);
		f->dirty_from = CLEAN;
	}
	closedir(d);
	names_synced();
	on = true;
}
