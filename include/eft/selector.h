/* selector.h - JMS message selectors (the SQL-92 subset of JMS 1.1
 * section 3.8.1) over STOMP headers, as ActiveMQ's "selector" header uses.
 *
 * A selector is compiled once into a small tree and then matched against
 * any number of messages; matching never allocates and recurses no deeper
 * than the compile-time bound on nesting.
 *
 * Choices where JMS leaves room or STOMP differs:
 * - identifiers are Java-like (letters, digits, '_', '$', bytes >= 0x80;
 *   not starting with a digit) and may also contain '.' and '-' after the
 *   first character, since STOMP headers are named "x-type" or
 *   "activemq.foo": write "a - b" with spaces to subtract;
 * - header values are strings; where a number is wanted (a comparison with
 *   a number, < > <= >=, BETWEEN, arithmetic) a value that is entirely a
 *   decimal number ([+-]digits[.digits][e[+-]digits], at most 63 bytes) is
 *   converted, anything else makes the comparison UNKNOWN.  Numbers are
 *   doubles: integers are exact up to 2^53;
 * - strings compare only with = and <> (byte for byte).  Ordering a string
 *   literal, or a boolean, is a compile error; < > between two headers
 *   compares them as numbers, UNKNOWN if either is not one;
 * - a header "true" or "false" (any case) equals the TRUE or FALSE literal,
 *   and a header alone as a condition is TRUE, FALSE or UNKNOWN that way;
 * - LIKE's '_' matches one UTF-8 character; ESCAPE is one byte;
 * - comparing values of different known types ('a' = 1) is a compile error;
 *   division by zero is UNKNOWN;
 * - no hexadecimal or octal literals, no 'L' suffix. */
#ifndef EFT_SELECTOR_H
#define EFT_SELECTOR_H

#include <stdbool.h>
#include <stddef.h>

#define SELECTOR_MAX_DEPTH 64   /* nesting, in levels of the tree or of the text */
#define SELECTOR_MAX_NODES 4096

struct selector;

/* The value of header name (len bytes) in *value, *vlen; false if the
 * message has no such header (NULL in the selector's terms). */
typedef bool (*selector_lookup_fn)(void *arg, const char *name, size_t len, const char **value,
    size_t *vlen);

/* Compile len bytes of text.  NULL on a syntax or type error, with a
 * message naming the 1-based byte position in err ("selector: position
 * 12: expected ')'"), or on running out of memory. */
struct selector *selector_compile(const char *text, size_t len, char *err, size_t errlen);
/* Is the selector TRUE for the message whose headers lookup finds?
 * (FALSE and UNKNOWN do not match.) */
bool selector_match(const struct selector *s, selector_lookup_fn lookup, void *arg);
void selector_free(struct selector *s);

#endif
