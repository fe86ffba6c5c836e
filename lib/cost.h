/* cost: what a provider reply cost, from the operator's pricing table
 * (the file DSTREAM_PRICING names: {"model": {"input": usd_per_mtok, "output": ...}, "*": {...}}). */
#ifndef DSTREAM_COST_H
#define DSTREAM_COST_H

#include <jansson.h>
#include <stdint.h>

/* Cost in USD of input_tokens and output_tokens of model (NULL: the "*" price) by
 * pricing (NULL: none); 0 when the model has no price. Negative counts count as 0. */
double cost_usd(const json_t *pricing, const char *model, int64_t input_tokens, int64_t output_tokens);

#endif
