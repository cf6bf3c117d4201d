import fc from 'fast-check';

/**
 * JSON values (keys and strings alike) made of what Postgres jsonb refuses — NUL and lone
 * surrogates — among quotes, backslashes, surrogate pairs and any other code unit.
 */
export const hostileJson = fc.jsonValue({
  stringUnit: fc.oneof(
    fc.constantFrom('\u0000', '\ud800', '\udbff', '\udc00', '\udfff', '\ud83d\ude00', '"', '\\'),
    fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  ),
  maxDepth: 6,
});
