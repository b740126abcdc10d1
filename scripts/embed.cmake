# Turns file IN into a C source OUT defining `const char SYM[]` (NUL-terminated)
# and `const unsigned long SYM_len`.
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
string(LENGTH "${hex}" n)
math(EXPR n "${n} / 2")
file(WRITE ${OUT} "/* Generated from ${IN}; do not edit. */\n"
  "extern const char ${SYM}[];\nextern const unsigned long ${SYM}_len;\n"
  "const char ${SYM}[] = {\n${body}0x00};\n"
  "const unsigned long ${SYM}_len = ${n};\n")
