# cmake -DINPUT=file -DOUTPUT=file.cpp -DNAMESPACE=ns -DSYMBOL=name -P embed_text.cmake
# Writes OUTPUT defining `extern const char* const ns::name`, the text of INPUT (so the library can
# hand its own source text to a runtime compiler).
file(READ "${INPUT}" text)
string(FIND "${text}" ")ingot_embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )ingot_embed\"")
endif()
file(WRITE "${OUTPUT}.tmp" "// Generated from ${INPUT} by cmake/embed_text.cmake; do not edit.\nnamespace ${NAMESPACE} {\nextern const char* const ${SYMBOL};\nconst char* const ${SYMBOL} = R\"ingot_embed(${text})ingot_embed\";\n}\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
