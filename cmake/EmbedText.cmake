# Writes OUTPUT, a C++ file defining `extern const char NAME[]` as the text
# of INPUT (a raw string literal): how the build embeds generated PTX.
# Usage: cmake -DINPUT=... -DOUTPUT=... -DNAME=... -P EmbedText.cmake
file(READ "${INPUT}" text)
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/EmbedText.cmake.\n"
  "extern const char ${NAME}[];\n"
  "const char ${NAME}[] = R\"energy_text(${text})energy_text\";\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
