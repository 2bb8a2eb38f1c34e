# fission_layer(<folder under src> [NAME <name>] [SUBDIRS <folders...>] DEPS <targets...>)
# Builds every .cc file of the folder (and of the listed subfolders) into the static library
# fission_<name>. A folder with no
# sources yet becomes an INTERFACE library, so layers can be filled in without touching this file.
# With FISSION_UNITY_BUILD a layer compiles as a few unity sources (8 files each): the headers
# (nlohmann/json, Boost) are parsed and their templates instantiated once per batch instead of once
# per file, which makes the build of the `fission` binary about three times cheaper
# (docs/benchmarks.md). Names in a file's anonymous namespace must then differ from those of the
# other files of its layer.
set(FISSION_ALL_LAYERS "")
function(fission_layer dir)
  cmake_parse_arguments(L "" "NAME" "DEPS;SUBDIRS" ${ARGN})
  if(NOT L_NAME)
    set(L_NAME ${dir})
  endif()
  set(target fission_${L_NAME})
  file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${dir}/*.cc)
  foreach(sub ${L_SUBDIRS})
    file(GLOB sub_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${dir}/${sub}/*.cc)
    list(APPEND sources ${sub_sources})
  endforeach()
  if(sources)
    add_library(${target} STATIC ${sources})
    set_target_properties(${target} PROPERTIES UNITY_BUILD ${FISSION_UNITY_BUILD})
    # In a unity source every .cc is an included file, so GCC would warn about each class with a
    # member of a type from the file's anonymous namespace; that is the intended layout here.
    target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${target} PUBLIC ${L_DEPS})
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${target} INTERFACE ${L_DEPS})
  endif()
  set(FISSION_ALL_LAYERS ${FISSION_ALL_LAYERS} ${target} PARENT_SCOPE)
endfunction()
