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

# Measured data the code decides by, embedded as strings (edit the JSON, not the code): each
# DIR/NAME.json (relative to the calling directory) becomes std::string_view
# moejit::detail::NAME_json() in a generated source, listed in `out_var`.
function(moejit_embed_data out_var)
  set(sources)
  foreach(data ${ARGN})
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${data}.json)
    get_filename_component(name ${data} NAME)
    file(RELATIVE_PATH MOEJIT_DATA_FILE "${PROJECT_SOURCE_DIR}" "${CMAKE_CURRENT_SOURCE_DIR}/${data}.json")
    set(MOEJIT_DATA_FUNCTION ${name}_json)
    file(READ ${data}.json MOEJIT_DATA_JSON)
    configure_file("${CMAKE_CURRENT_FUNCTION_LIST_DIR}/data.cpp.in" "${CMAKE_CURRENT_BINARY_DIR}/${name}.cpp" @ONLY)
    list(APPEND sources "${CMAKE_CURRENT_BINARY_DIR}/${name}.cpp")
  endforeach()
  set(${out_var} ${sources} PARENT_SCOPE)
endfunction()
