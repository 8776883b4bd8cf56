/* Plain driver for a fuzz target: feeds every file of the corpus folders given as arguments, then a
 * fixed number of deterministic mutations of each (bit flips, truncations, byte stores), to
 * LLVMFuzzerTestOneInput. Under ASan this is the CI form of every fuzz target; with clang and
 * FAID_FUZZ=ON the same target links against libFuzzer instead. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void run_mutations(const uint8_t *data, size_t size, int rounds)
{
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return;
    for (int r = 0; r < rounds; r++) {
        memcpy(buf, data, size);
        size_t n = size;
        int kind = (int)(rng() % 4);
        if (kind == 0 && n) {
            size_t nflip = 1 + rng() % 8;
            for (size_t k = 0; k < nflip; k++)
                buf[rng() % n] ^= (uint8_t)(1u << (rng() % 8));
        } else if (kind == 1 && n) {
            n = rng() % n;
        } else if (kind == 2 && n) {
            size_t nput = 1 + rng() % 4;
            for (size_t k = 0; k < nput; k++)
                buf[rng() % n] = (uint8_t)(rng() & 1 ? 0xff : rng());
        } else if (n >= 4) {
            size_t at = rng() % (n - 3);
            uint32_t v = (uint32_t)rng();
            memcpy(buf + at, &v, 4);
        }
        LLVMFuzzerTestOneInput(buf, n);
    }
    free(buf);
}

/* Files in the corpus folders (to share the mutation budget among them). */
static size_t count_files(int argc, char **argv)
{
    size_t n = 0;
    for (int a = 1; a < argc; a++) {
        DIR *dir = opendir(argv[a]);
        if (!dir)
            continue;
        struct dirent *de;
        while ((de = readdir(dir)) != NULL)
            n += de->d_name[0] != '.';
        closedir(dir);
    }
    return n;
}

int main(int argc, char **argv)
{
    /* 200 mutations per file, but about 5,000 in all (at least 5 per file): the corpora keep
     * what libFuzzer found (up to hundreds of files per target) and this runs in every CI pass,
     * ASan included, where the configuration target takes about 3 ms per input. */
    size_t nfiles = count_files(argc, argv);
    int rounds = 200;
    if (nfiles * 200 > 5000)
        rounds = (int)(5000 / nfiles) < 5 ? 5 : (int)(5000 / nfiles);
    if (getenv("FAID_FUZZ_ROUNDS"))
        rounds = atoi(getenv("FAID_FUZZ_ROUNDS"));
    size_t files = 0;
    LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
    for (int a = 1; a < argc; a++) {
        DIR *dir = opendir(argv[a]);
        if (!dir) {
            fprintf(stderr, "fuzz corpus: cannot open %s\n", argv[a]);
            return 1;
        }
        struct dirent *de;
        while ((de = readdir(dir)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], de->d_name);
            FILE *f = fopen(path, "rb");
            if (!f)
                continue;
            fseek(f, 0, SEEK_END);
            long len = ftell(f);
            fseek(f, 0, SEEK_SET);
            uint8_t *data = malloc(len > 0 ? (size_t)len : 1);
            if (data && fread(data, 1, (size_t)len, f) == (size_t)len) {
                LLVMFuzzerTestOneInput(data, (size_t)len);
                run_mutations(data, (size_t)len, rounds);
                files++;
            }
            free(data);
            fclose(f);
        }
        closedir(dir);
    }
    printf("fuzz corpus: %zu files, %d mutations each: 1 passed, 0 failed\n", files, rounds);
    return 0;
}
