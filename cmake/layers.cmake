# The library's layers (docs/architecture.md, "Layers"): one OBJECT library per layer, which sees
# only its own sources and public headers and those of the layers it declares, so an include that
# runs the wrong way does not compile.
#
# Each layer compiles with one include folder, a view made at configure time under
# build/<preset>/layers/<layer>/: symbolic links to its own src/ folder and public headers and to
# those of every layer below it that it depends on (directly or not); never `src` or `include`.

set(GIZML_LAYER_VIEWS ${PROJECT_BINARY_DIR}/layers)

# gizml_layer(NAME
#             SOURCES <folder under src>       the layer's sources (every .cpp below it)
#             [EXCEPT <folder under src>]      a folder inside SOURCES that is another layer's
#             [HEADERS <path under include>...] the public headers the layer defines
#             [DEPENDS <layer>...]             the layers it uses, declared before it
#             [HIDE <layer>...]                layers below whose sources it must not see,
#                                              though a layer it uses does (their public
#                                              headers stay visible)
#             [OUTSIDE_LIBRARY])               not part of libgizml (GIZML_LIBRARY_OBJECTS)
function(gizml_layer name)
  cmake_parse_arguments(L "OUTSIDE_LIBRARY" "SOURCES;EXCEPT" "HEADERS;DEPENDS;HIDE" ${ARGN})
  set(target gizml_${name})
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${L_SOURCES}/*.cpp)
  # What the layer owns in a view: link name -> target path, as "name=path" entries.
  set(entries)
  if(L_EXCEPT)
    list(FILTER sources EXCLUDE REGEX "/src/${L_EXCEPT}/")
    # The folder's entries one by one, leaving out the nested layer's folder (watched, so that a
    # header added later is linked at the next build).
    file(GLOB children CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}/src/${L_SOURCES}
         ${PROJECT_SOURCE_DIR}/src/${L_SOURCES}/*)
    foreach(child ${children})
      if(NOT "${L_SOURCES}/${child}" STREQUAL L_EXCEPT)
        list(APPEND entries "${L_SOURCES}/${child}=${PROJECT_SOURCE_DIR}/src/${L_SOURCES}/${child}")
      endif()
    endforeach()
  else()
    list(APPEND entries "${L_SOURCES}=${PROJECT_SOURCE_DIR}/src/${L_SOURCES}")
  endif()
  set_property(GLOBAL PROPERTY GIZML_LAYER_SOURCES_${name} ${entries})
  foreach(header ${L_HEADERS})
    list(APPEND entries "${header}=${PROJECT_SOURCE_DIR}/include/${header}")
  endforeach()
  # The view: this layer's entries and those of everything it depends on.
  set(visible ${entries})
  foreach(dep ${L_DEPENDS})
    if(NOT TARGET gizml_${dep})
      message(FATAL_ERROR "layer ${name} depends on ${dep}, which is not declared before it")
    endif()
    get_property(depVisible GLOBAL PROPERTY GIZML_LAYER_VISIBLE_${dep})
    list(APPEND visible ${depVisible})
  endforeach()
  foreach(hidden ${L_HIDE})
    get_property(hiddenSources GLOBAL PROPERTY GIZML_LAYER_SOURCES_${hidden})
    list(REMOVE_ITEM visible ${hiddenSources})
  endforeach()
  list(REMOVE_DUPLICATES visible)
  set_property(GLOBAL PROPERTY GIZML_LAYER_VISIBLE_${name} ${visible})
  set(view ${GIZML_LAYER_VIEWS}/${name})
  file(REMOVE_RECURSE ${view})
  foreach(entry ${visible})
    string(REPLACE "=" ";" pair ${entry})
    list(GET pair 0 link)
    list(GET pair 1 path)
    get_filename_component(parent ${view}/${link} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${path} ${view}/${link} SYMBOLIC)
  endforeach()

  add_library(${target} OBJECT ${sources})
  target_include_directories(${target} PRIVATE ${view})
  # The declared dependencies (object libraries: this records them, it links no objects).
  foreach(dep ${L_DEPENDS})
    target_link_libraries(${target} PRIVATE gizml_${dep})
  endforeach()
  set_property(TARGET ${target} PROPERTY GIZML_LAYER_VIEW ${view})
  if(NOT L_OUTSIDE_LIBRARY)
    set_property(GLOBAL APPEND PROPERTY GIZML_LIBRARY_OBJECTS $<TARGET_OBJECTS:${target}>)
  endif()
endfunction()
