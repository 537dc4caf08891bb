/* Output that is never lost silently: a file replaced atomically, and
 * stdout checked to the last byte. Used by kgen -o, kbench --json and every
 * tool that prints a result. */
#ifndef KGEN_OUTFILE_H
#define KGEN_OUTFILE_H

#include <stddef.h>
#include "err.h"

/* Writes text to path through a temporary file in the same directory and a
 * rename, so a failed write leaves the old file whole. A symlink is written
 * through: its (existing) target is replaced and the link stays. An existing
 * file keeps its permission bits; a new one gets 0666 less the umask. */
int kg_write_file(const char *path, const void *text, size_t len, KgErr *err);

/* Appends one record (a whole line) to path, creating it (0666 less the
 * umask): one write(2) with O_APPEND, so records of concurrent writers do
 * not interleave; -1 with the reason if any byte of it was not written. */
int kg_append_line(const char *path, const void *line, size_t len, KgErr *err);

/* Flushes and closes stdout; -1 with the reason if any byte written to it
 * was lost (a full disk, /dev/full, a closed descriptor). */
int kg_close_stdout(KgErr *err);

#endif
