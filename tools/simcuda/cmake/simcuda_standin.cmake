# simcuda_standin(NAME <name> LIBRARY <soname> SRC_DIR <dir>)
#
# One stand-in library: the hand-written emulation in <dir> (may be empty or absent) plus a weak,
# loud stub for every other function the wheel's surface lists for <soname>, exported under the
# library's symbol-version node. The file is ${SIMCUDA_LIB_DIR}/<soname> with that SONAME, found
# by libsimcuda.so through RUNPATH $ORIGIN. Target: simcuda_<name>; all of them are listed in the
# global property SIMCUDA_STANDIN_TARGETS and built by the target simcuda_standins.
include_guard(GLOBAL)

if(NOT TARGET simcuda_standins)
  add_custom_target(simcuda_standins ALL)
endif()

function(simcuda_standin)
  cmake_parse_arguments(arg "" "NAME;LIBRARY;SRC_DIR" "" ${ARGN})
  set(target simcuda_${arg_NAME})
  set(gen_dir ${CMAKE_CURRENT_BINARY_DIR}/generated/${arg_LIBRARY})
  set(stubs_c ${gen_dir}/stubs.c)
  set(version_map ${gen_dir}/exports.map)
  set(extra ${CMAKE_CURRENT_SOURCE_DIR}/surface/extra_${arg_LIBRARY}.txt)
  set(generator ${CMAKE_CURRENT_SOURCE_DIR}/gen/gen_stubs.py)
  set(extra_dep "")
  if(EXISTS ${extra})
    set(extra_dep ${extra})
  endif()
  set(surface_args "")
  foreach(surface ${SIMCUDA_SURFACES})
    list(APPEND surface_args --surface ${surface})
  endforeach()
  add_custom_command(
    OUTPUT ${stubs_c} ${version_map}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${gen_dir}
    COMMAND ${Python3_EXECUTABLE} ${generator} ${surface_args} --library ${arg_LIBRARY}
            --extra ${extra} --out-c ${stubs_c} --out-map ${version_map}
    DEPENDS ${generator} ${SIMCUDA_SURFACES} ${extra_dep}
    COMMENT "simcuda: stubs and exports of ${arg_LIBRARY}"
    VERBATIM)

  file(GLOB emulated CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${arg_SRC_DIR}/*.cpp)
  add_library(${target} SHARED ${emulated} ${stubs_c})
  # The file and SONAME are exactly the real library's (libcudart.so.13, libcuda.so.1, ...).
  string(REGEX REPLACE "^lib(.+)\\.so\\.([0-9]+)$" "\\1" output_name ${arg_LIBRARY})
  string(REGEX REPLACE "^lib(.+)\\.so\\.([0-9]+)$" "\\2" so_version ${arg_LIBRARY})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ${output_name}
    SOVERSION ${so_version}
    LIBRARY_OUTPUT_DIRECTORY ${SIMCUDA_LIB_DIR}
    BUILD_RPATH "$ORIGIN" INSTALL_RPATH "$ORIGIN"
    LINK_DEPENDS ${version_map})
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/include ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(${target} PRIVATE simcuda ${CMAKE_DL_LIBS})
  target_link_options(${target} PRIVATE "LINKER:--version-script=${version_map}" "LINKER:--no-undefined")
  phasealloc_warnings(${target})
  add_dependencies(simcuda_standins ${target})
  set_property(GLOBAL APPEND PROPERTY SIMCUDA_STANDIN_TARGETS ${target})
endfunction()
