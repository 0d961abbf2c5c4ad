# Template embedding: templates/*.cuh and *.h are compiled into the library as strings, each with
# the content hash of its include closure, so nothing is read from templates/ at run time and a
# template edit changes the cache key of exactly the contracts that use it.
add_executable(moejit_embed "${CMAKE_CURRENT_LIST_DIR}/embed_templates.cpp")
target_link_libraries(moejit_embed PRIVATE moejit_xxhash)

function(moejit_embed_templates out_var)
  set(out "${CMAKE_CURRENT_BINARY_DIR}/embedded_templates.cpp")
  add_custom_command(
    OUTPUT "${out}"
    COMMAND moejit_embed "${out}" ${ARGN}
    DEPENDS moejit_embed ${ARGN}
    WORKING_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}"
    COMMENT "Embedding kernel templates"
    VERBATIM)
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()
