/* subject-fuzzer.c - libFuzzer harness for wildcard subjects (subject.c).
 *
 * Input: lines of OP VALUE STRING.  OP '+' adds (STRING, VALUE) to a set
 * when subject_parse() takes STRING, '-' removes (STRING, VALUE), '~'
 * removes the live entry numbered VALUE (of those added), '?' matches
 * STRING as a name; any other OP byte is one of those four (byte % 4).
 * VALUE is a byte whose low 3 bits pick one of 8 values (0 is NULL).
 * STRING is at most 24 bytes; a byte >= 0x80 in it stands for one of
 * "ab.*>#" so that random bytes make elements that meet.
 *
 * Beside the set the harness keeps the live (pattern, value) entries in an
 * array and checks, with a naive matcher of its own (recursion over
 * element lists, memoised so that "#.#.#..." stays small):
 *   - subject_parse against a naive validity check (result and position);
 *   - subject_match against the naive matcher for every live pattern;
 *   - subjects_match: exactly the distinct values of the live entries whose
 *     pattern matches, each once, after every match and, for the last few
 *     names matched, again after every add and remove (the cache must be
 *     dropped);
 *   - subject_fixed_prefix: every matching name starts with it;
 *   - subjects_remove: 0 exactly when such an entry is live; count;
 *   - subjects_check (the tree's and the cache's bookkeeping) after each step.
 * At the end every live entry is removed and the tree must be back to its
 * root alone.  Violations abort(); ASan and UBSan catch the rest. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eft/subject.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZER "subject-fuzzer"
#include "check.h"

#define MAX_STR     24
#define MAX_ENTRIES 64
#define MAX_OPS     256
#define RECENT      4

struct str {
	char s[MAX_STR];
	size_t len;
};

struct entry {
	struct str pat;
	int value;
};

struct elems {
	const char *e[MAX_STR + 1];
	size_t len[MAX_STR + 1];
	size_t off[MAX_STR + 1];
	size_t n;
};

static char values[8];

static void *
value_ptr(int v)
{
	return v == 0 ? NULL : &values[v];
}

/* Cut s at every '.' (a string of k dots has k + 1 elements). */
static void
split(const struct str *s, struct elems *out)
{
	size_t start = 0;
	out->n = 0;
	for (size_t i = 0; i <= s->len; i++) {
		if (i == s->len || s->s[i] == '.') {
			out->e[out->n] = s->s + start;
			out->len[out->n] = i - start;
			out->off[out->n] = start;
			out->n++;
			start = i + 1;
		}
	}
}

static bool
is(const struct elems *p, size_t i, char c)
{
	return p->len[i] == 1 && p->e[i][0] == c;
}

static bool
is_wild(const struct elems *p, size_t i)
{
	return is(p, i, '*') || is(p, i, '>') || is(p, i, '#');
}

/* Does the pattern from element i on match the name from element j on?
 * memo: 0 unknown, 1 no, 2 yes. */
static bool
naive(const struct elems *p, size_t i, const struct elems *nm, size_t j,
    uint8_t memo[MAX_STR + 2][MAX_STR + 2])
{
	if (memo[i][j])
		return memo[i][j] == 2;
	bool r;
	if (i == p->n)
		r = j == nm->n;
	else if (is(p, i, '#')) /* zero elements, or one and still '#' */
		r = naive(p, i + 1, nm, j, memo) || (j < nm->n && naive(p, i, nm, j + 1, memo));
	else if (is(p, i, '>')) /* the last element: one or more */
		r = j < nm->n;
	else if (j == nm->n)
		r = false;
	else if (is(p, i, '*'))
		r = naive(p, i + 1, nm, j + 1, memo);
	else
		r = p->len[i] == nm->len[j] && memcmp(p->e[i], nm->e[j], p->len[i]) == 0 &&
		    naive(p, i + 1, nm, j + 1, memo);
	memo[i][j] = r ? 2 : 1;
	return r;
}

static bool
naive_match(const struct str *pat, const struct str *name)
{
	struct elems p, nm;
	uint8_t memo[MAX_STR + 2][MAX_STR + 2];
	memset(memo, 0, sizeof(memo));
	split(pat, &p);
	split(name, &nm);
	return naive(&p, 0, &nm, 0, memo);
}

/* subject_parse's answer, worked out element by element: 0 plain, 1 a
 * pattern, -1 with the position of the first bad element. */
static int
naive_parse(const struct str *s, size_t *pos)
{
	struct elems p;
	split(s, &p);
	bool wild = false, hash = false, gt = false;
	for (size_t i = 0; i < p.n; i++)
		wild |= is_wild(&p, i);
	if (!wild)
		return 0;
	for (size_t i = 0; i < p.n; i++) {
		*pos = p.off[i];
		if (p.len[i] == 0 || (is(&p, i, '>') && i + 1 < p.n) ||
		    (is(&p, i, '>') && hash) || (is(&p, i, '#') && gt))
			return -1;
		hash |= is(&p, i, '#');
		gt |= is(&p, i, '>');
	}
	return 1;
}

/* Bytes before the first wildcard element, less the dot before a '#'. */
static size_t
naive_prefix(const struct str *s)
{
	struct elems p;
	split(s, &p);
	for (size_t i = 0; i < p.n; i++)
		if (is_wild(&p, i))
			return is(&p, i, '#') && i > 0 ? p.off[i] - 1 : p.off[i];
	return s->len;
}

/* The same pattern for the set: consecutive '#' are one. */
static void
normalise(const struct str *s, struct str *out)
{
	struct elems p;
	split(s, &p);
	out->len = 0;
	for (size_t i = 0; i < p.n; i++) {
		if (i > 0 && is(&p, i, '#') && is(&p, i - 1, '#'))
			continue;
		if (i > 0)
			out->s[out->len++] = '.';
		memcpy(out->s + out->len, p.e[i], p.len[i]);
		out->len += p.len[i];
	}
}

static bool
same_pattern(const struct str *a, const struct str *b)
{
	struct str na, nb;
	normalise(a, &na);
	normalise(b, &nb);
	return na.len == nb.len && memcmp(na.s, nb.s, na.len) == 0;
}

struct world {
	struct subjects *set;
	struct entry live[MAX_ENTRIES];
	size_t nlive;
	struct str recent[RECENT];
	size_t nrecent;
};

static void
check_match(struct world *w, const struct str *name)
{
	bool want[8] = { false };
	size_t nwant = 0;
	for (size_t i = 0; i < w->nlive; i++) {
		const struct entry *e = &w->live[i];
		bool m = naive_match(&e->pat, name);
		CHECK(subject_match(e->pat.s, e->pat.len, name->s, name->len) == m,
		    "subject_match('%.*s', '%.*s') is not %d", (int)e->pat.len, e->pat.s,
		    (int)name->len, name->s, m);
		if (!m)
			continue;
		size_t fixed = subject_fixed_prefix(e->pat.s, e->pat.len);
		CHECK(fixed <= name->len && memcmp(e->pat.s, name->s, fixed) == 0,
		    "'%.*s' matches '%.*s', which does not start with its %zu fixed bytes",
		    (int)e->pat.len, e->pat.s, (int)name->len, name->s, fixed);
		if (!want[e->value])
			nwant++;
		want[e->value] = true;
	}
	size_t n;
	void *const *r = subjects_match(w->set, name->s, name->len, &n);
	CHECK(n != (size_t)-1, "out of memory");
	CHECK(n == nwant, "'%.*s': %zu values, want %zu", (int)name->len, name->s, n, nwant);
	bool got[8] = { false };
	for (size_t i = 0; i < n; i++) {
		int v = r[i] == NULL ? 0 : (int)((char *)r[i] - values);
		CHECK(v >= 0 && v < 8 && want[v], "'%.*s': value %d should not be there",
		    (int)name->len, name->s, v);
		CHECK(!got[v], "'%.*s': value %d twice", (int)name->len, name->s, v);
		got[v] = true;
	}
}

static void
check_set(const struct world *w)
{
	const char *why = subjects_check(w->set);
	CHECK(why == NULL, "subjects_check: %s", why);
}

static void
recheck(struct world *w)
{
	check_set(w);
	CHECK(subjects_count(w->set) == w->nlive, "count %zu, want %zu", subjects_count(w->set),
	    w->nlive);
	for (size_t i = 0; i < w->nrecent; i++)
		check_match(w, &w->recent[i]);
}

static void
add(struct world *w, const struct str *s, int v)
{
	size_t pos = 0;
	struct subject_error err = { 0, NULL };
	int want = naive_parse(s, &pos);
	int got = subject_parse(s->s, s->len, &err);
	CHECK(got == want, "subject_parse('%.*s') = %d, want %d", (int)s->len, s->s, got, want);
	if (got < 0) {
		CHECK(err.pos == pos && err.why != NULL, "'%.*s': error at %zu (%s), want %zu",
		    (int)s->len, s->s, err.pos, err.why ? err.why : "NULL", pos);
		return;
	}
	CHECK(subject_fixed_prefix(s->s, s->len) == naive_prefix(s), "fixed prefix of '%.*s'",
	    (int)s->len, s->s);
	if (w->nlive == MAX_ENTRIES)
		return;
	CHECK(subjects_add(w->set, s->s, s->len, value_ptr(v)) == 0, "add: out of memory");
	w->live[w->nlive].pat = *s;
	w->live[w->nlive].value = v;
	w->nlive++;
	recheck(w);
}

static void
remove_at(struct world *w, size_t i)
{
	memmove(&w->live[i], &w->live[i + 1], (w->nlive - i - 1) * sizeof(w->live[0]));
	w->nlive--;
}

static void
remove_one(struct world *w, const struct str *s, int v)
{
	size_t i = 0;
	while (i < w->nlive && !(w->live[i].value == v && same_pattern(&w->live[i].pat, s)))
		i++;
	int r = subjects_remove(w->set, s->s, s->len, value_ptr(v));
	CHECK(r == (i < w->nlive ? 0 : -1), "remove('%.*s', %d) = %d", (int)s->len, s->s, v, r);
	if (i < w->nlive)
		remove_at(w, i);
	recheck(w);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char alpha[] = "ab.*>#";
	struct world w;
	memset(&w, 0, sizeof(w));
	if ((w.set = subjects_new()) == NULL)
		return 0;

	size_t i = 0;
	for (int ops = 0; i < size && ops < MAX_OPS; ops++) {
		uint8_t op = data[i++];
		int v = i < size && data[i] != '\n' ? data[i++] & 7 : 0;
		struct str s = { .len = 0 };
		while (i < size && data[i] != '\n') {
			uint8_t b = data[i++];
			if (s.len < MAX_STR)
				s.s[s.len++] = b >= 0x80 ? alpha[b % 6] : (char)b;
		}
		i++; /* the '\n' */
		switch (op == '+' ? 0 : op == '-' ? 1 : op == '~' ? 2 : op == '?' ? 3 : op % 4) {
		case 0:
			add(&w, &s, v);
			break;
		case 1:
			remove_one(&w, &s, v);
			break;
		case 2:
			if (w.nlive > 0) {
				size_t k = (size_t)v % w.nlive;
				struct str pat = w.live[k].pat;
				void *value = value_ptr(w.live[k].value);
				remove_at(&w, k);
				CHECK(subjects_remove(w.set, pat.s, pat.len, value) == 0,
				    "remove a live entry");
				recheck(&w);
			}
			break;
		default:
			check_match(&w, &s);
			w.recent[w.nrecent < RECENT ? w.nrecent++ : (size_t)ops % RECENT] = s;
			check_match(&w, &s); /* again: from the cache */
			check_set(&w);
			break;
		}
	}

	while (w.nlive > 0) {
		struct entry e = w.live[w.nlive - 1];
		w.nlive--;
		CHECK(subjects_remove(w.set, e.pat.s, e.pat.len, value_ptr(e.value)) == 0,
		    "remove at the end");
	}
	recheck(&w);
	struct subjects_stats st;
	subjects_stats(w.set, &st);
	CHECK(st.nodes == 1, "%zu nodes left with no pattern", st.nodes);
	subjects_free(w.set);
	return 0;
}
