/* faid_keyfile: reading and writing CURVE key files (see faid_keyfile.h). */
#include "faid_keyfile.h"

#include "faid_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEYFILE_MAX (64 * 1024)

static const char z85_chars[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                ".-:+=^!/*?&<>()[]{}@%$#";

int faid_z85_key_valid(const char *s)
{
    if (!s || strlen(s) != FAID_Z85_KEY_LEN)
        return 0;
    for (const char *p = s; *p; p++)
        if (!strchr(z85_chars, *p))
            return 0;
    return 1;
}

/* Copies the key value of a `name = "value"` line (quotes optional) into out; 0 when line is
 * such a line for name, 1 when it is another line, -1 when it is this name with a bad value. */
static int key_line(const char *line, const char *name, char out[FAID_Z85_KEY_LEN + 1])
{
    size_t nl = strlen(name);
    if (strncmp(line, name, nl) != 0)
        return 1;
    const char *p = line + nl;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != '=')
        return 1;
    p++;
    while (*p == ' ' || *p == '\t')
        p++;
    char quote = (*p == '"' || *p == '\'') ? *p++ : 0;
    size_t n = 0;
    while (p[n] && p[n] != quote && p[n] != ' ' && p[n] != '\t' && p[n] != '\r')
        n++;
    if (n != FAID_Z85_KEY_LEN)
        return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return faid_z85_key_valid(out) ? 0 : -1;
}

int faid_keyfile_parse(const char *text, size_t len, const char *name, int want_secret,
                       faid_keytext *out, faid_diag *d)
{
    memset(out, 0, sizeof(*out));
    if (len > KEYFILE_MAX)
        return faid_fail(d, FAID_ESIZE, "%s: not a key file (%zu bytes)", name, len);
    if (memchr(text, '\0', len))
        return faid_fail(d, FAID_EFORMAT, "%s: not a key file (binary content)", name);
    char *buf = malloc(len + 1);
    if (!buf)
        return faid_fail(d, FAID_ENOMEM, "%s: out of memory", name);
    memcpy(buf, text, len);
    buf[len] = '\0';
    char *save = NULL;
    int bare = 0, rc = 0;
    for (char *line = strtok_r(buf, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save)) {
        while (*line == ' ' || *line == '\t')
            line++;
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
            line[--n] = '\0';
        if (!n || line[0] == '#')
            continue;
        int a = key_line(line, "public-key", out->public_key);
        int b = a == 1 ? key_line(line, "secret-key", out->secret_key) : 1;
        if (a < 0 || b < 0)
            rc = faid_fail(d, FAID_EFORMAT, "%s: %s is not 40 characters of z85", name,
                           a < 0 ? "public-key" : "secret-key");
        else if (a == 1 && b == 1 && !out->public_key[0] && !bare && faid_z85_key_valid(line)) {
            memcpy(out->public_key, line, FAID_Z85_KEY_LEN + 1);
            bare = 1;
        }
    }
    memset(buf, 0, len + 1);
    free(buf);
    if (!rc && want_secret && !out->secret_key[0])
        rc = faid_fail(d, FAID_EFORMAT,
                       "%s: no secret-key line (a NAME.key file of `faidctl keygen NAME` is "
                       "needed, not NAME.pub)",
                       name);
    if (!rc && !want_secret && !out->public_key[0])
        rc = faid_fail(d, FAID_EFORMAT,
                       "%s: no public key (public-key = \"...\" or a bare 40-character z85 "
                       "line)",
                       name);
    if (rc)
        memset(out, 0, sizeof(*out));
    return rc;
}

int faid_keyfile_read(const char *path, int want_secret, faid_keytext *out, faid_diag *d)
{
    memset(out, 0, sizeof(*out));
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = faid_file_read_max(path, KEYFILE_MAX, &buf, &len, d);
    if (rc)
        return rc;
    rc = faid_keyfile_parse((const char *)buf, len, path, want_secret, out, d);
    memset(buf, 0, len);
    free(buf);
    if (rc)
        return rc;
    if (want_secret) {
        struct stat sb;
        if (stat(path, &sb) == 0 && (sb.st_mode & 077)) {
            memset(out, 0, sizeof(*out));
            return faid_fail(d, FAID_ECONFIG,
                             "%s: a secret key file must be readable by its owner only (mode "
                             "%03o; chmod 600 it)",
                             path, (unsigned)(sb.st_mode & 0777));
        }
    }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int faid_keyfile_read_dir(const char *dir, size_t max, char (**keys)[FAID_Z85_KEY_LEN + 1],
                          char (**names)[64], size_t *n, faid_diag *d)
{
    *n = 0;
    *keys = NULL;
    if (names)
        *names = NULL;
    DIR *dh = opendir(dir);
    if (!dh)
        return faid_fail(d, FAID_EIO, "%s: cannot open the folder: %s", dir, strerror(errno));
    char **files = NULL;
    size_t nfiles = 0, cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".pub") != 0 || e->d_name[0] == '.')
            continue;
        if (nfiles == max) {
            /* Bounded even for a folder of millions of files: read no further. */
            rc = faid_fail(d, FAID_ESIZE,
                           "%s: more than %zu *.pub files, the most faid reads "
                           "(FAID_ZAP_MAX_KEYS, docs/security.md)",
                           dir, max);
            break;
        }
        if (nfiles == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            char **nf = realloc(files, ncap * sizeof(*nf));
            if (!nf) {
                rc = faid_fail(d, FAID_ENOMEM, "%s: out of memory", dir);
                break;
            }
            files = nf;
            cap = ncap;
        }
        if (!(files[nfiles] = strdup(e->d_name))) {
            rc = faid_fail(d, FAID_ENOMEM, "%s: out of memory", dir);
            break;
        }
        nfiles++;
    }
    closedir(dh);
    char(*k)[FAID_Z85_KEY_LEN + 1] = NULL;
    char(*nm)[64] = NULL;
    if (!rc && nfiles) {
        k = calloc(nfiles, sizeof(*k));
        nm = names ? calloc(nfiles, sizeof(*nm)) : NULL;
        if (!k || (names && !nm))
            rc = faid_fail(d, FAID_ENOMEM, "%s: out of memory for %zu keys", dir, nfiles);
    }
    if (!rc)
        qsort(files, nfiles, sizeof(*files), by_name);
    size_t got = 0;
    for (size_t i = 0; i < nfiles && !rc; i++) {
        char path[4096];
        if (snprintf(path, sizeof(path), "%s/%s", dir, files[i]) >= (int)sizeof(path)) {
            rc = faid_fail(d, FAID_ESIZE, "%s/%s: path too long", dir, files[i]);
            break;
        }
        faid_keytext kt;
        if ((rc = faid_keyfile_read(path, 0, &kt, d)))
            break;
        memcpy(k[got], kt.public_key, sizeof(k[got]));
        if (nm)
            snprintf(nm[got], 64, "%s", files[i]);
        got++;
    }
    for (size_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
    if (rc) {
        free(k);
        free(nm);
        return rc;
    }
    *keys = k;
    if (names)
        *names = nm;
    *n = got;
    return 0;
}

static int write_new(const char *path, int mode, const char *text, faid_diag *d)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return faid_fail(d, FAID_EIO, "%s: %s", path,
                         errno == EEXIST ? "exists already (not overwritten)" : strerror(errno));
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int err = errno;
            close(fd);
            unlink(path);
            return faid_fail(d, FAID_EIO, "%s: write error: %s", path, strerror(err));
        }
        off += (size_t)w;
    }
    /* The umask may have kept group/other bits off; the secret key must not have them. */
    if (fchmod(fd, (mode_t)mode) != 0 || close(fd) != 0) {
        unlink(path);
        return faid_fail(d, FAID_EIO, "%s: %s", path, strerror(errno));
    }
    return 0;
}

int faid_keyfile_write_pair(const char *stem, const char *public_key, const char *secret_key,
                            faid_diag *d)
{
    if (!faid_z85_key_valid(public_key) || !faid_z85_key_valid(secret_key))
        return faid_fail(d, FAID_EINVAL, "key pair for %s: not z85 keys", stem);
    char kpath[4096], ppath[4096];
    if (snprintf(kpath, sizeof(kpath), "%s.key", stem) >= (int)sizeof(kpath) ||
        snprintf(ppath, sizeof(ppath), "%s.pub", stem) >= (int)sizeof(ppath))
        return faid_fail(d, FAID_ESIZE, "%s: name too long", stem);
    struct stat sb;
    if (lstat(kpath, &sb) == 0 || lstat(ppath, &sb) == 0)
        return faid_fail(d, FAID_EIO, "%s exists already (not overwritten)",
                         lstat(kpath, &sb) == 0 ? kpath : ppath);
    const char *name = strrchr(stem, '/') ? strrchr(stem, '/') + 1 : stem;
    char text[1024];
    snprintf(text, sizeof(text),
             "#   faid CURVE certificate \"%s\" (faidctl keygen): secret key, keep it private\n"
             "#   (give NAME.pub to the other side; faid reads this file as "
             "security.secret_key_file,\n"
             "#   a client as --key)\n"
             "metadata\n"
             "curve\n"
             "    public-key = \"%s\"\n"
             "    secret-key = \"%s\"\n",
             name, public_key, secret_key);
    int rc = write_new(kpath, 0600, text, d);
    memset(text, 0, sizeof(text));
    if (rc)
        return rc;
    snprintf(text, sizeof(text),
             "#   faid CURVE certificate \"%s\" (faidctl keygen): public key\n"
             "#   (a client passes faid's as --server-key; faid authorizes a client by its .pub\n"
             "#   in security.authorized_keys)\n"
             "metadata\n"
             "curve\n"
             "    public-key = \"%s\"\n",
             name, public_key);
    if ((rc = write_new(ppath, 0644, text, d)))
        unlink(kpath);
    return rc;
}
