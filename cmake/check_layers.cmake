# cmake -DSRC_DIR=<source dir> -P cmake/check_layers.cmake
#
# The layer check: every layer folder is a library that stands only on the layers below it,
#   base <- proto <- core <- engine <- writer <- daemon, faidctl
# and the client library (client/faid_client*) stands on base and proto alone, so that a C
# subscriber links no OpenCL and no YAML. Every `#include "..."` of every file of a layer must name
# a header of its own layer or of a layer it may use; a header found in no layer folder (a test's,
# a generated one) is not checked. Besides, no OpenCL header in base, proto or core, and no YAML
# header in base, proto or the client library. Any violation fails with the list of them: the
# build runs this as the target layer-check (in ALL) and ctest as unit.layers.
if(NOT SRC_DIR)
  message(FATAL_ERROR "check_layers.cmake: pass -DSRC_DIR=<faid source dir>")
endif()

# layer -> its files (folders not recursed, except the tools/ of proto and writer)
file(GLOB f_base ${SRC_DIR}/base/*.[ch])
file(GLOB f_proto ${SRC_DIR}/proto/*.[ch] ${SRC_DIR}/proto/tools/*.[ch])
file(GLOB f_core ${SRC_DIR}/core/*.[ch])
file(GLOB f_engine ${SRC_DIR}/engine/*.[ch])
file(GLOB f_writer ${SRC_DIR}/writer/*.[ch] ${SRC_DIR}/writer/tools/*.[ch])
file(GLOB f_daemon ${SRC_DIR}/daemon/*.[ch])
file(GLOB f_clientlib ${SRC_DIR}/client/faid_client*.[ch])
file(GLOB f_client ${SRC_DIR}/client/faidctl*.[ch])

# the layers each layer may include from (its own first)
set(allowed_base base)
set(allowed_proto proto base)
set(allowed_core core base proto)
set(allowed_engine engine base proto core)
set(allowed_writer writer base proto core engine)
set(allowed_daemon daemon base proto core engine writer)
set(allowed_clientlib clientlib base proto)
set(allowed_client client base proto core engine writer clientlib)
set(layers base proto core engine writer daemon clientlib client)

# header name -> layer
foreach(layer ${layers})
  if(f_${layer} STREQUAL "")
    message(FATAL_ERROR "check_layers.cmake: no files for layer ${layer} under ${SRC_DIR}")
  endif()
  foreach(f ${f_${layer}})
    if(f MATCHES "\\.h$")
      get_filename_component(h ${f} NAME)
      if(DEFINED owner_${h})
        message(FATAL_ERROR "check_layers.cmake: header ${h} in two layers (${owner_${h}}, ${layer})")
      endif()
      set(owner_${h} ${layer})
    endif()
  endforeach()
endforeach()

set(bad "")
set(nchecked 0)
foreach(layer ${layers})
  foreach(f ${f_${layer}})
    file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    file(RELATIVE_PATH rel ${SRC_DIR} ${f})
    foreach(l ${lines})
      math(EXPR nchecked "${nchecked} + 1")
      if(l MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
        get_filename_component(h ${CMAKE_MATCH_1} NAME)
        if(DEFINED owner_${h})
          list(FIND allowed_${layer} ${owner_${h}} at)
          if(at EQUAL -1)
            string(REPLACE ";" ", " ok "${allowed_${layer}}")
            list(APPEND bad "${rel} (${layer}) includes ${h} (${owner_${h}}), but ${layer} may include only ${ok}")
          endif()
        endif()
      elseif(l MATCHES "#[ \t]*include[ \t]*<CL/" AND layer MATCHES "^(base|proto|core|clientlib)$")
        string(STRIP "${l}" l)
        list(APPEND bad "${rel} (${layer}): ${l}: OpenCL belongs to engine/")
      elseif(l MATCHES "#[ \t]*include[ \t]*<yaml\\.h>" AND layer MATCHES "^(base|proto|clientlib)$")
        string(STRIP "${l}" l)
        list(APPEND bad "${rel} (${layer}): ${l}: YAML starts at core/")
      endif()
    endforeach()
  endforeach()
endforeach()

if(bad)
  list(LENGTH bad n)
  string(REPLACE ";" "\n  " text "${bad}")
  message(FATAL_ERROR "layer check: ${n} include(s) against the layers "
                      "(base <- proto <- core <- engine <- writer <- daemon, faidctl; "
                      "client library <- base, proto):\n  ${text}")
endif()
message(STATUS "layer check: ${nchecked} includes, none upward")
