/* subject.h - wildcard subjects: topic and queue names as '.'-separated
 * elements, and patterns over them in the dialects users bring.
 *
 * Names here are what follows the destination kind's prefix (the caller
 * strips "/topic/" or "/queue/").  An element is what lies between two dots
 * (or an end), so "a..b" has three elements, the middle one empty, and ""
 * has one, empty.  An element that is exactly one of these is a wildcard:
 *   '*'  one element, whatever it is, empty too (RabbitMQ, ActiveMQ, NATS);
 *   '>'  one or more trailing elements (ActiveMQ, NATS); only last;
 *   '#'  zero or more elements (RabbitMQ), anywhere, any number of times:
 *        "a.#" matches "a" and "a.b.c", "a.#.b" matches "a.b" and "a.x.y.b".
 * An element that merely contains one of them among other bytes ("a*",
 * "x#y") is literal.  A name with no wildcard element is a plain name: it is
 * never validated here (empty elements stay allowed in plain names) and as a
 * pattern it matches itself alone.  Matched as a name, an element "*", ">"
 * or "#" is an ordinary element that only wildcards match ("a.*" is matched
 * by "a.*" and "a.#" as a pattern, never by the plain "a.b").
 *
 * A set of patterns (struct subjects) is a tree with one level per element,
 * as nats-server's sublist: a publish walks the name's elements, never the
 * patterns, and the answers for recent names are cached until the set
 * changes.  Nothing here does I/O or logs. */
#ifndef EFT_SUBJECT_H
#define EFT_SUBJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct subject_error {
	size_t pos;             /* 0-based byte position in the string given */
	const char *why;        /* a static string */
};

/* 0: a plain name; 1: a well-formed pattern; -1: a malformed pattern (*err
 * set): an empty element ("a..*", ".*", "*."), '>' not last ("a.>.b"), or
 * both '#' and '>' (two dialects in one pattern).  The first problem from
 * the left is the one named. */
int subject_parse(const char *s, size_t len, struct subject_error *err);
/* Does pattern pat (well-formed, or a plain name: equality) match name
 * (plain)?  The reference matcher, for permissions and the fuzzer: no
 * allocation, O(plen * nlen) at worst. */
bool subject_match(const char *pat, size_t plen, const char *name, size_t nlen);
/* How many leading bytes every name pat matches starts with (a plain name:
 * all of it): "a.b.*" -> 4 ("a.b."), "a.#" -> 1 ("a": '#' also matches zero
 * elements), "a.#.c" -> 1, "*.b" -> 0, "a.>" -> 2. */
size_t subject_fixed_prefix(const char *pat, size_t plen);
/* Where the first '#' element that some other element follows is (its byte
 * offset), or plen if none: "a.#.c" -> 2, "#.c" -> 0, "a.#" and "a.#.#" ->
 * plen (a final run of '#' is one '#' at the end).  What NATS's '>' cannot
 * say exactly (cluster_wire.h). */
size_t subject_inner_hash(const char *pat, size_t plen);

/* A set of patterns, each carrying caller values (void *); the same pattern
 * may carry several values, and the same (pattern, value) more than once.
 * Patterns that differ only in consecutive '#' are one ("#.#" is "#"): a
 * (value, "a.#") added is removed by "a.#.#" too. */
struct subjects;

struct subjects_stats {
	size_t nodes;           /* of the tree, its root included */
	uint64_t cache_hits;    /* subjects_match answered from the cache */
	uint64_t cache_misses;  /* ... by walking the tree */
};

struct subjects *subjects_new(void);                 /* NULL: out of memory */
void subjects_free(struct subjects *set);
/* Add value under well-formed pattern pat (the caller has checked
 * subject_parse() == 1; a plain name works too).  0, or -1 out of memory
 * (nothing changed). */
int subjects_add(struct subjects *set, const char *pat, size_t len, void *value);
/* Remove one (pat, value) added before; 0, or -1 if it was not there.
 * Never allocates. */
int subjects_remove(struct subjects *set, const char *pat, size_t len, void *value);
size_t subjects_count(const struct subjects *set);   /* (pattern, value) entries */
/* Every value whose pattern matches the plain name, each distinct value
 * once even if reached by several paths ("a.#.#") or patterns, in an array
 * owned by the set, valid until the next add/remove/match/free; *n of them
 * (0 and a non-NULL or NULL pointer when none).  NULL with *n = (size_t)-1
 * only if out of memory.  O(1) on an empty set; answers for recent names
 * are cached (up to 1,024 names, dropped whole when the set changes). */
void *const *subjects_match(struct subjects *set, const char *name, size_t len, size_t *n);
void subjects_stats(const struct subjects *set, struct subjects_stats *st);
/* What is wrong with the set's structures (the tree, its counts, the cache),
 * or NULL: for tests and fuzzers, O(size of the set). */
const char *subjects_check(const struct subjects *set);

#endif
