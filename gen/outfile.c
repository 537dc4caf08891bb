/* Atomic file replacement and a checked stdout (outfile.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

/* write(2) until done; -1 with errno on failure */
static int
write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
kg_write_file(const char *path, const void *text, size_t len, KgErr *err)
{
	char real[PATH_MAX], tmp[PATH_MAX + 16];
	struct stat st;
	mode_t mode;
	int have = 0;

	/* a symlink: replace what it points at, not the link */
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		if (!realpath(path, real))
			return kg_fail(err, "-o %s: a symlink whose target cannot be resolved (%s); "
			               "kgen writes through links to existing files only", path,
			               strerror(errno));
	} else if (snprintf(real, sizeof real, "%s", path) >= (int)sizeof real) {
		return kg_fail(err, "-o %s: path longer than %d bytes", path, PATH_MAX - 1);
	}
	if (stat(real, &st) == 0) {
		if (!S_ISREG(st.st_mode))
			return kg_fail(err, "-o %s: not a regular file", path);
		mode = st.st_mode & 07777;
		have = 1;
	} else {
		mode_t mask = umask(0);
		umask(mask);
		mode = 0666 & ~mask;
	}
	/* the temporary name is short and lives in the target's directory (the
	 * rename must not cross file systems), so it fits NAME_MAX whatever the
	 * target's own name */
	const char *slash = strrchr(real, '/');
	int dirlen = slash ? (int)(slash - real) + 1 : 0;
	snprintf(tmp, sizeof tmp, "%.*s.kgen-XXXXXX", dirlen, real);
	int fd = mkstemp(tmp);
	if (fd < 0)
		return kg_fail(err, "-o %s: cannot create a temporary file beside it: %s", path,
		               strerror(errno));
	int e = 0;
	if (write_all(fd, text, len) || fchmod(fd, mode) || fsync(fd))
		e = errno;
	if (close(fd) && !e)
		e = errno;
	if (!e && rename(tmp, real))
		e = errno;
	if (e) {
		unlink(tmp);
		return kg_fail(err, "-o %s: %s (%s left as it was)", path, strerror(e),
		               have ? "the file" : "nothing");
	}
	return 0;
}

int
kg_append_line(const char *path, const void *line, size_t len, KgErr *err)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		return kg_fail(err, "%s: %s", path, strerror(errno));
	ssize_t n = write(fd, line, len);
	int e = n < 0 ? errno : 0;
	if (close(fd) && !e)
		e = errno;
	if (e || (size_t)n != len)
		return kg_fail(err, "%s: appending a record: %s", path,
		               e ? strerror(e) : "short write (disk full?)");
	return 0;
}

int
kg_close_stdout(KgErr *err)
{
	int bad = fflush(stdout) != 0 || ferror(stdout);
	int e = errno;
	if (fclose(stdout) != 0 && !bad) {
		bad = 1;
		e = errno;
	}
	if (bad)
		return kg_fail(err, "writing standard output: %s (output lost)",
		               e ? strerror(e) : "write error");
	return 0;
}
