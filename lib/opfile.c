/* opfile: the operator's configuration files (see opfile.h).
 *
 * The checks are made on the open descriptor (fstat), not on the name, so a file
 * swapped between the check and the read is the one checked. */
#include "opfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

json_t *opfile_load(const char *path, mode_t forbidden, const char *fix, mode_t *mode, char *err,
                    size_t errcap)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0 || fstat(fd, &st)) {
        snprintf(err, errcap, "cannot read %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    const char *bad = NULL;
    if (!S_ISREG(st.st_mode)) bad = "is not a regular file";
    else if (st.st_uid != 0 && st.st_uid != geteuid()) bad = "is owned by another user (neither root nor this one)";
    else if (st.st_mode & forbidden) bad = fix;
    if (bad) {
        snprintf(err, errcap, "%s %s", path, bad);
        close(fd);
        return NULL;
    }
    if (mode) *mode = st.st_mode;
    json_error_t je;
    json_t *doc = json_loadfd(fd, JSON_REJECT_DUPLICATES, &je);
    close(fd);
    if (!doc) {
        snprintf(err, errcap, "%s: %s (line %d)", path, je.text, je.line);
        return NULL;
    }
    if (!json_is_object(doc)) {
        snprintf(err, errcap, "%s: must be a JSON object", path);
        json_decref(doc);
        return NULL;
    }
    return doc;
}
