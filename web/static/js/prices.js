// Prices for the usage page's estimate: Anthropic's published list prices
// in US dollars per million tokens, for the models named here, as they
// stood on PRICES_DATE. They are an estimate of what a session cost: a
// subscription is not billed per token, the long-context rate (input above
// 200,000 tokens on a 1M-context model) and batch discounts are not
// applied, and a subagent's tokens are priced at its session's model.

export const PRICES_DATE = '2025-11-24';
export const PRICES_SOURCE = 'Anthropic\'s published list prices (anthropic.com/pricing)';

// [model id, input, output, cache write (5 minutes), cache read] per MTok.
const TABLE = [
  ['claude-opus-4-5', 5, 25, 6.25, 0.5],
  ['claude-opus-4-1', 15, 75, 18.75, 1.5],
  ['claude-opus-4', 15, 75, 18.75, 1.5],
  ['claude-sonnet-4-5', 3, 15, 3.75, 0.3],
  ['claude-sonnet-4', 3, 15, 3.75, 0.3],
  ['claude-3-7-sonnet', 3, 15, 3.75, 0.3],
  ['claude-haiku-4-5', 1, 5, 1.25, 0.1],
  ['claude-3-5-haiku', 0.8, 4, 1, 0.08],
  ['claude-3-haiku', 0.25, 1.25, 0.3, 0.03],
];

/**
 * priceOf returns a model's prices {input, output, cacheWrite, cacheRead}
 * per MTok, or null for a model not in the table: a model id as the API
 * names it, with or without its date (claude-sonnet-4-5-20250929). An
 * alias (opus, sonnet) names no one model and has no price.
 */
export function priceOf(model) {
  if (typeof model !== 'string') return null;
  for (const [id, input, output, cacheWrite, cacheRead] of TABLE) {
    if (model === id || new RegExp('^' + id + '-\\d{8}$').test(model)) return { input, output, cacheWrite, cacheRead };
  }
  return null;
}

/** estimate returns the list price in US dollars of tokens {input, output, cacheWrite, cacheRead} at prices p. */
export function estimate(t, p) {
  return (t.input * p.input + t.output * p.output + t.cacheWrite * p.cacheWrite + t.cacheRead * p.cacheRead) / 1e6;
}
