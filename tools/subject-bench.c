/* subject-bench.c - micro-benchmark of wildcard subjects (src/subject.c),
 * the numbers issue 25 asks for, without a broker around them:
 *
 *   1. subscribe and unsubscribe: subject_parse and subjects_add of N
 *      distinct patterns (both dialects), then subjects_remove of them all;
 *      total milliseconds (the target: under 100 ms for 10,000);
 *   2. match rate with N patterns of which 4 match each name published:
 *      the same name again and again (the cache answers), and names that
 *      are each new to the cache (the tree is walked), against a baseline
 *      of N exact names in a uthash table, looked up by name as eftd finds
 *      a destination: the same name again and again, and N names in turn.
 *
 *   build/subject-bench [-n PATTERNS] [-r ROUNDS] [-m MATCHES]
 *
 * Each measurement runs ROUNDS times (default 5); the median and the best
 * are printed.  Built with the normal flags (make build/subject-bench), not
 * part of make test. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uthash.h>

#include "eft/subject.h"

#define MAX_ROUNDS 101

static volatile size_t sink; /* keeps the loops' work observable */

static double
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void
report(const char *what, double *ms, int rounds, long ops)
{
	qsort(ms, (size_t)rounds, sizeof(*ms), cmp_double);
	double med = ms[rounds / 2], best = ms[0];
	if (ops > 0)
		printf("%-44s median %9.2f ns/op (%6.2f M/s)   best %9.2f ns/op\n", what,
		    med * 1e6 / (double)ops, (double)ops / med / 1e3, best * 1e6 / (double)ops);
	else
		printf("%-44s median %9.2f ms   best %9.2f ms\n", what, med, best);
}

static void
die(const char *what)
{
	fprintf(stderr, "subject-bench: %s\n", what);
	exit(1);
}

/* Pattern i of n: four shapes, none matching "price.stock.*" names. */
static void
pattern(char *buf, size_t size, int i)
{
	switch (i % 4) {
	case 0: snprintf(buf, size, "price.s%d.*", i); break;
	case 1: snprintf(buf, size, "quote.%d.>", i); break;
	case 2: snprintf(buf, size, "#.x%d", i); break;
	default: snprintf(buf, size, "*.stock.y%d.#", i); break;
	}
}

/* The 4 patterns that match every "price.stock.NAME". */
static const char *const matching[4] = { "price.stock.*", "price.#", "price.stock.>", "*.stock.#" };

struct exact {
	UT_hash_handle hh;
	void *subs[4];
	char name[32];
};

int
main(int argc, char **argv)
{
	int n = 10000, rounds = 5, opt;
	long matches = 2000000;
	while ((opt = getopt(argc, argv, "n:r:m:")) != -1) {
		switch (opt) {
		case 'n': n = atoi(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'm': matches = atol(optarg); break;
		default:
			fprintf(stderr, "usage: subject-bench [-n PATTERNS] [-r ROUNDS] [-m MATCHES]\n");
			return 2;
		}
	}
	if (n < 4 || rounds < 1 || rounds > MAX_ROUNDS || matches < 1)
		die("bad arguments");
	char (*pats)[32] = malloc((size_t)n * sizeof(*pats));
	if (pats == NULL)
		die("out of memory");
	for (int i = 0; i < n - 4; i++)
		pattern(pats[i], sizeof(pats[i]), i);
	for (int i = 0; i < 4; i++)
		snprintf(pats[n - 4 + i], sizeof(pats[0]), "%s", matching[i]);
	double ms[MAX_ROUNDS];

	/* 1. subscribe and unsubscribe */
	double add_ms[MAX_ROUNDS], del_ms[MAX_ROUNDS];
	for (int r = 0; r < rounds; r++) {
		struct subjects *set = subjects_new();
		if (set == NULL)
			die("out of memory");
		double t0 = now_ms();
		for (int i = 0; i < n; i++) {
			size_t len = strlen(pats[i]);
			struct subject_error err;
			if (subject_parse(pats[i], len, &err) < 0 ||
			    subjects_add(set, pats[i], len, &pats[i]) < 0)
				die("add failed");
		}
		double t1 = now_ms();
		for (int i = 0; i < n; i++)
			if (subjects_remove(set, pats[i], strlen(pats[i]), &pats[i]) < 0)
				die("remove failed");
		double t2 = now_ms();
		add_ms[r] = t1 - t0;
		del_ms[r] = t2 - t1;
		ms[r] = t2 - t0;
		subjects_free(set);
	}
	char what[96];
	printf("%d patterns, %d rounds, %ld matches a round\n", n, rounds, matches);
	snprintf(what, sizeof(what), "subscribe %d patterns (parse + add)", n);
	report(what, add_ms, rounds, 0);
	snprintf(what, sizeof(what), "unsubscribe %d patterns (remove)", n);
	report(what, del_ms, rounds, 0);
	snprintf(what, sizeof(what), "subscribe + unsubscribe %d patterns", n);
	report(what, ms, rounds, 0);

	/* 2. matching, 4 of n patterns matching each name */
	struct subjects *set = subjects_new();
	if (set == NULL)
		die("out of memory");
	for (int i = 0; i < n; i++)
		if (subjects_add(set, pats[i], strlen(pats[i]), &pats[i]) < 0)
			die("add failed");
	struct subjects_stats st;
	subjects_stats(set, &st);
	printf("the tree: %zu nodes\n", st.nodes);

	/* The names published: 100,000 distinct ones, so that a name comes
	 * round again only after the 1024-name cache has long forgotten it. */
	enum { NAMES = 100000 };
	char (*names)[32] = malloc(NAMES * sizeof(*names));
	size_t *lens = malloc(NAMES * sizeof(*lens));
	if (names == NULL || lens == NULL)
		die("out of memory");
	for (int i = 0; i < NAMES; i++) {
		snprintf(names[i], sizeof(names[i]), "price.stock.N%05d", i);
		lens[i] = strlen(names[i]);
	}
	size_t k;
	if (subjects_match(set, names[0], lens[0], &k) == NULL || k != 4)
		die("the name does not get its 4 values");

	uint64_t hits0 = 0, misses0 = 0;
	for (int r = 0; r < rounds; r++) {
		subjects_stats(set, &st);
		hits0 = st.cache_hits;
		double t0 = now_ms();
		for (long i = 0; i < matches; i++) {
			subjects_match(set, names[7], lens[7], &k);
			sink += k;
		}
		ms[r] = now_ms() - t0;
	}
	subjects_stats(set, &st);
	report("match, the same name (cache hits)", ms, rounds, matches);
	if (st.cache_hits - hits0 != (uint64_t)matches)
		die("the same name missed the cache");

	/* 1,000 recent names in turn: fewer than the cache holds. */
	for (int r = 0; r < rounds; r++) {
		subjects_stats(set, &st);
		misses0 = st.cache_misses;
		double t0 = now_ms();
		for (long i = 0; i < matches; i++) {
			subjects_match(set, names[i % 1000], lens[i % 1000], &k);
			sink += k;
		}
		ms[r] = now_ms() - t0;
	}
	subjects_stats(set, &st);
	report("match, 1,000 names in turn", ms, rounds, matches);
	printf("  (%.1f%% of those were misses)\n",
	    100.0 * (double)(st.cache_misses - misses0) / (double)matches);

	for (int r = 0; r < rounds; r++) {
		subjects_stats(set, &st);
		misses0 = st.cache_misses;
		double t0 = now_ms();
		for (long i = 0; i < matches; i++) {
			subjects_match(set, names[i % NAMES], lens[i % NAMES], &k);
			sink += k;
		}
		ms[r] = now_ms() - t0;
	}
	subjects_stats(set, &st);
	report("match, a new name each time (cache misses)", ms, rounds, matches);
	printf("  (%.1f%% of those were misses)\n",
	    100.0 * (double)(st.cache_misses - misses0) / (double)matches);

	/* The baseline: n exact names, 4 subscribers on each, found by name. */
	struct exact *table = NULL, *all = calloc((size_t)n, sizeof(*all));
	if (all == NULL)
		die("out of memory");
	for (int i = 0; i < n; i++) {
		snprintf(all[i].name, sizeof(all[i].name), "price.stock.N%05d", i * (NAMES / n));
		HASH_ADD_STR(table, name, &all[i]);
	}
	for (int r = 0; r < rounds; r++) {
		double t0 = now_ms();
		for (long i = 0; i < matches; i++) {
			struct exact *e;
			HASH_FIND(hh, table, names[70], lens[70], e);
			sink += e != NULL ? 4 : 0;
		}
		ms[r] = now_ms() - t0;
	}
	report("baseline: exact name, the same name", ms, rounds, matches);
	for (int r = 0; r < rounds; r++) {
		double t0 = now_ms();
		for (long i = 0; i < matches; i++) {
			struct exact *e;
			size_t j = (size_t)(i * (NAMES / n)) % NAMES;
			HASH_FIND(hh, table, names[j], lens[j], e);
			sink += e != NULL ? 4 : 0;
		}
		ms[r] = now_ms() - t0;
	}
	snprintf(what, sizeof(what), "baseline: exact name, %d names in turn", n < NAMES ? n : NAMES);
	report(what, ms, rounds, matches);

	HASH_CLEAR(hh, table);
	free(all);
	subjects_free(set);
	free(names);
	free(lens);
	free(pats);
	return 0;
}
