/* opfile: reading the operator's configuration files.
 *
 * Some files say what dstream may do on the operator's behalf: which programs the
 * runner executes (DSTREAM_MCP_CONFIG), where provider keys go (DSTREAM_PROVIDERS),
 * the keys themselves (DSTREAM_CREDENTIALS). Whoever can change such a file can run
 * code as dstream or take its keys, so it is read only when it is a regular file,
 * owned by root or by the user reading it, and its mode has none of the bits the
 * caller forbids (write by group and others; for secrets, any access by them).
 * Every program reads them through here, so all of them refuse the same files. */
#ifndef DSTREAM_OPFILE_H
#define DSTREAM_OPFILE_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

/* Read the JSON object in the operator's file at path. forbidden: mode bits the
 * file must not have; fix: what to say when it has some ("must not be writable by
 * others (chmod go-w)"). *mode (may be NULL) gets the file's mode. Duplicate keys
 * are refused. Returns a new reference, or NULL with one line in err that starts
 * with path and says what is wrong (never the file's content). */
json_t *opfile_load(const char *path, mode_t forbidden, const char *fix, mode_t *mode, char *err,
                    size_t errcap);

#endif
