/* CURVE key files (faid_keyfile): the certificate layout and a bare z85 line are read, malformed
 * keys are refused with the file's name, a secret key file readable by others is refused, the
 * authorized_keys folder is read sorted and fails on one bad *.pub, and a key pair is written
 * with the right modes and never over existing files. */
#include "faid_keyfile.h"
#include "faid_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PUB "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
#define SEC "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"

static void put(const char *path, const char *text, int mode)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    chmod(path, (mode_t)mode);
}

int main(void)
{
    faid_keytext kt;
    faid_diag d;
    const char *cert = "#   comment\nmetadata\ncurve\n    public-key = \"" PUB "\"\n"
                       "    secret-key = \"" SEC "\"\n";
    CHECK(faid_keyfile_parse(cert, strlen(cert), "c", 1, &kt, &d) == 0 &&
          strcmp(kt.public_key, PUB) == 0 && strcmp(kt.secret_key, SEC) == 0);
    const char *bare = "# pasted\n" PUB "\r\n";
    CHECK(faid_keyfile_parse(bare, strlen(bare), "b", 0, &kt, &d) == 0 &&
          strcmp(kt.public_key, PUB) == 0 && kt.secret_key[0] == 0);
    CHECK(faid_keyfile_parse(bare, strlen(bare), "b", 1, &kt, &d) == FAID_EFORMAT &&
          strstr(d.msg, "b: no secret-key"));
    const char *shortk = "public-key = \"abc\"\n";
    CHECK(faid_keyfile_parse(shortk, strlen(shortk), "s", 0, &kt, &d) == FAID_EFORMAT &&
          strstr(d.msg, "s: public-key is not 40"));
    const char *badchar = "public-key = \""
                          "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf,"
                          "\"\n";
    CHECK(faid_keyfile_parse(badchar, strlen(badchar), "x", 0, &kt, &d) == FAID_EFORMAT);
    CHECK(faid_keyfile_parse("", 0, "e", 0, &kt, &d) == FAID_EFORMAT);
    CHECK(faid_keyfile_parse("a\0b", 3, "z", 0, &kt, &d) == FAID_EFORMAT);
    CHECK(faid_z85_key_valid(PUB) && !faid_z85_key_valid("abc") && !faid_z85_key_valid(NULL));

    char dir[] = "/tmp/faid-keyfile-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[600], stem[512];
    snprintf(stem, sizeof stem, "%s/pair", dir);
    CHECK(faid_keyfile_write_pair(stem, PUB, SEC, &d) == 0);
    struct stat sb;
    snprintf(path, sizeof path, "%s.key", stem);
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    CHECK(faid_keyfile_read(path, 1, &kt, &d) == 0 && strcmp(kt.secret_key, SEC) == 0 &&
          strcmp(kt.public_key, PUB) == 0);
    CHECK(faid_keyfile_write_pair(stem, PUB, SEC, &d) == FAID_EIO && strstr(d.msg, "exists"));
    chmod(path, 0640);
    CHECK(faid_keyfile_read(path, 1, &kt, &d) == FAID_ECONFIG && strstr(d.msg, "owner only") &&
          kt.secret_key[0] == 0);
    CHECK(faid_keyfile_read(path, 0, &kt, &d) == 0); /* its public key may be read by anyone */
    snprintf(path, sizeof path, "%s.pub", stem);
    CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0644);
    CHECK(faid_keyfile_read(path, 0, &kt, &d) == 0 && strcmp(kt.public_key, PUB) == 0);

    /* authorized_keys: *.pub only, sorted by name; one bad file fails the whole read */
    char auth[600];
    snprintf(auth, sizeof auth, "%s/auth", dir);
    mkdir(auth, 0755);
    char p1[700], p2[700], p3[700], p4[700];
    snprintf(p1, sizeof p1, "%s/b.pub", auth);
    snprintf(p2, sizeof p2, "%s/a.pub", auth);
    snprintf(p3, sizeof p3, "%s/notes.txt", auth);
    put(p1, PUB "\n", 0644);
    put(p2, "public-key = \"" SEC "\"\n", 0644);
    put(p3, "not a key\n", 0644);
    char(*keys)[FAID_Z85_KEY_LEN + 1] = NULL;
    char(*names)[64] = NULL;
    size_t n = 0;
    CHECK(faid_keyfile_read_dir(auth, 4, &keys, &names, &n, &d) == 0 && n == 2);
    CHECK(n == 2 && strcmp(names[0], "a.pub") == 0 && strcmp(keys[0], SEC) == 0 &&
          strcmp(keys[1], PUB) == 0);
    free(keys);
    free(names);
    /* more files than the limit: refused, naming the folder and the limit */
    CHECK(faid_keyfile_read_dir(auth, 1, &keys, &names, &n, &d) == FAID_ESIZE && n == 0 && !keys &&
          !names && strstr(d.msg, auth) && strstr(d.msg, "more than 1 "));
    CHECK(faid_keyfile_read_dir(auth, 4, &keys, NULL, &n, &d) == 0 && n == 2 &&
          strcmp(keys[1], PUB) == 0);
    free(keys);
    snprintf(p4, sizeof p4, "%s/c.pub", auth);
    put(p4, "typo\n", 0644);
    CHECK(faid_keyfile_read_dir(auth, 4, &keys, &names, &n, &d) == FAID_EFORMAT && n == 0 &&
          !keys && strstr(d.msg, "c.pub"));
    CHECK(faid_keyfile_read_dir("/nonexistent/faid", 4, &keys, &names, &n, &d) == FAID_EIO);

    unlink(p1);
    unlink(p2);
    unlink(p3);
    unlink(p4);
    rmdir(auth);
    snprintf(path, sizeof path, "%s.key", stem);
    unlink(path);
    snprintf(path, sizeof path, "%s.pub", stem);
    unlink(path);
    rmdir(dir);
    return faid_test_finish();
}
