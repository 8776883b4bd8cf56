/* faid: the server's entry point (placeholder until the daemon module lands). */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("faid %s\n", FAID_VERSION);
        return 0;
    }
    fprintf(stderr, "faid: the server is not implemented yet\n");
    return 1;
}
