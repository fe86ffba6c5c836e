#include "url.h"

#include <string.h>

/* RFC 3986 pchar minus '%' (which always encodes), plus '/'. */
static int keep(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
    return c && strchr("-._~!$&'()*+,;=:@/", c) != NULL;
}

int url_encode_path(const char *path, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        size_t need = keep(*p) ? 1 : 3;
        if (n + need >= cap) {
            if (cap) out[0] = '\0';
            return -1;
        }
        if (need == 1) {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    if (cap == 0) return -1;
    out[n] = '\0';
    return (int)n;
}
