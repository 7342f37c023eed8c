# cmake/install.cmake: what `cmake --install` puts where (included by the
# top-level CMakeLists.txt).
#   include/cubert/*.h                public headers (private ones stay out)
#   lib/libcubert.so.X.Y.Z (+links)   and lib/libcubert.a
#   bin/cubert                        the tool (links libcubert.a)
#   lib/cmake/cubert/                 cubertConfig.cmake, cubertConfigVersion.cmake,
#                                     cubertTargets*.cmake: cubert::cubert and
#                                     cubert::cubert_static
#   lib/pkgconfig/cubert.pc           written at install time, so that
#                                     `cmake --install --prefix P` gets P in it
#   share/man/man1/cubert.1           from the tool's --help by help2man (when
#                                     found; Debian: help2man)
#   share/doc/cubert/                 README.md, docs/*.md, examples/guide/: the
#                                     source tree's layout, so that the README's
#                                     links and every "docs/X.md" resolve there
set(CUBERT_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/cubert)

# Libraries outside the system's directories (ROCm in /opt/rocm, a CUDA kit)
# stay findable from the installed library and tool.
set_target_properties(cubert PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
if(TARGET cubert_cli)
  set_target_properties(cubert_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
endif()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/cubert
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "mpi.h" EXCLUDE) # with its component
install(TARGETS cubert cubert_static EXPORT cubertTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET cubert_cli)
  install(TARGETS cubert_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT cubertTargets NAMESPACE cubert::
        DESTINATION ${CUBERT_CMAKE_INSTALL_DIR} FILE cubertTargets.cmake)

# ------------------------------------------------------------ backend libraries
# CUBERT_BACKEND_LIBS (set by backends/hip) may hold library paths, names,
# linker flags or imported targets. The pkg-config file wants flags, and the
# CMake package wants what a consumer can resolve: reduce each to that.
function(cb_link_item_flags item out)
  set(flags "")
  if(TARGET ${item})
    get_target_property(type ${item} TYPE)
    get_target_property(imported ${item} IMPORTED)
    if(NOT imported)
      message(FATAL_ERROR "cmake/install.cmake: CUBERT_BACKEND_LIBS names the build target "
                          "'${item}', which an installed cubert cannot carry; name a library")
    endif()
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(loc ${item} IMPORTED_LOCATION)
      if(NOT loc)
        string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
        get_target_property(loc ${item} IMPORTED_LOCATION_${config})
      endif()
      if(NOT loc)
        get_target_property(configs ${item} IMPORTED_CONFIGURATIONS)
        list(GET configs 0 config)
        get_target_property(loc ${item} IMPORTED_LOCATION_${config})
      endif()
      if(loc)
        cb_link_item_flags("${loc}" f)
        list(APPEND flags ${f})
      endif()
    endif()
    get_target_property(deps ${item} INTERFACE_LINK_LIBRARIES)
    if(deps)
      foreach(dep IN LISTS deps)
        if(dep MATCHES "^\\$<")
          continue()
        endif()
        cb_link_item_flags("${dep}" f)
        list(APPEND flags ${f})
      endforeach()
    endif()
  elseif(IS_ABSOLUTE "${item}")
    get_filename_component(dir "${item}" DIRECTORY)
    get_filename_component(name "${item}" NAME)
    if(name MATCHES "^lib(.+)\\.(so|a)(\\..*)?$")
      if(NOT dir IN_LIST CMAKE_C_IMPLICIT_LINK_DIRECTORIES)
        list(APPEND flags "-L${dir}")
      endif()
      list(APPEND flags "-l${CMAKE_MATCH_1}")
    else()
      list(APPEND flags "${item}")
    endif()
  elseif(item MATCHES "^-")
    list(APPEND flags "${item}")
  elseif(item STREQUAL "Threads::Threads")
    list(APPEND flags "-pthread")
  elseif(NOT item STREQUAL "")
    list(APPEND flags "-l${item}")
  endif()
  set(${out} ${flags} PARENT_SCOPE)
endfunction()

set(cb_pc_backend_flags "")
foreach(item IN LISTS CUBERT_BACKEND_LIBS)
  cb_link_item_flags("${item}" f)
  list(APPEND cb_pc_backend_flags ${f})
endforeach()
list(REMOVE_DUPLICATES cb_pc_backend_flags)

# ------------------------------------------------------------ CMake package
set(CUBERT_CONFIG_BACKEND_LIBS "${CUBERT_BACKEND_LIBS}")
set(CUBERT_CONFIG_HIP_PLATFORM "${CUBERT_HIP_PLATFORM}")
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/cubertConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cubertConfig.cmake
  INSTALL_DESTINATION ${CUBERT_CMAKE_INSTALL_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cubertConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cubertConfig.cmake
              ${PROJECT_BINARY_DIR}/cubertConfigVersion.cmake
        DESTINATION ${CUBERT_CMAKE_INSTALL_DIR})

# ------------------------------------------------------------ pkg-config
# Configured twice: now with everything but the prefix, and at install time
# with the prefix the install really uses.
list(JOIN cb_pc_backend_flags " " cb_pc_backend)
set(CUBERT_PC_LIBS_PRIVATE "${cb_pc_backend} -lm -pthread")
string(STRIP "${CUBERT_PC_LIBS_PRIVATE}" CUBERT_PC_LIBS_PRIVATE)
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(CUBERT_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(CUBERT_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
set(CUBERT_PC_PREFIX "@CUBERT_PC_PREFIX@")
configure_file(${PROJECT_SOURCE_DIR}/cmake/cubert.pc.in ${PROJECT_BINARY_DIR}/cubert.pc.install @ONLY)
install(CODE "
  set(CUBERT_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/cubert.pc.install\" \"${PROJECT_BINARY_DIR}/cubert.pc\" @ONLY)
")
install(FILES ${PROJECT_BINARY_DIR}/cubert.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ------------------------------------------------------------ the MPI component
#   include/cubert/mpi.h, lib/libcubert_mpi.so (+links), lib/libcubert_mpi.a,
#   lib/cmake/cubert/cubertMpiTargets*.cmake (cubert::mpi, cubert::mpi_static:
#   find_package(cubert COMPONENTS mpi)), lib/pkgconfig/cubert-mpi.pc
if(TARGET cubert_mpi)
  install(FILES ${PROJECT_SOURCE_DIR}/include/cubert/mpi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/cubert)
  install(TARGETS cubert_mpi cubert_mpi_static EXPORT cubertMpiTargets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT cubertMpiTargets NAMESPACE cubert::
          DESTINATION ${CUBERT_CMAKE_INSTALL_DIR} FILE cubertMpiTargets.cmake)
  if(TARGET cubert_mpi_tool)
    set_target_properties(cubert_mpi_tool PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
    install(TARGETS cubert_mpi_tool RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
  set(cb_mpi_flags "")
  foreach(item IN LISTS MPI_C_LIBRARIES)
    cb_link_item_flags("${item}" f)
    list(APPEND cb_mpi_flags ${f})
  endforeach()
  list(REMOVE_DUPLICATES cb_mpi_flags)
  list(JOIN cb_mpi_flags " " CUBERT_MPI_PC_LIBS)
  set(CUBERT_MPI_PC_CFLAGS "")
  foreach(dir IN LISTS MPI_C_INCLUDE_DIRS)
    string(APPEND CUBERT_MPI_PC_CFLAGS " -I${dir}")
  endforeach()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/cubert-mpi.pc.in ${PROJECT_BINARY_DIR}/cubert-mpi.pc.install @ONLY)
  install(CODE "
    set(CUBERT_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${PROJECT_BINARY_DIR}/cubert-mpi.pc.install\" \"${PROJECT_BINARY_DIR}/cubert-mpi.pc\" @ONLY)
  ")
  install(FILES ${PROJECT_BINARY_DIR}/cubert-mpi.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

# ------------------------------------------------------------ man page, docs
find_program(CUBERT_HELP2MAN help2man)
if(TARGET cubert_cli AND CUBERT_HELP2MAN)
  add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/cubert.1
    COMMAND ${CMAKE_COMMAND} -DCLI=$<TARGET_FILE:cubert_cli> -DHELP2MAN=${CUBERT_HELP2MAN}
            -DOUT=${PROJECT_BINARY_DIR}/cubert.1 -P ${PROJECT_SOURCE_DIR}/cmake/manpage.cmake
    DEPENDS cubert_cli ${PROJECT_SOURCE_DIR}/cmake/manpage.cmake
            $<$<TARGET_EXISTS:cubert_mpi_tool>:cubert_mpi_tool> # `bench mpi --help` runs it
    COMMENT "cubert(1) from cubert --help (help2man)")
  add_custom_target(cubert_man ALL DEPENDS ${PROJECT_BINARY_DIR}/cubert.1)
  install(FILES ${PROJECT_BINARY_DIR}/cubert.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  if(CUBERT_BUILD_TESTS)
    # every command's section and every variable's entry (tests/man_check.cmake)
    add_test(NAME cli_man_page COMMAND ${CMAKE_COMMAND} "-DCLI=$<TARGET_FILE:cubert_cli>"
      -DMAN=${PROJECT_BINARY_DIR}/cubert.1 -P ${PROJECT_SOURCE_DIR}/tests/man_check.cmake)
    set_tests_properties(cli_man_page PROPERTIES LABELS "cli")
  endif()
elseif(TARGET cubert_cli)
  message(STATUS "cubert(1): help2man not found (Debian: help2man), no man page")
endif()
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
        FILES_MATCHING PATTERN "*.md" PATTERN "runs" EXCLUDE)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/guide DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
