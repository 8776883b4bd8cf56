# Included by the embed_*_run.cmake scripts (script mode).
# faid_embed_files(OUT_C SRC_DIR FILES HEAD PREFIX DECL): writes OUT_C, the text HEAD, then every
# file of FILES (names relative to SRC_DIR) as a byte array <PREFIX><index> (bytes, not a string
# literal, so that no escaping issue or string-length limit of the compiler can bite), then the
# table `DECL = {name, bytes, length}` ending in a NULL row. OUT_C is replaced only when its text
# changes, so an unchanged embed recompiles nothing.
function(faid_embed_files out_c src_dir files head prefix decl)
  set(body "${head}")
  set(table "")
  set(i 0)
  foreach(f ${files})
    file(READ ${src_dir}/${f} hex HEX)
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
    string(APPEND body "static const char ${prefix}${i}[] = {${hex}0x00};\n")
    string(APPEND table "    {\"${f}\", ${prefix}${i}, sizeof(${prefix}${i}) - 1},\n")
    math(EXPR i "${i} + 1")
  endforeach()
  string(APPEND body "${decl} = {\n${table}    {NULL, NULL, 0}\n};\n")
  file(WRITE ${out_c}.tmp "${body}")
  file(COPY_FILE ${out_c}.tmp ${out_c} ONLY_IF_DIFFERENT)
endfunction()
