# embed.cmake: writes the bytes of a file as a C array, for a build step:
#   cmake -DIN=FILE -DOUT=FILE.c -DNAME=SYMBOL -P embed.cmake
# defines `const unsigned char SYMBOL[]` and `const size_t SYMBOL_bytes`.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR bytes "${digits} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){24})" "\\1\n  " body "${body}")
file(WRITE "${OUT}" "/* Generated from ${IN} by cmake/embed.cmake. */\n#include <stddef.h>\n\n"
     "extern const unsigned char ${NAME}[];\nextern const size_t ${NAME}_bytes;\n\n"
     "const unsigned char ${NAME}[] = {\n  ${body}\n};\nconst size_t ${NAME}_bytes = ${bytes};\n")
