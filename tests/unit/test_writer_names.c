/* The file names of the writer (writer/faid_sfile.h, docs/output-files.md "File names"): a series
 * id from the wire never leaves writer.directory, never collides with another id, never hides. */
#include "faid_sfile.h"
#include "faid_test.h"

#include <string.h>

static int name_of(char *out, size_t cap, const char *uid, size_t len, int attempt)
{
    faid_diag d = {0};
    return faid_writer_file_name(out, cap, "/data/out", uid, len, 7, "", attempt, &d);
}

/* The part after "/data/out/". */
static const char *base(const char *p)
{
    return p + strlen("/data/out/");
}

int main(void)
{
    char p[512], q[512];
    CHECK(name_of(p, sizeof p, "run-1.2_x", 9, 0) == 0 && strcmp(p, "/data/out/run-1.2_x.h5") == 0);
    CHECK(name_of(p, sizeof p, "run", 3, 2) == 0 && strcmp(p, "/data/out/run-3.h5") == 0);
    CHECK(name_of(p, sizeof p, NULL, 0, 0) == 0 && strcmp(p, "/data/out/series_7.h5") == 0);
    /* hostile ids: no slash, no leading dot, no leading dash (a shell command would take
     * `-rf.h5` for options: tests/soak/probe_writer.py's names probe wrote it), a hash tag */
    const char *bad[] = {"../../etc/x", "a/b", "..", ".hidden", "/abs", "a\nb", "-rf", "--"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(name_of(p, sizeof p, bad[i], strlen(bad[i]), 0) == 0);
        CHECK_MSG(!strchr(base(p), '/') && base(p)[0] != '.' && base(p)[0] != '-', "%s -> %s",
                  bad[i], p);
        CHECK_MSG(strlen(base(p)) == strlen(bad[i]) + 9 + 3, "%s -> %s", bad[i], p);
    }
    CHECK(name_of(p, sizeof p, "../../etc/x", 11, 0) == 0 &&
          strncmp(base(p), "_._.._etc_x-", 12) == 0);
    /* NUL and control bytes inside the id (len counts them) */
    const char nul[] = {'a', 0, 'b', 1, 'c'};
    CHECK(name_of(p, sizeof p, nul, sizeof nul, 0) == 0 && strncmp(base(p), "a_b_c-", 6) == 0);
    /* ids that sanitise alike still get different names */
    CHECK(name_of(p, sizeof p, "a/b", 3, 0) == 0 && name_of(q, sizeof q, "a?b", 3, 0) == 0);
    CHECK(strcmp(p, q) != 0);
    /* 300 bytes: cut to 100, tagged */
    char longid[300];
    memset(longid, 'x', sizeof longid);
    CHECK(name_of(p, sizeof p, longid, sizeof longid, 0) == 0);
    CHECK(strlen(base(p)) == 100 + 9 + 3);
    /* a path that does not fit is an error, not a cut name */
    char small[12];
    CHECK(name_of(small, sizeof small, "run", 3, 0) == FAID_ESIZE);
    return faid_test_finish();
}
