# tkp_add_nvcc_executable(NAME OUTPUT_DIR dir SOURCES a.cu ... [FLAGS ...] [LIBS -lcublas ...])
#
# Builds a CUDA program with nvcc directly (not CMake's CUDA language, whose support for CUDA 13
# varies across CMake versions). The programs link the *real* toolkit libraries (-cudart shared);
# at run time LD_LIBRARY_PATH=build/tests/simgpu substitutes the simulated GPU, unmodified.
# Defines an ALL target NAME producing OUTPUT_DIR/NAME.
set(TKP_NVCC_ARCH -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
    CACHE STRING "nvcc architectures: sm_90 plus PTX")
function(tkp_add_nvcc_executable name)
  cmake_parse_arguments(A "" "OUTPUT_DIR" "SOURCES;FLAGS;LIBS;DEPENDS" ${ARGN})
  if(NOT A_OUTPUT_DIR)
    set(A_OUTPUT_DIR ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  set(out ${A_OUTPUT_DIR}/${name})
  set(srcs)
  foreach(s ${A_SOURCES})
    list(APPEND srcs ${CMAKE_CURRENT_SOURCE_DIR}/${s})
  endforeach()
  set(hostflags "-Wall")
  if(TOKPROF_SANITIZE)
    set(hostflags "${hostflags},-fsanitize=address,-fsanitize=undefined,-fno-omit-frame-pointer")
  endif()
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${A_OUTPUT_DIR}
    COMMAND ${NVCC} -O2 -std=c++17 -cudart shared ${TKP_NVCC_ARCH} -Xcompiler ${hostflags}
            ${A_FLAGS} -o ${out} ${srcs} ${A_LIBS}
    DEPENDS ${srcs} ${A_DEPENDS}
    COMMENT "nvcc ${name}"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${out})
endfunction()
