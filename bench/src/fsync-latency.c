/* fsync-latency: what one durable commit costs this disk, the floor under every
 * latency that waits for a commit (an acknowledged append, a fan-out delivery).
 *
 *   fsync-latency DIR [COUNT [INTERVAL_MS]]
 *
 * Writes 8 KiB (about what a small WAL commit writes) at the end of a file in DIR
 * and calls fdatasync, COUNT times (500), INTERVAL_MS apart (10, the pace of the
 * fan-out figure's writer); prints one line: "fdatasync: n=... p50_us=... p90_us=...
 * p99_us=... max_us=...". The file is removed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static int by_value(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

static long num(const char *s, long dflt, long max)
{
    if (!s) return dflt;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || *end || v < 1 || v > max ? -1 : v;
}

int main(int argc, char **argv)
{
    long n = num(argc > 2 ? argv[2] : NULL, 500, 100000);
    long interval = num(argc > 3 ? argv[3] : NULL, 10, 10000);
    if (argc < 2 || n < 0 || interval < 0) {
        fprintf(stderr, "usage: fsync-latency DIR [COUNT [INTERVAL_MS]]\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/fsync-latency.%ld", argv[1], (long)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "fsync-latency: %s: %s\n", path, strerror(errno));
        return 1;
    }
    long long *lat = calloc((size_t)n, sizeof *lat);
    static char block[8192];
    memset(block, 0x5a, sizeof block);
    int rc = 0;
    for (long i = 0; i < n && !rc; i++) {
        long long t = now_us();
        if (pwrite(fd, block, sizeof block, (off_t)i * (off_t)sizeof block) != (ssize_t)sizeof block ||
            fdatasync(fd)) {
            fprintf(stderr, "fsync-latency: %s\n", strerror(errno));
            rc = 1;
        }
        lat[i] = now_us() - t;
        usleep((useconds_t)interval * 1000);
    }
    close(fd);
    unlink(path);
    if (rc) return rc;
    qsort(lat, (size_t)n, sizeof *lat, by_value);
    printf("fdatasync: n=%ld p50_us=%lld p90_us=%lld p99_us=%lld max_us=%lld\n", n, lat[n / 2],
           lat[n * 9 / 10], lat[n * 99 / 100], lat[n - 1]);
    free(lat);
    return 0;
}
