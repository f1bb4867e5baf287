# What ships. A plain install (scripts/package.sh: the tarball) lays out bin/, lib/, include/ and
# share/doc/tokprof; the wheel (scikit-build-core sets SKBUILD) puts bin/ and lib/ inside the
# Python package, tokprof/bin/tokprof and tokprof/lib/*.so, where `tokprof run` finds the shim
# as it does in the tarball (the executable's ../lib) and the Python package finds the decoder
# library.
if(SKBUILD)
  set(_pre "tokprof/")
else()
  set(_pre "")
endif()
install(TARGETS tokprof RUNTIME DESTINATION ${_pre}bin)
install(TARGETS tokprof_shim tokprof_decoder_shared LIBRARY DESTINATION ${_pre}lib)
if(NOT SKBUILD)
  install(FILES ${CMAKE_SOURCE_DIR}/include/tokprof/tokprof.h
    ${CMAKE_SOURCE_DIR}/include/tokprof/format.h ${CMAKE_SOURCE_DIR}/include/tokprof/decoder.h
    DESTINATION include/tokprof)
  install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION share/doc/tokprof)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION share/doc/tokprof FILES_MATCHING PATTERN "*.md")
endif()
