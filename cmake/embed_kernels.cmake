# faid_embed_kernels(SRC_DIR OUT_C): generates OUT_C holding every SRC_DIR/**/*.cl as a C string,
# and a lookup table faid_kernel_sources[] = {relative name, text}. Regenerated when a .cl changes.
function(faid_embed_kernels src_dir out_c)
  file(GLOB_RECURSE cl_files CONFIGURE_DEPENDS ${src_dir}/*.cl)
  add_custom_command(
    OUTPUT ${out_c}
    COMMAND ${CMAKE_COMMAND} -DSRC_DIR=${src_dir} -DOUT_C=${out_c}
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_kernels_run.cmake
    DEPENDS ${cl_files} ${CMAKE_SOURCE_DIR}/cmake/embed_kernels_run.cmake
            ${CMAKE_SOURCE_DIR}/cmake/embed_files.cmake
    COMMENT "Embedding OpenCL kernels")
endfunction()
