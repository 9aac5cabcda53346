/* subject.c - wildcard subjects: parsing patterns, the reference matcher,
 * and sets of patterns as a tree per element (see subject.h).
 *
 * The reference matcher (subject_match) is the greedy glob algorithm over
 * elements: '#' is glob's '*', '*' is '?', '>' is '?' then '*'.  Only the
 * last '#' seen is ever gone back to, so it needs no memory and no
 * recursion, and is O(plen * nlen) at worst.
 *
 * A set is a tree: one node per distinct pattern prefix, its children keyed
 * by element.  Every child, wildcard or not, is in one hash table of edges
 * keyed by (parent, element), so a node carries no table of its own and the
 * whole tree is freed by walking that table (no recursion: a pattern may
 * have any number of elements).  A match runs the tree as an NFA over the
 * name's elements (Thompson's construction): the set of active nodes moves
 * one element at a time, each node at most once per element, so '#' costs
 * no backtracking and "#.a.#.a.#.a" against "a.a.a.a.a.a" stays polynomial:
 * O(elements * active nodes).  Consecutive '#' are one '#' in the tree.
 *
 * Answers are cached per name in an open-addressing table (linear probing,
 * at most half full), as nats-server's sublist caches them: a publish to a
 * recent name costs one hash and a compare.  A full cache drops an entry
 * picked at random.  Any change to the set bumps a generation number: every
 * entry of an older one counts as an empty slot, so the cache is dropped
 * whole in O(1), and slots keep their memory for reuse. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eft/subject.h"

enum kind { K_LITERAL, K_STAR, K_GT, K_HASH };

/* Cache bounds: at most CACHE_NAMES names, and only short names with few
 * values, so that the cache holds under 1 MB whatever clients send.
 * A name with more values costs a walk anyway to deliver them all. */
#define CACHE_NAMES      1024
#define CACHE_SLOTS      2048      /* a power of two, twice CACHE_NAMES: probes stay short */
#define CACHE_NAME_MAX   256
#define CACHE_VALUES_MAX 64
#define EDGES_INITIAL    16        /* a power of two */

struct node {
	struct node *parent;
	struct node *next;              /* in its bucket of set->edges */
	struct node *star, *gt, *hash;  /* wildcard children: also in set->edges */
	size_t hashv;                   /* edge_hash(parent, element) */
	size_t nkids;                   /* children of every kind */
	void **vals;                    /* the values of patterns that end here */
	size_t nvals, capvals;
	uint64_t active;                /* the match step that last made it active */
	uint64_t collected;             /* the match that last took its values */
	enum kind kind;
	size_t elen;
	char elem[];
};

struct slot {
	uint64_t gen;                   /* not set->gen: a free slot */
	uint64_t hashv;
	size_t nlen, nvals;
	size_t cap;                     /* of buf: nvals pointers, then the name */
	char *buf;
};

/* The active nodes for one element of a match. */
struct active {
	struct node **v;
	size_t n, cap;
};

struct subjects {
	struct node *root;
	struct node **edges;            /* every node but the root, by (parent, element) */
	size_t nbuckets, nedges;
	size_t count;                   /* (pattern, value) entries */
	uint64_t gen;                   /* bumped by every change: older slots are stale */
	uint64_t step, matches;         /* stamps for node->active and node->collected */
	struct slot *cache;             /* CACHE_SLOTS of them, made at the first match */
	struct active cur, nxt;
	void **out;                     /* a walk's answer */
	size_t outcap;
	size_t *seen;                   /* dedupe: indexes into out, plus one */
	size_t seencap;
	uint64_t hits, misses;
	size_t cached;                  /* names in the cache, of this generation */
	uint64_t random;                /* picks what a full cache drops */
};

/* ---- elements ---- */

/* The end of the element that starts at off (off <= len): the next dot, or len. */
static size_t
elem_end(const char *s, size_t len, size_t off)
{
	if (off >= len)
		return len;
	const char *dot = memchr(s + off, '.', len - off);
	return dot ? (size_t)(dot - s) : len;
}

static enum kind
kind_of(const char *e, size_t elen)
{
	if (elen != 1)
		return K_LITERAL;
	switch (e[0]) {
	case '*': return K_STAR;
	case '>': return K_GT;
	case '#': return K_HASH;
	default:  return K_LITERAL;
	}
}

/* memcmp for lengths that may be 0 (an empty buffer may be NULL). */
static bool
bytes_equal(const char *a, const char *b, size_t n)
{
	return n == 0 || memcmp(a, b, n) == 0;
}

static int
parse_error(struct subject_error *err, size_t pos, const char *why)
{
	if (err != NULL) {
		err->pos = pos;
		err->why = why;
	}
	return -1;
}

int
subject_parse(const char *s, size_t len, struct subject_error *err)
{
	bool wild = false;
	for (size_t off = 0, end; off <= len && !wild; off = end + 1) {
		end = elem_end(s, len, off);
		wild = kind_of(s + off, end - off) != K_LITERAL;
	}
	if (!wild)
		return 0;

	bool seen_hash = false, seen_gt = false;
	for (size_t off = 0, end; off <= len; off = end + 1) {
		end = elem_end(s, len, off);
		enum kind k = kind_of(s + off, end - off);
		if (end == off)
			return parse_error(err, off, "empty element");
		if (k == K_GT && end != len)
			return parse_error(err, off, "'>' must be the last element");
		if ((k == K_GT && seen_hash) || (k == K_HASH && seen_gt))
			return parse_error(err, off,
			    "'#' (RabbitMQ) and '>' (ActiveMQ) are two dialects: use one");
		seen_hash |= k == K_HASH;
		seen_gt |= k == K_GT;
	}
	return 1;
}

bool
subject_match(const char *pat, size_t plen, const char *name, size_t nlen)
{
	/* The current elements' offsets; past the last element: len + 1. */
	size_t pi = 0, ni = 0;
	/* The last '#' (or '>'): the pattern after it, and where in the name
	 * it stopped taking elements.  SIZE_MAX: none yet. */
	size_t back_pi = SIZE_MAX, back_ni = 0;

	for (;;) {
		if (pi > plen && ni > nlen)
			return true;
		if (pi <= plen) {
			size_t pe = elem_end(pat, plen, pi);
			enum kind k = kind_of(pat + pi, pe - pi);
			if (k == K_HASH) {
				pi = back_pi = pe + 1;
				back_ni = ni;
				continue;
			}
			if (ni <= nlen) {
				size_t ne = elem_end(name, nlen, ni);
				if (k == K_GT) {
					/* One element, then as '#'. */
					pi = back_pi = pe + 1;
					ni = back_ni = ne + 1;
					continue;
				}
				if (k == K_STAR || (pe - pi == ne - ni &&
				    bytes_equal(pat + pi, name + ni, pe - pi))) {
					pi = pe + 1;
					ni = ne + 1;
					continue;
				}
			}
		}
		/* A mismatch: the last '#' takes one element more, if any is left. */
		if (back_pi == SIZE_MAX || back_ni > nlen)
			return false;
		back_ni = elem_end(name, nlen, back_ni) + 1;
		pi = back_pi;
		ni = back_ni;
	}
}

size_t
subject_inner_hash(const char *pat, size_t plen)
{
	size_t first = plen;   /* the '#' of the current run of them, if any */
	for (size_t off = 0, end; off <= plen; off = end + 1) {
		end = elem_end(pat, plen, off);
		if (kind_of(pat + off, end - off) == K_HASH) {
			if (first == plen)
				first = off;
		} else if (first != plen) {
			return first;
		}
	}
	return plen;
}

size_t
subject_fixed_prefix(const char *pat, size_t plen)
{
	for (size_t off = 0, end; off <= plen; off = end + 1) {
		end = elem_end(pat, plen, off);
		enum kind k = kind_of(pat + off, end - off);
		/* '#' may match zero elements: the dot before it is not fixed. */
		if (k == K_HASH)
			return off > 0 ? off - 1 : 0;
		if (k != K_LITERAL)
			return off;
	}
	return plen;
}

/* ---- the tree ---- */

/* Eight bytes at a time, each word multiplied in (topic names are tens of
 * bytes, and a publish hashes its whole name for the cache); mix() then
 * spreads the bits so that the low ones (the bucket) are good. */
static uint64_t
bytes_hash(const char *s, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15u ^ n;
	for (; n >= 8; s += 8, n -= 8) {
		uint64_t w;
		memcpy(&w, s, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdu;
		h ^= h >> 32;
	}
	uint64_t tail = 0;
	for (size_t i = 0; i < n; i++)
		tail |= (uint64_t)(unsigned char)s[i] << (8 * i);
	return (h ^ tail) * 0xc4ceb9fe1a85ec53u;
}

static uint64_t
mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdu;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53u;
	h ^= h >> 33;
	return h;
}

/* The key of an edge; ehash is bytes_hash of the element, computed once
 * per element of a name and used with every active parent. */
static size_t
edge_hash(const struct node *parent, uint64_t ehash)
{
	return (size_t)mix(ehash ^ ((uint64_t)(uintptr_t)parent * 0x9e3779b97f4a7c15u));
}

static struct node **
wild_slot(struct node *parent, enum kind k)
{
	switch (k) {
	case K_STAR: return &parent->star;
	case K_GT:   return &parent->gt;
	case K_HASH: return &parent->hash;
	default:     return NULL;
	}
}

/* The literal child of parent for element e, or NULL. */
static struct node *
literal_child(const struct subjects *set, const struct node *parent, const char *e, size_t elen,
    uint64_t ehash)
{
	if (parent->nkids == 0)
		return NULL;
	size_t h = edge_hash(parent, ehash);
	for (struct node *c = set->edges[h & (set->nbuckets - 1)]; c != NULL; c = c->next)
		if (c->hashv == h && c->parent == parent && c->elen == elen &&
		    c->kind == K_LITERAL && bytes_equal(c->elem, e, elen))
			return c;
	return NULL;
}

static struct node *
child(const struct subjects *set, struct node *parent, enum kind k, const char *e, size_t elen)
{
	if (k != K_LITERAL)
		return *wild_slot(parent, k);
	return literal_child(set, parent, e, elen, bytes_hash(e, elen));
}

/* Twice the buckets when there are more edges than buckets.  Failing to
 * grow only makes the chains longer: nothing depends on it. */
static void
edges_grow(struct subjects *set)
{
	if (set->nedges <= set->nbuckets || set->nbuckets > SIZE_MAX / 2 / sizeof(*set->edges))
		return;
	size_t nb = set->nbuckets * 2;
	struct node **b = calloc(nb, sizeof(*b));
	if (b == NULL)
		return;
	for (size_t i = 0; i < set->nbuckets; i++) {
		struct node *c = set->edges[i], *next;
		for (; c != NULL; c = next) {
			next = c->next;
			c->next = b[c->hashv & (nb - 1)];
			b[c->hashv & (nb - 1)] = c;
		}
	}
	free(set->edges);
	set->edges = b;
	set->nbuckets = nb;
}

/* A new child of parent, linked in; NULL if out of memory. */
static struct node *
node_new(struct subjects *set, struct node *parent, enum kind k, const char *e, size_t elen)
{
	struct node *c = calloc(1, sizeof(*c) + elen);
	if (c == NULL)
		return NULL;
	c->parent = parent;
	c->kind = k;
	c->elen = elen;
	if (elen > 0)
		memcpy(c->elem, e, elen);
	c->hashv = edge_hash(parent, bytes_hash(e, elen));
	struct node **bucket = &set->edges[c->hashv & (set->nbuckets - 1)];
	c->next = *bucket;
	*bucket = c;
	if (k != K_LITERAL)
		*wild_slot(parent, k) = c;
	parent->nkids++;
	set->nedges++;
	edges_grow(set);
	return c;
}

static void
node_unlink(struct subjects *set, struct node *c)
{
	struct node **p = &set->edges[c->hashv & (set->nbuckets - 1)];
	while (*p != c)
		p = &(*p)->next;
	*p = c->next;
	if (c->kind != K_LITERAL)
		*wild_slot(c->parent, c->kind) = NULL;
	c->parent->nkids--;
	set->nedges--;
}

/* Free n and its ancestors while they end no pattern and lead nowhere. */
static void
prune(struct subjects *set, struct node *n)
{
	while (n != set->root && n->nvals == 0 && n->nkids == 0) {
		struct node *parent = n->parent;
		node_unlink(set, n);
		free(n->vals);
		free(n);
		n = parent;
	}
}

struct subjects *
subjects_new(void)
{
	struct subjects *set = calloc(1, sizeof(*set));
	if (set == NULL)
		return NULL;
	set->root = calloc(1, sizeof(*set->root));
	set->edges = calloc(EDGES_INITIAL, sizeof(*set->edges));
	if (set->root == NULL || set->edges == NULL) {
		free(set->root);
		free(set->edges);
		free(set);
		return NULL;
	}
	set->nbuckets = EDGES_INITIAL;
	set->gen = 1;
	return set;
}

void
subjects_free(struct subjects *set)
{
	if (set == NULL)
		return;
	for (size_t i = 0; i < set->nbuckets; i++) {
		struct node *c = set->edges[i], *next;
		for (; c != NULL; c = next) {
			next = c->next;
			free(c->vals);
			free(c);
		}
	}
	free(set->edges);
	free(set->root->vals);
	free(set->root);
	if (set->cache != NULL)
		for (size_t i = 0; i < CACHE_SLOTS; i++)
			free(set->cache[i].buf);
	free(set->cache);
	free(set->cur.v);
	free(set->nxt.v);
	free(set->out);
	free(set->seen);
	free(set);
}

int
subjects_add(struct subjects *set, const char *pat, size_t len, void *value)
{
	struct node *n = set->root;
	for (size_t off = 0, end; off <= len; off = end + 1) {
		end = elem_end(pat, len, off);
		enum kind k = kind_of(pat + off, end - off);
		if (k == K_HASH && n->kind == K_HASH)
			continue;               /* "#.#" is "#" */
		struct node *c = child(set, n, k, pat + off, end - off);
		if (c == NULL && (c = node_new(set, n, k, pat + off, end - off)) == NULL)
			goto fail;
		n = c;
	}
	if (n->nvals == n->capvals) {
		size_t cap = n->capvals ? n->capvals * 2 : 1;
		void **v = cap <= SIZE_MAX / sizeof(*v) ? realloc(n->vals, cap * sizeof(*v)) : NULL;
		if (v == NULL)
			goto fail;
		n->vals = v;
		n->capvals = cap;
	}
	n->vals[n->nvals++] = value;
	set->count++;
	set->gen++;
	set->cached = 0;
	return 0;

fail:
	prune(set, n); /* what this call made and left empty */
	return -1;
}

int
subjects_remove(struct subjects *set, const char *pat, size_t len, void *value)
{
	struct node *n = set->root;
	for (size_t off = 0, end; off <= len; off = end + 1) {
		end = elem_end(pat, len, off);
		enum kind k = kind_of(pat + off, end - off);
		if (k == K_HASH && n->kind == K_HASH)
			continue;
		if ((n = child(set, n, k, pat + off, end - off)) == NULL)
			return -1;
	}
	size_t i = 0;
	while (i < n->nvals && n->vals[i] != value)
		i++;
	if (i == n->nvals)
		return -1;
	n->vals[i] = n->vals[--n->nvals];
	if (n->nvals == 0) {
		free(n->vals);
		n->vals = NULL;
		n->capvals = 0;
	}
	set->count--;
	set->gen++;
	set->cached = 0;
	prune(set, n);
	return 0;
}

size_t
subjects_count(const struct subjects *set)
{
	return set->count;
}

void
subjects_stats(const struct subjects *set, struct subjects_stats *st)
{
	st->nodes = set->nedges + 1;
	st->cache_hits = set->hits;
	st->cache_misses = set->misses;
}

/* What is wrong with the set's structures, or NULL (tests and fuzzers). */
const char *
subjects_check(const struct subjects *set)
{
	size_t nodes = 0, kids = set->root->nkids, vals = set->root->nvals;
	for (size_t b = 0; b < set->nbuckets; b++) {
		for (const struct node *c = set->edges[b]; c != NULL; c = c->next) {
			const struct node *p = c->parent;
			if ((c->hashv & (set->nbuckets - 1)) != b ||
			    c->hashv != edge_hash(p, bytes_hash(c->elem, c->elen)))
				return "a node is not where its hash says";
			const struct node *slot = c->kind == K_STAR ? p->star :
			    c->kind == K_GT ? p->gt : c->kind == K_HASH ? p->hash : c;
			if (c->kind != kind_of(c->elem, c->elen) || slot != c)
				return "a wildcard node is not its parent's";
			if (c->nvals == 0 && c->nkids == 0)
				return "a node with no pattern and no children was not pruned";
			if (c->nvals > c->capvals || (c->kind == K_HASH && c->hash != NULL))
				return "a node's values or '#' child are wrong";
			nodes++;
			kids += c->nkids;
			vals += c->nvals;
		}
	}
	if (nodes != set->nedges || kids != set->nedges)
		return "the edges and the children counted differ";
	if (vals != set->count)
		return "the values and the count differ";
	if (set->cache == NULL)
		return NULL;
	const size_t mask = CACHE_SLOTS - 1;
	size_t cached = 0;
	for (size_t i = 0; i < CACHE_SLOTS; i++) {
		if (set->cache[i].gen != set->gen)
			continue;
		cached++;
		/* Reachable: no free slot between its home and it. */
		for (size_t j = set->cache[i].hashv & mask; j != i; j = (j + 1) & mask)
			if (set->cache[j].gen != set->gen)
				return "a cached name cannot be found";
	}
	if (cached != set->cached || cached > CACHE_NAMES)
		return "the cached names and their count differ";
	return NULL;
}

/* ---- matching ---- */

/* Make n active for this step, with the '#' below it (which may match zero
 * elements); a node already active was added with its '#' then. */
static int
activate(struct active *a, struct node *n, uint64_t step)
{
	for (; n != NULL && n->active != step; n = n->hash) {
		if (a->n == a->cap) {
			size_t cap = a->cap ? a->cap * 2 : 16;
			struct node **v = realloc(a->v, cap * sizeof(*v));
			if (v == NULL)
				return -1;
			a->v = v;
			a->cap = cap;
		}
		a->v[a->n++] = n;
		n->active = step;
	}
	return 0;
}

/* Append n's values to the answer, once per match. */
static int
collect(struct subjects *set, struct node *n, size_t *k)
{
	if (n->collected == set->matches || n->nvals == 0)
		return 0;
	n->collected = set->matches;
	if (*k + n->nvals > set->outcap) {
		size_t cap = set->outcap ? set->outcap : 16;
		while (cap < *k + n->nvals)
			cap *= 2;
		void **v = realloc(set->out, cap * sizeof(*v));
		if (v == NULL)
			return -1;
		set->out = v;
		set->outcap = cap;
	}
	memcpy(set->out + *k, n->vals, n->nvals * sizeof(*n->vals));
	*k += n->nvals;
	return 0;
}

/* The values of every pattern matching name into set->out, *k of them,
 * each node's once; a value may still be there twice (two patterns). */
static int
walk(struct subjects *set, const char *name, size_t len, size_t *k)
{
	set->matches++;
	*k = 0;
	set->cur.n = 0;
	if (activate(&set->cur, set->root, ++set->step) < 0)
		return -1;
	for (size_t off = 0, end; off <= len && set->cur.n > 0; off = end + 1) {
		end = elem_end(name, len, off);
		const char *e = name + off;
		size_t elen = end - off;
		/* A name's '*', '>' or '#' element is matched by wildcards only,
		 * as subject_match does: no pattern has it as a literal. */
		bool literal = kind_of(e, elen) == K_LITERAL;
		uint64_t ehash = literal ? bytes_hash(e, elen) : 0;
		uint64_t step = ++set->step;
		set->nxt.n = 0;
		for (size_t i = 0; i < set->cur.n; i++) {
			struct node *n = set->cur.v[i], *c;
			if (literal && (c = literal_child(set, n, e, elen, ehash)) != NULL &&
			    activate(&set->nxt, c, step) < 0)
				return -1;
			if (n->star != NULL && activate(&set->nxt, n->star, step) < 0)
				return -1;
			/* '>' takes this element and every one after it. */
			if (n->gt != NULL && collect(set, n->gt, k) < 0)
				return -1;
			/* '#' takes this element and stays. */
			if (n->kind == K_HASH && activate(&set->nxt, n, step) < 0)
				return -1;
		}
		struct active t = set->cur;
		set->cur = set->nxt;
		set->nxt = t;
	}
	/* The patterns that end where the name ends (none if the loop ran out
	 * of active nodes early). */
	for (size_t i = 0; i < set->cur.n; i++)
		if (collect(set, set->cur.v[i], k) < 0)
			return -1;
	return 0;
}

static size_t
ptr_hash(const void *p)
{
	return (size_t)mix((uint64_t)(uintptr_t)p);
}

/* Keep the first of each value in set->out (values are opaque and may be
 * NULL: the table holds indexes). */
static int
dedupe(struct subjects *set, size_t *k)
{
	if (*k < 2)
		return 0;
	size_t size = 16;
	while (size < 2 * *k)
		size *= 2;
	if (size > set->seencap) {
		size_t *s = realloc(set->seen, size * sizeof(*s));
		if (s == NULL)
			return -1;
		set->seen = s;
		set->seencap = size;
	}
	memset(set->seen, 0, size * sizeof(*set->seen));
	size_t kept = 0;
	for (size_t i = 0; i < *k; i++) {
		void *v = set->out[i];
		size_t h = ptr_hash(v) & (size - 1);
		while (set->seen[h] != 0 && set->out[set->seen[h] - 1] != v)
			h = (h + 1) & (size - 1);
		if (set->seen[h] != 0)
			continue;
		set->out[kept] = v;
		set->seen[h] = ++kept;
	}
	*k = kept;
	return 0;
}

/* Take the entry at slot i out, moving back the ones after it that probed
 * past it (linear probing's deletion: no tombstones). */
static void
cache_delete(struct subjects *set, size_t i)
{
	struct slot *c = set->cache;
	const size_t mask = CACHE_SLOTS - 1;
	c[i].gen = 0;
	for (size_t j = (i + 1) & mask; c[j].gen == set->gen; j = (j + 1) & mask) {
		/* j's entry may fill the hole unless its home lies after the hole. */
		size_t home = c[j].hashv & mask;
		if (((j - home) & mask) >= ((j - i) & mask)) {
			struct slot t = c[i];
			c[i] = c[j];
			c[j] = t; /* the hole, with the buffer it had, to reuse */
			i = j;
		}
	}
	set->cached--;
}

/* Remember the answer for name, if it is small enough: at slot i (where
 * its lookup stopped) or, when the cache is full, wherever it lands after
 * an entry picked at random is dropped.  Failing to is no error. */
static void
cache_put(struct subjects *set, size_t i, uint64_t h, const char *name, size_t len, size_t k)
{
	if (set->cache == NULL || len > CACHE_NAME_MAX || k > CACHE_VALUES_MAX)
		return;
	const size_t mask = CACHE_SLOTS - 1;
	if (set->cached == CACHE_NAMES) {
		/* Random slots until one is taken (two tries on average): each
		 * entry alike.  Taking the first entry after a random slot would
		 * spare those deep in long runs, and the runs would grow. */
		size_t v;
		do {
			set->random = set->random * 6364136223846793005u + 1442695040888963407u;
			v = (size_t)(set->random >> 33) & mask;
		} while (set->cache[v].gen != set->gen);
		cache_delete(set, v);
		for (i = h & mask; set->cache[i].gen == set->gen; i = (i + 1) & mask)
			;
	}
	struct slot *s = &set->cache[i];
	size_t need = k * sizeof(void *) + len;
	if (need > s->cap) {
		char *buf = realloc(s->buf, need);
		if (buf == NULL)
			return;
		s->buf = buf;
		s->cap = need;
	}
	if (k > 0)
		memcpy(s->buf, set->out, k * sizeof(void *));
	if (len > 0)
		memcpy(s->buf + k * sizeof(void *), name, len);
	s->gen = set->gen;
	s->hashv = h;
	s->nlen = len;
	s->nvals = k;
	set->cached++;
}

void *const *
subjects_match(struct subjects *set, const char *name, size_t len, size_t *n)
{
	if (set->count == 0) {
		*n = 0;
		return NULL;
	}
	uint64_t h = mix(bytes_hash(name, len));
	size_t i = 0;
	if (set->cache == NULL)
		set->cache = calloc(CACHE_SLOTS, sizeof(*set->cache)); /* NULL: no cache */
	if (set->cache != NULL) {
		/* At most half the slots are taken: the probe ends. */
		for (i = h & (CACHE_SLOTS - 1); set->cache[i].gen == set->gen;
		    i = (i + 1) & (CACHE_SLOTS - 1)) {
			const struct slot *s = &set->cache[i];
			if (s->hashv == h && s->nlen == len &&
			    (len == 0 || memcmp(s->buf + s->nvals * sizeof(void *), name, len) == 0)) {
				set->hits++;
				*n = s->nvals;
				return (void *const *)s->buf;
			}
		}
	}
	set->misses++;
	size_t k;
	if (walk(set, name, len, &k) < 0 || dedupe(set, &k) < 0) {
		*n = (size_t)-1;
		return NULL;
	}
	cache_put(set, i, h, name, len, k);
	*n = k;
	return set->out;
}
