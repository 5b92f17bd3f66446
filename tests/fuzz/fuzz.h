/* fuzz.h: what the libFuzzer targets of tests/fuzz/ share. FUZZ_TEXT(s, n)
 * opens a target's body with s a malloc'd NUL-terminated copy of the n
 * input bytes (freed after the body); the body only calls the parser:
 * ASan, UBSan and the leak checker do the judging. */
#ifndef MB_FUZZ_H
#define MB_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_TEXT(s, n)							\
static void fuzz_body(char *s, size_t n);				\
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)		\
{									\
	char *copy = malloc(size + 1);					\
	if (!copy)							\
		return 0;						\
	memcpy(copy, data, size);					\
	copy[size] = '\0';						\
	fuzz_body(copy, size);						\
	free(copy);							\
	return 0;							\
}									\
static void fuzz_body(char *s, size_t n)

#endif
