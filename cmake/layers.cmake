# cmake/layers.cmake: one CMake target per layer, each seeing only what it
# may use (docs/architecture.md).
#
# No target has the repository root on its include path. Instead each gets
# an include root of its own in the build tree, ${CMAKE_BINARY_DIR}/layers/
# <target>/, holding symbolic links to exactly the folders and headers it may
# include, under their repository paths: a source keeps writing
# #include "runtime/internal.h", and that compiles only in a target whose
# root links runtime/ (or that header). The public headers (include/) are
# seen by every target. `ci/test.sh layers` checks that a wrong include fails.
#
#   cb_layer(<target> SEES <path>...)
#
# <path> is a folder or a file, relative to the repository root. The root is
# remade at every configure, so a path taken out of SEES stops resolving.
function(cb_layer target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SEES")
  set(root ${CMAKE_BINARY_DIR}/layers/${target})
  file(REMOVE_RECURSE ${root}) # removes the links, never what they point to
  file(MAKE_DIRECTORY ${root})
  foreach(path IN LISTS arg_SEES)
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/${path})
      message(FATAL_ERROR "cb_layer(${target}): ${path} does not exist")
    endif()
    get_filename_component(parent ${root}/${path} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${path} ${root}/${path} SYMBOLIC)
  endforeach()
  target_include_directories(${target} PRIVATE ${root} ${PROJECT_SOURCE_DIR}/include)
  set_property(TARGET ${target} PROPERTY CB_LAYER_SEES "${arg_SEES}")
endfunction()

# The layers of libcubert, bottom up; their objects make libcubert.so/.a.
set(CUBERT_LIBRARY_LAYERS cubert_base cubert_core cubert_kernels cubert_topology
    cubert_backend_host cubert_backend_hip cubert_faultinj cubert_parts)
