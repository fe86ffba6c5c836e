/* dstream skills export DIR [AGENT...]: every skill of the stored agents (or of
 * the agents named) as DIR/<skill>/SKILL.md, the layout other agent tools read:
 * YAML front matter (name, description) and the instructions.
 *
 * Skill names are agent names ([A-Za-z0-9_.-], never "." or ".."), so they cannot
 * name a path outside DIR; on top of that every directory and file is opened
 * relative to DIR without following symbolic links, so a link planted in DIR
 * cannot redirect a write either. Two agents with a skill of the same name and
 * different text are a conflict: the first is written, the rest reported. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/agent.h"
#include "../lib/buf.h"
#include "../lib/defs.h"
#include "../lib/log.h"
#include "cli.h"
#include "http.h"

/* s as a YAML double-quoted scalar body: quotes and backslashes escaped, control
 * characters dropped (the description is one line). */
static void yaml_quoted(buf_t *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') buf_printf(b, "\\%c", *s);
        else if ((unsigned char)*s >= 0x20) buf_append(b, s, 1);
        else buf_append(b, " ", 1);
    }
}

static void render(buf_t *b, const char *agent, const json_t *skill)
{
    const char *name = json_string_value(json_object_get(skill, "name"));
    const json_t *params = json_object_get(skill, "params"), *p;
    size_t i;
    buf_printf(b, "---\nname: %s\ndescription: \"", name);
    char desc[256];
    snprintf(desc, sizeof desc, "Skill %s of the dstream agent %s", name, agent);
    yaml_quoted(b, desc);
    buf_puts(b, "\"\n---\n\n");
    buf_puts(b, json_string_value(json_object_get(skill, "instructions")));
    buf_puts(b, "\n");
    if (json_array_size(params)) {
        buf_puts(b, "\n## Parameters\n\n");
        json_array_foreach(params, i, p) buf_printf(b, "- `%s`: replaces `{{%s}}` above\n", json_string_value(p), json_string_value(p));
    }
}

/* Write text as dirfd/name/SKILL.md. Returns 0, 1 if this run wrote that skill
 * with other text already (a conflict: kept), 2 if with the same text, -1 on an
 * error (printed). */
static int write_skill(int dirfd, const char *name, const buf_t *text, json_t *written)
{
    const json_t *before = json_object_get(written, name);
    if (before) return strcmp(json_string_value(before), text->p) ? 1 : 2;
    if (!agent_valid_name(name)) {
        fprintf(stderr, "dstream: skill name \"%s\" is not a plain name: skipped\n", name);
        return -1;
    }
    if (mkdirat(dirfd, name, 0755) && errno != EEXIST) {
        fprintf(stderr, "dstream: %s: %s\n", name, strerror(errno));
        return -1;
    }
    int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) {
        fprintf(stderr, "dstream: %s: %s (a symbolic link is not followed)\n", name, strerror(errno));
        return -1;
    }
    int fd = openat(sub, "SKILL.md.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    int rc = -1;
    if (fd >= 0) {
        ssize_t n = write(fd, text->p, text->len);
        if (n == (ssize_t)text->len && fsync(fd) == 0 && close(fd) == 0) {
            fd = -1;
            rc = renameat(sub, "SKILL.md.tmp", sub, "SKILL.md") ? -1 : 0;
        }
    }
    if (rc) fprintf(stderr, "dstream: %s/SKILL.md: %s\n", name, strerror(errno));
    if (fd >= 0) close(fd);
    close(sub);
    if (!rc) json_object_set_new(written, name, json_string(text->p));
    return rc;
}

int cmd_skills(const char *db, int argc, char **argv)
{
    char err[512];
    if (argc < 2 || strcmp(argv[0], "export") != 0) return cli_usage("skills");
    const char *dir = argv[1];
    if (mkdir(dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "dstream: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        fprintf(stderr, "dstream: %s: %s\n", dir, strerror(errno));
        return 1;
    }
    log_t *log = log_open(db, NULL, err, sizeof err);
    log_conn_t *c = log ? log_conn_open(log, err, sizeof err) : NULL;
    if (!c) {
        fprintf(stderr, "dstream: %s\n", err);
        if (log) log_close(log);
        close(dirfd);
        return 1;
    }
    json_t *names = json_array(), *written = json_object();
    int status = 0, count = 0, rc;
    if (argc > 2) {
        for (int i = 2; i < argc; i++) json_array_append_new(names, json_string(argv[i]));
    } else {
        json_t *list = json_array();
        size_t i;
        json_t *a;
        if (defs_agent_list(c, list)) status = 1;
        json_array_foreach(list, i, a) json_array_append(names, json_object_get(a, "name"));
        json_decref(list);
    }
    size_t i, j;
    json_t *n, *skill;
    json_array_foreach(names, i, n) {
        const char *agent = json_string_value(n);
        json_t *doc = defs_agent_get(c, agent, &rc);
        if (!doc) {
            fprintf(stderr, "dstream: no agent %s\n", agent);
            status = 1;
            continue;
        }
        json_array_foreach(json_object_get(doc, "skills"), j, skill) {
            const char *name = json_string_value(json_object_get(skill, "name"));
            if (!name || !json_is_string(json_object_get(skill, "instructions"))) continue;
            buf_t text;
            buf_init(&text, 0);
            render(&text, agent, skill);
            rc = write_skill(dirfd, name, &text, written);
            buf_free(&text);
            if (rc == 2) continue;
            if (rc == 1) fprintf(stderr, "dstream: skill %s of agent %s differs from one already written: kept the first\n", name, agent);
            if (rc) status = 1;
            else {
                if (cli_json) {
                    char p[1200];
                    snprintf(p, sizeof p, "%s/%s/SKILL.md", dir, name);
                    json_t *o = json_pack("{s:s, s:s, s:s}", "skill", name, "agent", agent, "file", p);
                    print_json(o);
                    json_decref(o);
                } else {
                    printf("%s/%s/SKILL.md\n", dir, name);
                }
                count++;
            }
        }
        json_decref(doc);
    }
    fprintf(stderr, "dstream: %d skills exported\n", count);
    json_decref(names);
    json_decref(written);
    log_conn_close(c);
    log_close(log);
    close(dirfd);
    return status;
}
