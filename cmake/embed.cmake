# cmake/embed.cmake: files embedded into C sources at configure time (the
# simulated nodes of topology/, the scenario suite of tools/faultinj/), so
# an installed binary needs no source tree.
#
#   cb_embed_bytes(<file> <out-var> <size-var>)
#
# Sets <out-var> to the bytes of <file> as a C initializer list with a final
# 0 (so the array is also a C string), and <size-var> to the file's size
# without that 0.
function(cb_embed_bytes file out size)
  file(READ ${file} hex HEX)
  string(LENGTH "${hex}" nhex)
  math(EXPR n "${nhex} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "((0x..,){24})" "\\1\n  " bytes "${bytes}")
  set(${out} "${bytes}0x00" PARENT_SCOPE)
  set(${size} ${n} PARENT_SCOPE)
endfunction()

#   cb_embed_write(<out.c> <text> <input>...)
#
# Writes the generated source <out.c> (through configure_file, so an
# unchanged result keeps its timestamp) and re-runs the configure step of
# the calling folder when any <input> changes.
function(cb_embed_write out text)
  file(WRITE ${out}.tmp "${text}")
  configure_file(${out}.tmp ${out} COPYONLY)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${ARGN})
endfunction()
