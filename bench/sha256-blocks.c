/* sha256-blocks: the time of one link of the streams' hash chain (lib/chain.h:
 * SHA-256 of the previous digest, the offset and the message) by each block
 * implementation this CPU has (lib/sha256.h: the portable code, the CPU's SHA
 * extensions, libcrypto's), for messages of the sizes a session's events have.
 *
 *   sha256-blocks [ROUNDS]
 *
 * Each size is timed ROUNDS times (default 5) per implementation, the
 * implementations interleaved round by round (this machine's noise falls on all of
 * them alike); printed: the median microseconds a link and the ratio to the
 * portable code's median of the same size. 200,000 links a round. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chain.h"
#include "sha256.h"

#define LINKS 200000
#define ROUNDS_MAX 51

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (rounds < 1 || rounds > ROUNDS_MAX) {
        fprintf(stderr, "usage: sha256-blocks [ROUNDS: 1 to %d]\n", ROUNDS_MAX);
        return 2;
    }
    static const size_t sizes[] = {60, 150, 300, 1000};
    static const char *const names[] = {"portable", "cpu (SHA-NI)", "libcrypto"};
    int def = sha256_impl(-1);
    uint8_t msg[1000], digest[CHAIN_LEN] = {0};
    for (size_t i = 0; i < sizeof msg; i++) msg[i] = (uint8_t)(i * 131 + 7);
    printf("# default here: %s; %d links a round, %d rounds\n", names[def], LINKS, rounds);
    printf("| message bytes | implementation | us a link (median) | ratio to portable |\n|---:|---|---:|---:|\n");
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
        double t[3][ROUNDS_MAX];
        int have[3] = {1, sha256_impl(SHA256_BY_CPU) == SHA256_BY_CPU, 1};
        for (int r = 0; r < rounds; r++) {
            for (int impl = 0; impl < 3; impl++) {
                if (!have[impl]) continue;
                sha256_impl(impl);
                double t0 = now_s();
                for (int i = 0; i < LINKS; i++) {
                    offset_t at = {(uint64_t)i, (uint64_t)i * sizes[z]};
                    chain_link(digest, at, msg, sizes[z], digest);
                }
                t[impl][r] = (now_s() - t0) / LINKS * 1e6;
            }
        }
        double med[3];
        for (int impl = 0; impl < 3; impl++) {
            if (!have[impl]) continue;
            qsort(t[impl], (size_t)rounds, sizeof(double), cmp_double);
            med[impl] = t[impl][rounds / 2];
            printf("| %zu | %s | %.3f | %.2f |\n", sizes[z], names[impl], med[impl], med[impl] / med[0]);
        }
    }
    sha256_impl(def);
    printf("# (the last digest, so that nothing is left out: %02x%02x)\n", digest[0], digest[1]);
    return 0;
}
