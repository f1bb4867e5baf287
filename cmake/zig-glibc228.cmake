# CMake toolchain file: release binaries that load on glibc >= 2.28 (RHEL/Rocky 8, Ubuntu 20.04,
# the CUDA images based on them, PyTorch's manylinux_2_28 wheels). The compiler is `zig cc
# -target x86_64-linux-gnu.2.28`: zig links against stubs of that glibc, so no symbol version
# newer than GLIBC_2.28 can be bound. zig comes from the `ziglang` PyPI package: ZIG names the
# binary, else the `ziglang` module of Python_EXECUTABLE (scikit-build-core passes the build
# environment's) or of python3 is asked. zstd and msgpack-c must then be built from source with the
# same compiler: TOKPROF_DEPS_SRC (cmake/deps.cmake; scripts/deps-src.sh fetches them).
#
#   scripts/deps-src.sh .deps
#   cmake -S . -B build-rel -DCMAKE_TOOLCHAIN_FILE=cmake/zig-glibc228.cmake \
#         -DTOKPROF_DEPS_SRC=$PWD/.deps -DTOKPROF_RELEASE_ONLY=ON
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(TOKPROF_ZIG_TARGET "x86_64-linux-gnu.2.28" CACHE STRING "zig target triple (glibc floor)")

if(NOT ZIG)
  set(ZIG "$ENV{ZIG}")
endif()
if(NOT ZIG)
  set(_py "${Python_EXECUTABLE}")
  if(NOT _py)
    set(_py "$ENV{TOKPROF_PYTHON}")
  endif()
  if(NOT _py)
    find_program(_py NAMES python3)
  endif()
  execute_process(COMMAND "${_py}" -c "import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))"
    OUTPUT_VARIABLE ZIG OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc ERROR_QUIET)
  if(NOT _rc EQUAL 0 OR NOT EXISTS "${ZIG}")
    message(FATAL_ERROR "zig-glibc228.cmake: no zig: set ZIG, or `pip install ziglang` into ${_py}")
  endif()
endif()
set(ZIG "${ZIG}" CACHE FILEPATH "the zig binary" FORCE)
# try_compile projects read this file again without the cache: hand them zig
set(ENV{ZIG} "${ZIG}")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ZIG TOKPROF_ZIG_TARGET)

# CMake wants one executable per tool: small wrappers in the build directory that add the
# subcommand and the target. The compiler's drops -Wl,--exclude-libs,ALL, which zig's linker does
# not know: in this build it has nothing to do, since zstd and msgpack-c are compiled hidden
# (cmake/deps.cmake) and the shared objects export through version scripts.
set(_wrap "${CMAKE_BINARY_DIR}/zig-wrap")
file(MAKE_DIRECTORY "${_wrap}")
file(WRITE "${_wrap}/zig-cc" "#!/bin/sh
for a in \"$@\"; do
  shift
  [ \"$a\" = -Wl,--exclude-libs,ALL ] || set -- \"$@\" \"$a\"
done
exec \"${ZIG}\" cc -target ${TOKPROF_ZIG_TARGET} \"$@\"
")
file(WRITE "${_wrap}/zig-ar" "#!/bin/sh\nexec \"${ZIG}\" ar \"$@\"\n")
file(WRITE "${_wrap}/zig-ranlib" "#!/bin/sh\nexec \"${ZIG}\" ranlib \"$@\"\n")
foreach(_tool cc ar ranlib)
  file(CHMOD "${_wrap}/zig-${_tool}" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
    GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endforeach()
set(CMAKE_C_COMPILER "${_wrap}/zig-cc")
set(CMAKE_ASM_COMPILER "${_wrap}/zig-cc")
set(CMAKE_AR "${_wrap}/zig-ar" CACHE FILEPATH "" FORCE)
set(CMAKE_RANLIB "${_wrap}/zig-ranlib" CACHE FILEPATH "" FORCE)
set(TOKPROF_ZIG ON)
