/* Unit tests for lib/cost.c: a reply's price from the pricing table, its "*" row,
 * no table, negative counts. */
#include "cost.h"

#include "test.h"

/* Doubles computed exactly in the cases below; compare with a tolerance anyway. */
static int near(double a, double b)
{
    return a - b < 1e-9 && b - a < 1e-9;
}

static void test_cost(void)
{
    json_t *pricing = json_loads("{\"claude-x\":{\"input\":3,\"output\":15},"
                                 "\"gpt-y\":{\"input\":0.15,\"output\":0.6},"
                                 "\"*\":{\"input\":1,\"output\":2}}", 0, NULL);
    json_t *no_star = json_loads("{\"claude-x\":{\"input\":3,\"output\":15}}", 0, NULL);
    CHECK(near(cost_usd(pricing, "claude-x", 1000000, 2000000), 33.0));
    CHECK(near(cost_usd(pricing, "claude-x", 1000, 500), 0.0105));
    CHECK(near(cost_usd(pricing, "gpt-y", 2000000, 1000000), 0.9));
    CHECK(near(cost_usd(pricing, "unknown", 1000000, 1000000), 3.0));   /* "*" */
    CHECK(near(cost_usd(pricing, NULL, 1000000, 0), 1.0));
    CHECK(near(cost_usd(no_star, "unknown", 1000000, 1000000), 0.0));
    CHECK(near(cost_usd(NULL, "claude-x", 1000000, 1000000), 0.0));
    CHECK(near(cost_usd(pricing, "claude-x", -5, 0), 0.0));
    json_decref(no_star);
    json_decref(pricing);
}

int main(void)
{
    test_cost();
    return TEST_MAIN_END();
}
