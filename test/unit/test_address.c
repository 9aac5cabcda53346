/* test_address.c - unit tests for address.c: the kinds of eftd's own names,
 * and RabbitMQ's forms (/exchange/..., /amq/queue/...) as eftd's names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "eft/address.h"

static void
test_own_names(void **state)
{
	(void)state;
	static const struct {
		const char *name;
		enum address_error e;
		enum address_kind kind;
	} cases[] = {
		{ "/queue/a", ADDRESS_OK, ADDR_QUEUE },
		{ "/topic/a.b", ADDRESS_OK, ADDR_TOPIC },
		{ "/temp-queue/r", ADDRESS_OK, ADDR_TEMP_QUEUE },
		{ "/reply-queue/x", ADDRESS_OK, ADDR_REPLY_QUEUE },
		{ "/queue/", ADDRESS_UNKNOWN, 0 },
		{ "/exchange/amq.topic/a", ADDRESS_UNKNOWN, 0 },   /* an alias, not a name */
		{ "queue/a", ADDRESS_UNKNOWN, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		enum address_kind kind;
		enum address_error e = address_parse(cases[i].name, strlen(cases[i].name), false, &kind);
		assert_int_equal(e, cases[i].e);
		if (e == ADDRESS_OK)
			assert_int_equal(kind, cases[i].kind);
	}
	enum address_kind kind;
	assert_int_equal(address_parse("/queue/a\nb", 10, true, &kind), ADDRESS_CRLF);
}

/* name -> (error, kind, alias, eftd's name or the unknown exchange) */
static void
check_alias(const char *name, enum address_error want_e, enum address_kind want_kind,
    enum address_alias_kind want_alias, const char *want_name)
{
	enum address_kind kind = ADDR_REPLY_QUEUE;
	struct address_alias a;
	enum address_error e = address_alias(name, strlen(name), &kind, &a);
	assert_int_equal(e, want_e);
	if (e == ADDRESS_OK) {
		char made[256];
		assert_true(a.prefix_len + a.rest_len < sizeof(made));
		memcpy(made, a.prefix, a.prefix_len);
		memcpy(made + a.prefix_len, a.rest, a.rest_len);
		made[a.prefix_len + a.rest_len] = '\0';
		assert_string_equal(made, want_name);
		assert_int_equal(kind, want_kind);
		assert_int_equal(a.kind, want_alias);
	} else if (e == ADDRESS_NO_EXCHANGE) {
		assert_int_equal(a.rest_len, strlen(want_name));
		assert_memory_equal(a.rest, want_name, a.rest_len);
	}
}

static void
test_rabbitmq_forms(void **state)
{
	(void)state;
	check_alias("/exchange/amq.topic/stock.ACME", ADDRESS_OK, ADDR_TOPIC, ALIAS_TOPIC,
	    "/topic/stock.ACME");
	check_alias("/exchange/amq.topic/a/b", ADDRESS_OK, ADDR_TOPIC, ALIAS_TOPIC, "/topic/a/b");
	check_alias("/exchange/amq.direct/k1", ADDRESS_OK, ADDR_TOPIC, ALIAS_DIRECT,
	    "/exchange/amq.direct/k1");
	check_alias("/exchange/amq.fanout", ADDRESS_OK, ADDR_TOPIC, ALIAS_FANOUT,
	    "/exchange/amq.fanout");
	check_alias("/exchange/amq.fanout/any.key", ADDRESS_OK, ADDR_TOPIC, ALIAS_FANOUT,
	    "/exchange/amq.fanout");
	check_alias("/amq/queue/orders", ADDRESS_OK, ADDR_QUEUE, ALIAS_QUEUE, "/queue/orders");
	check_alias("/exchange/does.not.exist/k", ADDRESS_NO_EXCHANGE, 0, 0, "does.not.exist");
	check_alias("/exchange/amq.topicX/k", ADDRESS_NO_EXCHANGE, 0, 0, "amq.topicX");
	check_alias("/exchange/amq.topic", ADDRESS_NO_KEY, 0, 0, NULL);
	check_alias("/exchange/amq.direct/", ADDRESS_NO_KEY, 0, 0, NULL);
	check_alias("/exchange/", ADDRESS_UNKNOWN, 0, 0, NULL);
	check_alias("/amq/queue/", ADDRESS_UNKNOWN, 0, 0, NULL);
	check_alias("/queue/a", ADDRESS_UNKNOWN, 0, 0, NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_names),
		cmocka_unit_test(test_rabbitmq_forms),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
