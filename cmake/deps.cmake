# zstd, msgpack-c and zlib built from their sources (TOKPROF_DEPS_SRC: a folder holding libzstd-*/,
# msgpack-c-*/ and zlib-*/, as scripts/deps-src.sh unpacks Debian's source packages) with the build's own
# compiler: the release toolchain (cmake/zig-glibc228.cmake) cannot link Debian's archives, which
# were compiled against glibc 2.36's headers. Static, position-independent and hidden, so they
# link into the shim, the CLI and the decoder library without being re-exported.
# Sets ZSTD_STATIC, MSGPACK_STATIC, ZLIB_STATIC (target names), ZSTD_INCLUDE and MSGPACK_INCLUDE.
get_filename_component(TOKPROF_DEPS_SRC "${TOKPROF_DEPS_SRC}" ABSOLUTE BASE_DIR "${CMAKE_SOURCE_DIR}")
file(GLOB _zstd_dir LIST_DIRECTORIES true "${TOKPROF_DEPS_SRC}/libzstd-*")
file(GLOB _zlib_dir LIST_DIRECTORIES true "${TOKPROF_DEPS_SRC}/zlib-*")
list(FILTER _zlib_dir EXCLUDE REGEX "\\.(tar|dsc|asc|xz|gz)")
if(NOT _zstd_dir OR NOT _zlib_dir)
  # `pip wheel .` on a fresh checkout: fetch them (Debian's apt-get source)
  execute_process(COMMAND "${CMAKE_SOURCE_DIR}/scripts/deps-src.sh" "${TOKPROF_DEPS_SRC}")
endif()
file(GLOB _zstd_dir LIST_DIRECTORIES true "${TOKPROF_DEPS_SRC}/libzstd-*" "${TOKPROF_DEPS_SRC}/zstd-*")
file(GLOB _msgpack_dir LIST_DIRECTORIES true "${TOKPROF_DEPS_SRC}/msgpack-c-*")
file(GLOB _zlib_dir LIST_DIRECTORIES true "${TOKPROF_DEPS_SRC}/zlib-*")
list(FILTER _zlib_dir EXCLUDE REGEX "\\.(tar|dsc|asc|xz|gz)")
list(FILTER _zstd_dir EXCLUDE REGEX "\\.(tar|dsc|asc|xz|gz)")
list(FILTER _msgpack_dir EXCLUDE REGEX "\\.(tar|dsc|asc|xz|gz)")
if(NOT _zstd_dir OR NOT _msgpack_dir OR NOT _zlib_dir)
  message(FATAL_ERROR "TOKPROF_DEPS_SRC=${TOKPROF_DEPS_SRC}: no libzstd-*/, msgpack-c-*/ or zlib-*/ (run scripts/deps-src.sh)")
endif()
list(GET _zlib_dir 0 _zlib_dir)
list(GET _zstd_dir 0 _zstd_dir)
list(GET _msgpack_dir 0 _msgpack_dir)

# zstd: the compressor and decompressor (no legacy formats, no dictionary builder, one thread).
file(GLOB _zstd_src "${_zstd_dir}/lib/common/*.c" "${_zstd_dir}/lib/compress/*.c"
  "${_zstd_dir}/lib/decompress/*.c" "${_zstd_dir}/lib/decompress/*.S")
add_library(tkp_dep_zstd STATIC ${_zstd_src})
target_compile_definitions(tkp_dep_zstd PRIVATE ZSTD_LEGACY_SUPPORT=0 XXH_NAMESPACE=ZSTD_)
target_compile_options(tkp_dep_zstd PRIVATE -O2 -w)
set_target_properties(tkp_dep_zstd PROPERTIES POSITION_INDEPENDENT_CODE ON
  C_VISIBILITY_PRESET hidden)

# msgpack-c: its CMake generates two headers from templates (the byte order) next to the others,
# which include them by their bare names: a copy of its headers in the build tree, completed.
set(MSGPACK_ENDIAN_BIG_BYTE 0)
set(MSGPACK_ENDIAN_LITTLE_BYTE 1)
set(_mp_gen "${CMAKE_BINARY_DIR}/deps/msgpack-include")
file(COPY "${_msgpack_dir}/include/" DESTINATION "${_mp_gen}")
configure_file("${_msgpack_dir}/cmake/sysdep.h.in" "${_mp_gen}/msgpack/sysdep.h" @ONLY)
configure_file("${_msgpack_dir}/cmake/pack_template.h.in" "${_mp_gen}/msgpack/pack_template.h" @ONLY)
file(GLOB _mp_src "${_msgpack_dir}/src/*.c")
add_library(tkp_dep_msgpack STATIC ${_mp_src})
target_include_directories(tkp_dep_msgpack PRIVATE "${_mp_gen}")
target_compile_options(tkp_dep_msgpack PRIVATE -O2 -w)
set_target_properties(tkp_dep_msgpack PROPERTIES POSITION_INDEPENDENT_CODE ON
  C_VISIBILITY_PRESET hidden)

set(ZSTD_STATIC tkp_dep_zstd)
set(MSGPACK_STATIC tkp_dep_msgpack)
set(ZSTD_INCLUDE "${_zstd_dir}/lib")
set(MSGPACK_INCLUDE "${_mp_gen}")

# zlib (gzip tables and HTTP bodies of the fleet commands): its library sources at the top level
set(_zlib_names adler32 compress crc32 deflate gzclose gzlib gzread gzwrite infback inffast inflate
  inftrees trees uncompr zutil)
list(TRANSFORM _zlib_names PREPEND "${_zlib_dir}/")
list(TRANSFORM _zlib_names APPEND ".c")
add_library(tkp_dep_zlib STATIC ${_zlib_names})
target_include_directories(tkp_dep_zlib PUBLIC "${_zlib_dir}")
target_compile_definitions(tkp_dep_zlib PRIVATE HAVE_UNISTD_H HAVE_STDARG_H)
target_compile_options(tkp_dep_zlib PRIVATE -O2 -w)
set_target_properties(tkp_dep_zlib PROPERTIES POSITION_INDEPENDENT_CODE ON
  C_VISIBILITY_PRESET hidden)
set(ZLIB_STATIC tkp_dep_zlib)
