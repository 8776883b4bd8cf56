/* faid-protodoc: writes (or checks) the key tables of proto/PROTOCOL.md from the key table of
 * proto/faid_proto_keys.h. Each message's table sits between the lines
 *   <!-- keys:MARKER:begin (generated from proto/faid_proto_keys.h: edit the table there) -->
 *   <!-- keys:MARKER:end -->
 * `--write FILE` regenerates every block in place; `--check FILE` exits 1 naming each block that
 * differs or is missing (the ctest docs.protocol_keys). `--print MARKER` prints one table
 * (faid_docgen.h). */
#include "faid_docgen.h"
#include "faid_proto.h"

static const char *name(int i)
{
    return faid_proto_msg_marker((faid_proto_msg)i);
}

static char *table(int i)
{
    return faid_proto_msg_markdown((faid_proto_msg)i);
}

int main(int argc, char **argv)
{
    const faid_docgen g = {.tool = "faid-protodoc",
                           .kind = "keys",
                           .file = "PROTOCOL.md",
                           .source = "proto/faid_proto_keys.h",
                           .target = "protocol-doc",
                           .n = FAID_NPMSGS,
                           .name = name,
                           .table = table};
    return faid_docgen_main(&g, argc, argv);
}
