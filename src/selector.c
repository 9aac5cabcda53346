/* selector.c - JMS message selectors: a recursive-descent compiler into a
 * flat array of nodes, and an evaluator with SQL's three-valued logic.
 *
 * The nodes and the unescaped strings live in one allocation made before
 * parsing (a selector of len bytes never needs more than len nodes or len
 * bytes of strings), so compiling has one clean-up path and matching only
 * reads.  AND and OR take any number of operands as a list, so that a long
 * chain of conditions does not make the tree deep: depth is bounded by
 * SELECTOR_MAX_DEPTH, which bounds the evaluator's recursion.  See
 * selector.h for the choices made where JMS leaves room. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "eft/selector.h"

#define NONE UINT16_MAX

enum op {
	OP_IDENT, OP_STR, OP_NUM, OP_BOOL,
	OP_NEG, OP_POS, OP_ADD, OP_SUB, OP_MUL, OP_DIV,
	OP_EQ, OP_NE, OP_LT, OP_GT, OP_LE, OP_GE,
	OP_AND, OP_OR, OP_NOT,
	OP_IN, OP_LIKE, OP_BETWEEN, OP_ISNULL,
};

/* What a node is known to be at compile time; an identifier can be anything. */
enum type { T_ANY, T_NUM, T_STR, T_BOOL };

struct node {
	uint8_t op;
	uint8_t type;
	uint8_t depth;
	int16_t esc;           /* LIKE: the escape byte, or -1 */
	uint16_t a, b, c;      /* operands; AND, OR: a is the first of a list */
	uint16_t next;         /* the next in an AND, OR or IN list */
	uint32_t pos;          /* 1-based, for errors */
	union {
		double num;
		bool b;
		struct {
			uint32_t off, len; /* in the string pool */
		} s;
	} v;
};

struct selector {
	struct node *n;
	char *pool;
	uint16_t root;
};

enum tok {
	TK_EOF, TK_IDENT, TK_STR, TK_NUM, TK_LP, TK_RP, TK_COMMA,
	TK_EQ, TK_NE, TK_LT, TK_GT, TK_LE, TK_GE, TK_PLUS, TK_MINUS, TK_STAR, TK_SLASH,
	/* keywords */
	TK_AND, TK_OR, TK_NOT, TK_IN, TK_LIKE, TK_ESCAPE, TK_BETWEEN, TK_IS, TK_NULL,
	TK_TRUE, TK_FALSE,
};

static const struct {
	const char *name;
	enum tok tok;
} keywords[] = {
	{ "AND", TK_AND }, { "OR", TK_OR }, { "NOT", TK_NOT }, { "IN", TK_IN },
	{ "LIKE", TK_LIKE }, { "ESCAPE", TK_ESCAPE }, { "BETWEEN", TK_BETWEEN },
	{ "IS", TK_IS }, { "NULL", TK_NULL }, { "TRUE", TK_TRUE }, { "FALSE", TK_FALSE },
};

struct parser {
	const char *text;
	size_t len;
	size_t at;             /* where the lexer is */
	enum tok tok;          /* the current token */
	size_t tok_at;
	uint32_t str_off, str_len; /* TK_IDENT, TK_STR: the pool copy */
	double num;
	struct selector *s;
	size_t nnodes, max_nodes;
	size_t pool_len;
	int depth;
	char *err;
	size_t errlen;
	bool failed;
};

/* Record the first error; later ones follow from it. */
static void
fail_at(struct parser *p, size_t at, const char *fmt, ...)
{
	if (p->failed)
		return;
	p->failed = true;
	if (p->err == NULL || p->errlen == 0)
		return;
	int n = snprintf(p->err, p->errlen, "selector: position %zu: ", at + 1);
	if (n < 0 || (size_t)n >= p->errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->err + n, p->errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

static bool
ident_start(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' || c >= 0x80;
}

static bool
ident_char(unsigned char c)
{
	return ident_start(c) || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

static bool
is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* Length of the decimal number at s (digits[.digits][e[+-]digits], or
 * .digits...), or 0 if there is none. */
static size_t
num_scan(const char *s, size_t len)
{
	size_t i = 0, digits = 0;
	while (i < len && is_digit((unsigned char)s[i]))
		i++, digits++;
	if (i < len && s[i] == '.') {
		i++;
		while (i < len && is_digit((unsigned char)s[i]))
			i++, digits++;
	}
	if (digits == 0)
		return 0;
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		size_t j = i + 1;
		if (j < len && (s[j] == '+' || s[j] == '-'))
			j++;
		if (j < len && is_digit((unsigned char)s[j])) {
			while (j < len && is_digit((unsigned char)s[j]))
				j++;
			i = j;
		}
	}
	return i;
}

/* s as a number if all of it is one (a sign allowed); false if not.
 * Copied to a bounded buffer since strtod wants a NUL: no allocation. */
static bool
num_parse(const char *s, size_t len, double *out)
{
	char buf[64];
	size_t i = 0;
	if (len > 0 && (s[0] == '+' || s[0] == '-'))
		i = 1;
	if (len >= sizeof(buf) || num_scan(s + i, len - i) != len - i || len - i == 0)
		return false;
	/* Most header numbers are short integers: exact as a double, and
	 * strtod is the slow part of a match. */
	if (len - i <= 15) {
		uint64_t n = 0;
		size_t j = i;
		while (j < len && is_digit((unsigned char)s[j]))
			n = n * 10 + (uint64_t)(s[j++] - '0');
		if (j == len) {
			*out = s[0] == '-' ? -(double)n : (double)n;
			return true;
		}
	}
	memcpy(buf, s, len);
	buf[len] = '\0';
	*out = strtod(buf, NULL);
	return true;
}

/* Read the next token. */
static void
lex(struct parser *p)
{
	const char *t = p->text;
	while (p->at < p->len && (t[p->at] == ' ' || t[p->at] == '\t' || t[p->at] == '\n' ||
	    t[p->at] == '\r' || t[p->at] == '\f'))
		p->at++;
	p->tok_at = p->at;
	if (p->at >= p->len) {
		p->tok = TK_EOF;
		return;
	}
	unsigned char c = (unsigned char)t[p->at];
	size_t n;
	if (ident_start(c)) {
		size_t start = p->at;
		while (p->at < p->len && ident_char((unsigned char)t[p->at]))
			p->at++;
		n = p->at - start;
		for (size_t k = 0; k < sizeof(keywords) / sizeof(keywords[0]); k++) {
			if (strlen(keywords[k].name) == n &&
			    strncasecmp(keywords[k].name, t + start, n) == 0) {
				p->tok = keywords[k].tok;
				return;
			}
		}
		p->tok = TK_IDENT;
		p->str_off = (uint32_t)p->pool_len;
		p->str_len = (uint32_t)n;
		memcpy(p->s->pool + p->pool_len, t + start, n);
		p->pool_len += n;
		return;
	}
	if ((n = num_scan(t + p->at, p->len - p->at)) > 0) {
		char buf[64];
		/* Longer literals only add digits strtod would round away; keep
		 * the magnitude by refusing them rather than guessing. */
		if (n >= sizeof(buf)) {
			fail_at(p, p->at, "number too long");
			p->tok = TK_EOF;
			return;
		}
		memcpy(buf, t + p->at, n);
		buf[n] = '\0';
		p->num = strtod(buf, NULL);
		p->at += n;
		p->tok = TK_NUM;
		return;
	}
	if (c == '\'') {
		/* '' inside is one quote. */
		p->str_off = (uint32_t)p->pool_len;
		size_t i = p->at + 1;
		for (;;) {
			if (i >= p->len) {
				fail_at(p, p->at, "unterminated string");
				p->tok = TK_EOF;
				return;
			}
			if (t[i] == '\'') {
				if (i + 1 < p->len && t[i + 1] == '\'')
					i++;
				else
					break;
			}
			p->s->pool[p->pool_len++] = t[i++];
		}
		p->str_len = (uint32_t)(p->pool_len - p->str_off);
		p->at = i + 1;
		p->tok = TK_STR;
		return;
	}
	p->at++;
	switch (c) {
	case '(': p->tok = TK_LP; return;
	case ')': p->tok = TK_RP; return;
	case ',': p->tok = TK_COMMA; return;
	case '=': p->tok = TK_EQ; return;
	case '+': p->tok = TK_PLUS; return;
	case '-': p->tok = TK_MINUS; return;
	case '*': p->tok = TK_STAR; return;
	case '/': p->tok = TK_SLASH; return;
	case '<':
		p->tok = TK_LT;
		if (p->at < p->len && t[p->at] == '>')
			p->tok = TK_NE, p->at++;
		else if (p->at < p->len && t[p->at] == '=')
			p->tok = TK_LE, p->at++;
		return;
	case '>':
		p->tok = TK_GT;
		if (p->at < p->len && t[p->at] == '=')
			p->tok = TK_GE, p->at++;
		return;
	default:
		fail_at(p, p->tok_at, "unexpected character '%c'", c >= 0x20 && c < 0x7f ? c : '?');
		p->tok = TK_EOF;
		return;
	}
}

/* A new node of op at pos whose depth follows from its operands (a, b, c
 * and, for lists, a's siblings); NONE on error. */
static uint16_t
node_new(struct parser *p, enum op op, enum type type, size_t pos, uint16_t a, uint16_t b,
    uint16_t c)
{
	if (p->failed)
		return NONE;
	if (p->nnodes >= p->max_nodes) {
		fail_at(p, pos, "more than %d nodes", SELECTOR_MAX_NODES);
		return NONE;
	}
	struct node *n = &p->s->n[p->nnodes];
	memset(n, 0, sizeof(*n));
	n->op = (uint8_t)op;
	n->type = (uint8_t)type;
	n->esc = -1;
	n->a = a, n->b = b, n->c = c;
	n->next = NONE;
	n->pos = (uint32_t)pos + 1;
	int depth = 0;
	uint16_t kids[3] = { a, b, c };
	for (int k = 0; k < 3; k++)
		if (kids[k] != NONE && p->s->n[kids[k]].depth > depth)
			depth = p->s->n[kids[k]].depth;
	if (depth + 1 > SELECTOR_MAX_DEPTH) {
		fail_at(p, pos, "nested deeper than %d levels", SELECTOR_MAX_DEPTH);
		return NONE;
	}
	n->depth = (uint8_t)(depth + 1);
	return (uint16_t)p->nnodes++;
}

static enum type
type_of(const struct parser *p, uint16_t i)
{
	return (enum type)p->s->n[i].type;
}

/* Operand i must be able to be a number (arithmetic, ordering, BETWEEN). */
static void
want_num(struct parser *p, uint16_t i, const char *what)
{
	if (!p->failed && type_of(p, i) != T_ANY && type_of(p, i) != T_NUM)
		fail_at(p, p->s->n[i].pos - 1, "%s needs a number", what);
}

/* Operand i must be able to be a condition (AND, OR, NOT, the whole). */
static void
want_bool(struct parser *p, uint16_t i)
{
	if (!p->failed && type_of(p, i) != T_ANY && type_of(p, i) != T_BOOL)
		fail_at(p, p->s->n[i].pos - 1, "expected a condition");
}

static bool
expect(struct parser *p, enum tok tok, const char *what)
{
	if (p->failed)
		return false;
	if (p->tok != tok) {
		fail_at(p, p->tok_at, "expected %s", what);
		return false;
	}
	lex(p);
	return !p->failed;
}

/* Entering a nested construct (parentheses, NOT, a sign): the parser's own
 * recursion is bounded like the tree's. */
static bool
enter(struct parser *p)
{
	if (++p->depth > SELECTOR_MAX_DEPTH) {
		fail_at(p, p->tok_at, "nested deeper than %d levels", SELECTOR_MAX_DEPTH);
		return false;
	}
	return true;
}

static uint16_t parse_or(struct parser *);

static uint16_t
parse_primary(struct parser *p)
{
	size_t at = p->tok_at;
	uint16_t i = NONE;
	if (p->failed)
		return NONE;
	switch (p->tok) {
	case TK_NUM:
		if ((i = node_new(p, OP_NUM, T_NUM, at, NONE, NONE, NONE)) != NONE)
			p->s->n[i].v.num = p->num;
		break;
	case TK_STR:
	case TK_IDENT:
		i = node_new(p, p->tok == TK_STR ? OP_STR : OP_IDENT, p->tok == TK_STR ? T_STR : T_ANY,
		    at, NONE, NONE, NONE);
		if (i != NONE) {
			p->s->n[i].v.s.off = p->str_off;
			p->s->n[i].v.s.len = p->str_len;
		}
		break;
	case TK_TRUE:
	case TK_FALSE:
		if ((i = node_new(p, OP_BOOL, T_BOOL, at, NONE, NONE, NONE)) != NONE)
			p->s->n[i].v.b = p->tok == TK_TRUE;
		break;
	case TK_LP:
		if (!enter(p))
			return NONE;
		lex(p);
		i = parse_or(p);
		p->depth--;
		if (!expect(p, TK_RP, "')'"))
			return NONE;
		return i;
	case TK_EOF:
		/* Nothing read yet: an empty or all-blank text. */
		fail_at(p, at, p->nnodes == 0 && p->depth == 0 ? "empty selector" : "unexpected end");
		return NONE;
	default:
		fail_at(p, at, "expected a value");
		return NONE;
	}
	lex(p);
	return p->failed ? NONE : i;
}

static uint16_t
parse_unary(struct parser *p)
{
	if (p->tok != TK_PLUS && p->tok != TK_MINUS)
		return parse_primary(p);
	size_t at = p->tok_at;
	bool neg = p->tok == TK_MINUS;
	if (!enter(p))
		return NONE;
	lex(p);
	uint16_t x = parse_unary(p);
	p->depth--;
	if (x == NONE || p->failed)
		return NONE;
	want_num(p, x, neg ? "unary -" : "unary +");
	/* A signed literal stays a literal: -5 is one node. */
	if (p->s->n[x].op == OP_NUM) {
		if (neg)
			p->s->n[x].v.num = -p->s->n[x].v.num;
		p->s->n[x].pos = (uint32_t)at + 1;
		return x;
	}
	return node_new(p, neg ? OP_NEG : OP_POS, T_NUM, at, x, NONE, NONE);
}

/* The two arithmetic levels: one loop, with the level's tokens. */
static const struct arith_level {
	enum tok tok[2];
	enum op op[2];
	const char *sym[2];
} arith_levels[] = {
	{ { TK_PLUS, TK_MINUS }, { OP_ADD, OP_SUB }, { "+", "-" } },
	{ { TK_STAR, TK_SLASH }, { OP_MUL, OP_DIV }, { "*", "/" } },
};

static uint16_t
parse_arith(struct parser *p, size_t level)
{
	const struct arith_level *l = &arith_levels[level];
	bool last = level + 1 == sizeof(arith_levels) / sizeof(arith_levels[0]);
	uint16_t x = last ? parse_unary(p) : parse_arith(p, level + 1);
	while (!p->failed && (p->tok == l->tok[0] || p->tok == l->tok[1])) {
		size_t at = p->tok_at;
		int i = p->tok == l->tok[1];
		lex(p);
		uint16_t y = last ? parse_unary(p) : parse_arith(p, level + 1);
		if (p->failed)
			return NONE;
		want_num(p, x, l->sym[i]);
		want_num(p, y, l->sym[i]);
		x = node_new(p, l->op[i], T_NUM, at, x, y, NONE);
	}
	return p->failed ? NONE : x;
}

/* A string literal (IN lists, LIKE patterns), as a node. */
static uint16_t
parse_string(struct parser *p)
{
	if (p->failed)
		return NONE;
	if (p->tok != TK_STR) {
		fail_at(p, p->tok_at, "expected a string");
		return NONE;
	}
	return parse_primary(p);
}

static uint16_t
parse_like(struct parser *p, uint16_t x, size_t at)
{
	uint16_t pat = parse_string(p);
	if (pat == NONE)
		return NONE;
	int esc = -1;
	if (p->tok == TK_ESCAPE) {
		lex(p);
		if (p->tok != TK_STR) {
			fail_at(p, p->tok_at, "expected a string");
			return NONE;
		}
		if (p->str_len != 1) {
			fail_at(p, p->tok_at, "ESCAPE needs exactly one character");
			return NONE;
		}
		esc = (unsigned char)p->s->pool[p->str_off];
		lex(p);
	}
	/* Every escape must escape something. */
	const struct node *pn = &p->s->n[pat];
	const char *s = p->s->pool + pn->v.s.off;
	for (uint32_t k = 0; esc >= 0 && k < pn->v.s.len; k++) {
		if ((unsigned char)s[k] != esc)
			continue;
		if (++k == pn->v.s.len) {
			fail_at(p, pn->pos - 1, "the pattern ends in its ESCAPE character");
			return NONE;
		}
	}
	uint16_t i = node_new(p, OP_LIKE, T_BOOL, at, x, pat, NONE);
	if (i != NONE)
		p->s->n[i].esc = (int16_t)esc;
	return i;
}

static uint16_t
parse_in(struct parser *p, uint16_t x, size_t at)
{
	if (!expect(p, TK_LP, "'('"))
		return NONE;
	uint16_t first = parse_string(p), last = first;
	while (!p->failed && p->tok == TK_COMMA) {
		lex(p);
		uint16_t y = parse_string(p);
		if (y == NONE)
			return NONE;
		p->s->n[last].next = y;
		last = y;
	}
	if (!expect(p, TK_RP, "')'"))
		return NONE;
	return node_new(p, OP_IN, T_BOOL, at, x, first, NONE);
}

static uint16_t
parse_cmp(struct parser *p)
{
	uint16_t x = parse_arith(p, 0);
	if (p->failed)
		return NONE;
	size_t at = p->tok_at;
	enum op op;
	switch (p->tok) {
	case TK_EQ: op = OP_EQ; break;
	case TK_NE: op = OP_NE; break;
	case TK_LT: op = OP_LT; break;
	case TK_GT: op = OP_GT; break;
	case TK_LE: op = OP_LE; break;
	case TK_GE: op = OP_GE; break;
	default: op = OP_NOT; break; /* none of them */
	}
	if (op != OP_NOT) {
		lex(p);
		uint16_t y = parse_arith(p, 0);
		if (p->failed)
			return NONE;
		enum type tx = type_of(p, x), ty = type_of(p, y);
		if (op != OP_EQ && op != OP_NE) {
			if ((tx == T_STR || tx == T_BOOL) || (ty == T_STR || ty == T_BOOL)) {
				fail_at(p, at, "strings and booleans compare only with = and <>");
				return NONE;
			}
		} else if (tx != T_ANY && ty != T_ANY && tx != ty) {
			fail_at(p, at, "comparing values of different types");
			return NONE;
		}
		return node_new(p, op, T_BOOL, at, x, y, NONE);
	}

	bool neg = false;
	if (p->tok == TK_IS) {
		lex(p);
		if (p->tok == TK_NOT)
			neg = true, lex(p);
		if (!expect(p, TK_NULL, "NULL"))
			return NONE;
		if (p->s->n[x].op != OP_IDENT) {
			fail_at(p, at, "IS NULL needs an identifier");
			return NONE;
		}
		x = node_new(p, OP_ISNULL, T_BOOL, at, x, NONE, NONE);
		return neg ? node_new(p, OP_NOT, T_BOOL, at, x, NONE, NONE) : x;
	}
	if (p->tok == TK_NOT) {
		neg = true;
		lex(p);
		if (p->tok != TK_IN && p->tok != TK_LIKE && p->tok != TK_BETWEEN) {
			fail_at(p, p->tok_at, "expected IN, LIKE or BETWEEN");
			return NONE;
		}
	}
	enum tok kw = p->tok;
	if (kw != TK_IN && kw != TK_LIKE && kw != TK_BETWEEN)
		return x;
	lex(p);
	if (kw == TK_BETWEEN) {
		uint16_t lo = parse_arith(p, 0);
		if (!expect(p, TK_AND, "AND"))
			return NONE;
		uint16_t hi = parse_arith(p, 0);
		if (p->failed)
			return NONE;
		want_num(p, x, "BETWEEN");
		want_num(p, lo, "BETWEEN");
		want_num(p, hi, "BETWEEN");
		x = node_new(p, OP_BETWEEN, T_BOOL, at, x, lo, hi);
	} else {
		/* JMS: identifier [NOT] IN / LIKE. */
		if (p->s->n[x].op != OP_IDENT) {
			fail_at(p, at, "%s needs an identifier", kw == TK_IN ? "IN" : "LIKE");
			return NONE;
		}
		x = kw == TK_IN ? parse_in(p, x, at) : parse_like(p, x, at);
	}
	if (x == NONE || p->failed)
		return NONE;
	/* NOT of UNKNOWN is UNKNOWN, as JMS wants for NOT IN etc. with NULL. */
	return neg ? node_new(p, OP_NOT, T_BOOL, at, x, NONE, NONE) : x;
}

static uint16_t
parse_not(struct parser *p)
{
	if (p->tok != TK_NOT)
		return parse_cmp(p);
	size_t at = p->tok_at;
	if (!enter(p))
		return NONE;
	lex(p);
	uint16_t x = parse_not(p);
	p->depth--;
	if (x == NONE || p->failed)
		return NONE;
	want_bool(p, x);
	return node_new(p, OP_NOT, T_BOOL, at, x, NONE, NONE);
}

/* x AND y AND ... (or OR) as one node over a list. */
static uint16_t
parse_list(struct parser *p, enum tok tok, enum op op, uint16_t (*sub)(struct parser *))
{
	uint16_t x = sub(p);
	if (p->failed || p->tok != tok)
		return p->failed ? NONE : x;
	size_t at = p->tok_at;
	uint16_t last = x, deepest = x;
	want_bool(p, x);
	while (!p->failed && p->tok == tok) {
		lex(p);
		uint16_t y = sub(p);
		if (p->failed)
			return NONE;
		want_bool(p, y);
		p->s->n[last].next = y;
		last = y;
		if (p->s->n[y].depth > p->s->n[deepest].depth)
			deepest = y;
	}
	/* Depth from the deepest operand; the list hangs from a. */
	uint16_t i = node_new(p, op, T_BOOL, at, deepest, NONE, NONE);
	if (i != NONE)
		p->s->n[i].a = x;
	return i;
}

static uint16_t
parse_and(struct parser *p)
{
	return parse_list(p, TK_AND, OP_AND, parse_not);
}

static uint16_t
parse_or(struct parser *p)
{
	return parse_list(p, TK_OR, OP_OR, parse_and);
}

struct selector *
selector_compile(const char *text, size_t len, char *err, size_t errlen)
{
	struct parser p = { .text = text, .len = len, .err = err, .errlen = errlen };
	struct selector *s;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	/* Every node takes at least one byte of text, as does every byte of
	 * the strings; one more node for an empty text's error. */
	p.max_nodes = len < SELECTOR_MAX_NODES ? len + 1 : SELECTOR_MAX_NODES;
	if (len > UINT32_MAX - 2) {
		fail_at(&p, 0, "too long");
		return NULL;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL)
		goto nomem;
	if ((s->n = calloc(p.max_nodes, sizeof(*s->n))) == NULL ||
	    (s->pool = malloc(len + 1)) == NULL)
		goto nomem;
	p.s = s;
	lex(&p);
	s->root = parse_or(&p);
	if (!p.failed && p.tok != TK_EOF)
		fail_at(&p, p.tok_at, p.tok == TK_RP ? "unexpected ')'" : "expected AND, OR or the end");
	if (!p.failed)
		want_bool(&p, s->root);
	if (p.failed)
		goto fail;
	return s;

nomem:
	fail_at(&p, 0, "out of memory");
fail:
	selector_free(s);
	return NULL;
}

void
selector_free(struct selector *s)
{
	if (s == NULL)
		return;
	free(s->n);
	free(s->pool);
	free(s);
}

/* ------------------------------------------------------------------------ */
/* Matching                                                                   */

/* A value while evaluating; V_NULL is also UNKNOWN. */
enum vtype { V_NULL, V_NUM, V_STR, V_BOOL };

struct val {
	enum vtype t;
	bool b;
	double num;
	const char *s;
	size_t len;
};

struct eval {
	const struct selector *sel;
	selector_lookup_fn lookup;
	void *arg;
};

static const struct val null_val = { .t = V_NULL };

static struct val
bool_val(bool b)
{
	return (struct val){ .t = V_BOOL, .b = b };
}

/* v as a number, or V_NULL if it is not one. */
static struct val
to_num(struct val v)
{
	if (v.t == V_STR) {
		double d;
		if (!num_parse(v.s, v.len, &d))
			return null_val;
		return (struct val){ .t = V_NUM, .num = d };
	}
	return v.t == V_NUM ? v : null_val;
}

/* v as a truth value: a boolean, a header "true" or "false", or UNKNOWN. */
static struct val
to_bool(struct val v)
{
	if (v.t == V_STR) {
		if (v.len == 4 && strncasecmp(v.s, "true", 4) == 0)
			return bool_val(true);
		if (v.len == 5 && strncasecmp(v.s, "false", 5) == 0)
			return bool_val(false);
		return null_val;
	}
	return v.t == V_BOOL ? v : null_val;
}

static struct val
compare(enum op op, struct val x, struct val y)
{
	if (x.t == V_NULL || y.t == V_NULL)
		return null_val;
	bool ordering = op != OP_EQ && op != OP_NE;
	if (x.t == V_NUM || y.t == V_NUM || (ordering && x.t == V_STR && y.t == V_STR)) {
		x = to_num(x);
		y = to_num(y);
		if (x.t == V_NULL || y.t == V_NULL)
			return null_val;
		switch (op) {
		case OP_EQ: return bool_val(x.num == y.num);
		case OP_NE: return bool_val(x.num != y.num);
		case OP_LT: return bool_val(x.num < y.num);
		case OP_GT: return bool_val(x.num > y.num);
		case OP_LE: return bool_val(x.num <= y.num);
		default: return bool_val(x.num >= y.num);
		}
	}
	if (ordering)
		return null_val;
	bool eq;
	if (x.t == V_BOOL || y.t == V_BOOL) {
		x = to_bool(x);
		y = to_bool(y);
		if (x.t == V_NULL || y.t == V_NULL)
			return null_val;
		eq = x.b == y.b;
	} else {
		eq = x.len == y.len && (x.len == 0 || memcmp(x.s, y.s, x.len) == 0);
	}
	return bool_val(op == OP_EQ ? eq : !eq);
}

/* The index after the UTF-8 character at s[i]. */
static size_t
utf8_next(const char *s, size_t i, size_t n)
{
	i++;
	while (i < n && ((unsigned char)s[i] & 0xc0) == 0x80)
		i++;
	return i;
}

/* SQL LIKE without recursion: on a mismatch go back to the last '%' and
 * let it take one more character (the usual wildcard matcher; remembering
 * only the last '%' is enough). */
static bool
like_match(const char *s, size_t n, const char *pat, size_t m, int esc)
{
	size_t i = 0, j = 0, star_j = SIZE_MAX, star_i = 0;
	while (i < n) {
		if (j < m) {
			unsigned char c = (unsigned char)pat[j];
			if ((int)c == esc) {
				if (s[i] == pat[j + 1]) {
					i++, j += 2;
					continue;
				}
			} else if (c == '%') {
				star_j = ++j;
				star_i = i;
				continue;
			} else if (c == '_') {
				i = utf8_next(s, i, n);
				j++;
				continue;
			} else if ((unsigned char)s[i] == c) {
				i++, j++;
				continue;
			}
		}
		if (star_j == SIZE_MAX)
			return false;
		star_i = utf8_next(s, star_i, n);
		i = star_i;
		j = star_j;
	}
	while (j < m && pat[j] == '%' && (unsigned char)pat[j] != esc)
		j++;
	return j == m;
}

static struct val
eval(const struct eval *e, uint16_t i)
{
	const struct node *n = &e->sel->n[i];
	const char *pool = e->sel->pool;
	struct val x, y, z;

	switch ((enum op)n->op) {
	case OP_IDENT:
		x = (struct val){ .t = V_STR };
		if (!e->lookup(e->arg, pool + n->v.s.off, n->v.s.len, &x.s, &x.len))
			return null_val;
		return x;
	case OP_STR:
		return (struct val){ .t = V_STR, .s = pool + n->v.s.off, .len = n->v.s.len };
	case OP_NUM:
		return (struct val){ .t = V_NUM, .num = n->v.num };
	case OP_BOOL:
		return bool_val(n->v.b);
	case OP_NEG:
	case OP_POS:
		x = to_num(eval(e, n->a));
		if (x.t == V_NUM && n->op == OP_NEG)
			x.num = -x.num;
		return x;
	case OP_ADD:
	case OP_SUB:
	case OP_MUL:
	case OP_DIV:
		x = to_num(eval(e, n->a));
		y = to_num(eval(e, n->b));
		if (x.t == V_NULL || y.t == V_NULL)
			return null_val;
		switch (n->op) {
		case OP_ADD: x.num += y.num; break;
		case OP_SUB: x.num -= y.num; break;
		case OP_MUL: x.num *= y.num; break;
		default:
			if (y.num == 0)
				return null_val;
			x.num /= y.num;
			break;
		}
		/* inf - inf and the like: no number, so UNKNOWN. */
		return x.num != x.num ? null_val : x;
	case OP_EQ:
	case OP_NE:
	case OP_LT:
	case OP_GT:
	case OP_LE:
	case OP_GE:
		return compare((enum op)n->op, eval(e, n->a), eval(e, n->b));
	case OP_NOT:
		x = to_bool(eval(e, n->a));
		if (x.t == V_BOOL)
			x.b = !x.b;
		return x;
	case OP_AND:
	case OP_OR: {
		/* FALSE decides AND, TRUE decides OR; else UNKNOWN if any was. */
		bool decide = n->op == OP_OR, unknown = false;
		for (uint16_t k = n->a; k != NONE; k = e->sel->n[k].next) {
			x = to_bool(eval(e, k));
			if (x.t == V_NULL)
				unknown = true;
			else if (x.b == decide)
				return bool_val(decide);
		}
		return unknown ? null_val : bool_val(!decide);
	}
	case OP_IN:
		x = eval(e, n->a);
		if (x.t == V_NULL)
			return null_val;
		for (uint16_t k = n->b; k != NONE; k = e->sel->n[k].next) {
			const struct node *m = &e->sel->n[k];
			if (m->v.s.len == x.len && (x.len == 0 || memcmp(pool + m->v.s.off, x.s, x.len) == 0))
				return bool_val(true);
		}
		return bool_val(false);
	case OP_LIKE: {
		x = eval(e, n->a);
		if (x.t == V_NULL)
			return null_val;
		const struct node *m = &e->sel->n[n->b];
		return bool_val(like_match(x.s, x.len, pool + m->v.s.off, m->v.s.len, n->esc));
	}
	case OP_BETWEEN:
		/* lo <= x AND x <= hi, with AND's rules for UNKNOWN. */
		x = eval(e, n->a);
		y = compare(OP_LE, eval(e, n->b), x);
		z = compare(OP_LE, x, eval(e, n->c));
		if ((y.t == V_BOOL && !y.b) || (z.t == V_BOOL && !z.b))
			return bool_val(false);
		return y.t == V_NULL || z.t == V_NULL ? null_val : bool_val(true);
	case OP_ISNULL: {
		const char *v;
		size_t vlen;
		const struct node *m = &e->sel->n[n->a];
		return bool_val(!e->lookup(e->arg, pool + m->v.s.off, m->v.s.len, &v, &vlen));
	}
	}
	return null_val;
}

bool
selector_match(const struct selector *s, selector_lookup_fn lookup, void *arg)
{
	struct eval e = { .sel = s, .lookup = lookup, .arg = arg };
	struct val v = to_bool(eval(&e, s->root));
	return v.t == V_BOOL && v.b;
}
