#include "cost.h"

double cost_usd(const json_t *pricing, const char *model, int64_t input_tokens,
                int64_t output_tokens)
{
    json_t *price = model ? json_object_get(pricing, model) : NULL;
    if (!json_is_object(price)) price = json_object_get(pricing, "*");
    if (!json_is_object(price)) return 0;
    double in = json_number_value(json_object_get(price, "input"));
    double out = json_number_value(json_object_get(price, "output"));
    return ((double)(input_tokens > 0 ? input_tokens : 0) * in +
            (double)(output_tokens > 0 ? output_tokens : 0) * out) / 1e6;
}
